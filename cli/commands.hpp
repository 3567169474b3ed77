#pragma once
// The command table: every subcommand registers itself from its own cmd_<name>.cpp.
#include <CLI/CLI.hpp>

#include "app.hpp"

namespace gpuctl::cli {

struct CommandSpec {
  const char* group;  // its section in `gpuctl --help`
  // Adds the command (some add a pair: cordon and uncordon) to the app.
  void (*register_command)(CLI::App& app, AppContext& context);
};

const std::vector<CommandSpec>& command_table();

void register_nodes(CLI::App& app, AppContext& context);
void register_taint(CLI::App& app, AppContext& context);
void register_label(CLI::App& app, AppContext& context);
void register_cordon(CLI::App& app, AppContext& context);  // cordon and uncordon
void register_drain(CLI::App& app, AppContext& context);
void register_gpus(CLI::App& app, AppContext& context);
void register_submit(CLI::App& app, AppContext& context);
void register_jobs(CLI::App& app, AppContext& context);  // jobs and jobs clean
void register_logs(CLI::App& app, AppContext& context);
void register_quota(CLI::App& app, AppContext& context);  // quota, quota set/delete/fix
void register_diagnose(CLI::App& app, AppContext& context);
void register_backup(CLI::App& app, AppContext& context);  // backup and backup inspect
void register_restore(CLI::App& app, AppContext& context);
void register_config(CLI::App& app, AppContext& context);      // config view
void register_completion(CLI::App& app, AppContext& context);  // gpuctl completion bash|zsh|fish

}  // namespace gpuctl::cli
