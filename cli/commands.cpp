#include "commands.hpp"

namespace gpuctl::cli {

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = {
      {"nodes", "Inventory", &register_nodes},
  };
  return table;
}

}  // namespace gpuctl::cli
