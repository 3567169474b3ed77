#pragma once
// What taint, label, cordon and uncordon share: choosing the nodes (NODE..., -l, --all-gpu-nodes),
// --dry-run and -o, and reporting one line per node with the failures named at the end.
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "app.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"

namespace gpuctl::cli {

struct NodeChangeFlags {
  std::vector<std::string> args;  // node names (and, for taint and label, the specs after them)
  std::string selector;
  bool all_gpu_nodes = false;
  std::string dry_run = "none";
  std::string output = "text";
};

// Adds -l, --all-gpu-nodes, --dry-run and -o text|json|yaml|name.
void add_node_change_flags(CLI::App& cmd, NodeChangeFlags& flags);

// Validated (no I/O) common part of a node-change command.
struct NodeChangeRequest {
  ops::NodeSelection selection;
  ops::DryRun dry_run = ops::DryRun::none;
  std::string output;  // text, json, yaml or name
};
Result<NodeChangeRequest> validate_node_change_flags(const NodeChangeFlags& flags, std::vector<std::string> names);

// Splits "NODE... SPEC..." (kubectl's order: every node before the first spec).
struct NamesAndSpecs {
  std::vector<std::string> names;
  std::vector<std::string> specs;
};
Result<NamesAndSpecs> split_names_and_specs(const std::vector<std::string>& args, bool (*is_spec)(std::string_view),
                                            std::string_view what);

// Applies the planner to every selected node (one write each, retried on conflicts), then
// reports as report_node_changes does; the missing names are reported as failed.
ExitCode apply_and_report(AppContext& ctx, kube::Client& client, ops::SelectedNodes selected,
                          const ops::NodePlanner& planner, std::string_view operation, std::string_view verb,
                          const NodeChangeRequest& request);

// Prints the changes (text lines, or the NodeChangeList schema) and the failures on stderr;
// returns 1 when any node failed. `verb` is the past tense: "tainted", "cordoned", ...
ExitCode report_node_changes(AppContext& ctx, const std::vector<ops::NodeChange>& changes, std::string_view operation,
                             std::string_view verb, const NodeChangeRequest& request);

}  // namespace gpuctl::cli
