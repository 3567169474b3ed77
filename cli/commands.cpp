#include "commands.hpp"

namespace gpuctl::cli {

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = {
      {"Inventory", &register_nodes},
      {"Inventory", &register_gpus},
      {"Troubleshooting", &register_diagnose},
      {"Node administration", &register_taint},
      {"Node administration", &register_label},
      {"Node administration", &register_cordon},
      {"Node administration", &register_drain},
      {"GPU workloads", &register_submit},
      {"GPU workloads", &register_jobs},
      {"GPU workloads", &register_logs},
      {"GPU workloads", &register_quota},
      {"Backup", &register_backup},
      {"Backup", &register_restore},
      {"Configuration", &register_config},
      {"Configuration", &register_completion},
  };
  return table;
}

}  // namespace gpuctl::cli
