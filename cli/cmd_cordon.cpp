// gpuctl cordon / uncordon: mark nodes (un)schedulable, recording why, by whom and when.
#include "commands.hpp"
#include "gpuctl/util/time.hpp"
#include "node_changes.hpp"

namespace gpuctl::cli {
namespace {

struct CordonOptions {
  NodeChangeFlags nodes;
  std::string reason;
  bool cordon = true;
};

Result<ExitCode> run_cordon(const CordonOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(NodeChangeRequest request, validate_node_change_flags(o.nodes, o.nodes.args));
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::SelectedNodes selected, ops::select_nodes(*client, request.selection));
  ops::CordonRequest cordon;
  cordon.cordon = o.cordon;
  if (o.cordon) {
    cordon.reason = o.reason;
    GPUCTL_TRY_ASSIGN(cordon.by, client->whoami());
    cordon.at = util::format_rfc3339(std::chrono::system_clock::now());
  }
  // run
  auto planner = [&](const nlohmann::json& n) { return ops::plan_cordon(n, cordon); };
  return apply_and_report(ctx, *client, std::move(selected), planner, o.cordon ? "cordon" : "uncordon",
                          o.cordon ? "cordoned" : "uncordoned", request);
}

}  // namespace

void register_cordon(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<CordonOptions>();
  auto* cmd = app.add_subcommand("cordon", "Mark nodes unschedulable, recording why, by whom and when");
  cmd->footer(R"(The record is kept in the annotations gpuctl.io/cordon-reason, gpuctl.io/cordoned-by (the
user the API server knows you as) and gpuctl.io/cordoned-at; 'gpuctl nodes -o wide' shows it and
'gpuctl uncordon' clears it. A node that is already cordoned is left as it is ("unchanged"), with
its earlier record.

Examples:
  # Take a node out after ECC errors, saying why
  gpuctl cordon gpu-7 --reason "uncorrectable ECC errors, RMA ticket 4711"

  # Every H100 node, before a driver upgrade
  gpuctl cordon -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --reason "driver 550 upgrade")");
  cmd->add_option("nodes", o->nodes.args, "NODE...");
  add_node_change_flags(*cmd, o->nodes);
  cmd->add_option("--reason", o->reason, "Why the node is cordoned (recorded on the node)");
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_cordon(*o, ctx); }; });

  auto u = std::make_shared<CordonOptions>();
  u->cordon = false;
  auto* un = app.add_subcommand("uncordon", "Mark nodes schedulable again and clear their cordon record");
  un->footer(R"(Examples:
  # Bring a repaired node back
  gpuctl uncordon gpu-7

  # Every node cordoned for the upgrade
  gpuctl uncordon -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)");
  un->add_option("nodes", u->nodes.args, "NODE...");
  add_node_change_flags(*un, u->nodes);
  un->callback([u, &ctx] { ctx.run = [u, &ctx] { return run_cordon(*u, ctx); }; });
}

}  // namespace gpuctl::cli
