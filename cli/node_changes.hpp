#pragma once
// What taint, label, cordon and uncordon share: choosing the nodes (NODE..., -l, --all-gpu-nodes),
// --dry-run and -o, and reporting one line per node with the failures named at the end. Also what
// acts on diagnose's node-side findings: --verify before an uncordon (uncordon, drain --rolling)
// and diagnose --quarantine.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "app.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/diagnose/quarantine.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "ssh_flags.hpp"

namespace gpuctl::cli {

struct NodeChangeFlags {
  std::vector<std::string> args;  // node names (and, for taint and label, the specs after them)
  std::string selector;
  bool all_gpu_nodes = false;
  std::string dry_run = "none";
  std::string output = "text";
};

// Adds -l, --all-gpu-nodes, --dry-run and -o text|json|yaml|name.
void add_node_change_flags(CLI::App& cmd, HelpData& help, NodeChangeFlags& flags);

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

// ---- --verify ------------------------------------------------------------------------------------

// The long name of the first --ssh-* flag given on `cmd` (the "SSH options" group), "" when none:
// they only mean something where nodes are reached, so elsewhere they are refused.
std::string ssh_flag_given(const CLI::App& cmd);

// --verify's verifier: each node's GPUs probed over ssh as `gpus` probes them (the ssh flags, else
// ~/.ssh/config and GPUCTL_SSH_*), judged by diagnose's critical node findings. Keeps the runner.
class Verifier {
 public:
  Verifier(AppContext& ctx, const SshRequest& ssh);
  std::vector<ops::NodeVerification> operator()(const std::vector<nlohmann::json>& nodes) const;

 private:
  std::unique_ptr<ssh::Runner> runner_;
  ops::diagnose::VerifyOptions options_;
};

// ---- diagnose --quarantine ------------------------------------------------------------------------

struct QuarantineFlags {
  bool quarantine = false;
  bool yes = false;
  bool dry_run = false;
  std::string max = "10%";
  CLI::Option* max_opt = nullptr;
};
// Adds --quarantine, --yes, --dry-run and --max-quarantine.
void add_quarantine_flags(CLI::App& cmd, QuarantineFlags& flags);
// Checks the combinations, no I/O: the others need --quarantine, --yes and --dry-run exclude each
// other, and --quarantine needs a report with the node side: `excluded` names a flag given that
// rules it out (diagnose's --no-ssh, --list-checks), "" when none.
Result<void> validate_quarantine_flags(const QuarantineFlags& flags, std::string_view excluded);

// After the report: prints the quarantine plan (stdout for the table report, else stderr, so a
// JSON or YAML report stays one document), refuses it when the circuit breaker trips (3) or
// without --yes (2), and otherwise cordons the nodes (1 when a cordon failed). Returns
// `diagnosis` when there was nothing to refuse or fail.
Result<ExitCode> quarantine_nodes(AppContext& ctx, const QuarantineFlags& flags,
                                  const ops::diagnose::Snapshot& snapshot, const ops::diagnose::Report& report,
                                  bool on_stdout, ExitCode diagnosis);

}  // namespace gpuctl::cli
