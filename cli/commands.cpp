#include "commands.hpp"

namespace gpuctl::cli {

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = {
      {"nodes", "Inventory", &register_nodes},
      {"gpus", "Inventory", &register_gpus},
      {"taint", "Node administration", &register_taint},
      {"label", "Node administration", &register_label},
      {"cordon", "Node administration", &register_cordon},
      {"drain", "Node administration", &register_drain},
      {"submit", "GPU workloads", &register_submit},
      {"jobs", "GPU workloads", &register_jobs},
      {"quota", "GPU workloads", &register_quota},
  };
  return table;
}

}  // namespace gpuctl::cli
