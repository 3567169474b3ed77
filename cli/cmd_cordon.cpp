// gpuctl cordon / uncordon: mark nodes (un)schedulable, recording why, by whom and when;
// uncordon --verify brings back only the nodes whose GPUs pass diagnose's node-side checks.
#include <algorithm>

#include "commands.hpp"
#include "gpuctl/util/time.hpp"
#include "node_changes.hpp"

namespace gpuctl::cli {
namespace {

struct CordonOptions {
  NodeChangeFlags nodes;
  std::string reason;
  bool cordon = true;
  bool verify = false;  // uncordon --verify
  SshFlags ssh;
  CLI::App* cmd = nullptr;
};

// uncordon --verify: every node's GPUs probed at once, then one write per node: uncordoned when it
// passed, kept cordoned with the finding as its reason when it failed, left as it is when it could
// not be verified.
Result<ExitCode> run_verified_uncordon(AppContext& ctx, const SshRequest& ssh, const NodeChangeRequest& request) {
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::SelectedNodes selected, ops::select_nodes(*client, request.selection));
  std::vector<ops::NodeVerification> verifications = Verifier(ctx, ssh)(selected.nodes);
  ops::CordonRequest record;  // who and when, written with a failed node's reason
  bool any_failed = std::any_of(verifications.begin(), verifications.end(),
                                [](const auto& v) { return v.result == ops::VerifyResult::failed; });
  if (any_failed) {
    GPUCTL_TRY_ASSIGN(record.by, client->whoami());
    record.at = util::format_rfc3339(std::chrono::system_clock::now());
  }
  ops::ApplyOptions apply;
  apply.dry_run = request.dry_run;
  auto changes = ops::uncordon_verified(*client, selected.nodes, verifications, record, apply);
  for (auto& m : selected.missing) changes.push_back(std::move(m));
  return report_node_changes(ctx, changes, "uncordon", "uncordoned", request);
}

Result<ExitCode> run_cordon(const CordonOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(NodeChangeRequest request, validate_node_change_flags(o.nodes, o.nodes.args));
  if (std::string given = ssh_flag_given(*o.cmd); !given.empty() && !o.verify) {
    return fail(Errc::invalid_argument, given + " only applies with --verify (the GPUs are checked over ssh)");
  }
  if (o.verify) {
    GPUCTL_TRY_ASSIGN(SshRequest ssh, validate_ssh_flags(o.ssh));
    return run_verified_uncordon(ctx, ssh, request);
  }
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
  document(*cmd, ctx.help(),
           {R"(The record is kept in the annotations gpuctl.io/cordon-reason, gpuctl.io/cordoned-by (the
user the API server knows you as) and gpuctl.io/cordoned-at; 'gpuctl nodes -o wide' shows it and
'gpuctl uncordon' clears it. A node that is already cordoned is left as it is ("unchanged"), with
its earlier record.)",
            {{"Take a node out after ECC errors, saying why",
              R"(gpuctl cordon gpu-7 --reason "uncorrectable ECC errors, RMA ticket 4711")"},
             {"Every H100 node, before a driver upgrade",
              R"(gpuctl cordon -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --reason "driver 550 upgrade")"}}});
  completes(cmd->add_option("nodes", o->nodes.args, "NODE..."), ctx.help(), ValueKind::node);
  add_node_change_flags(*cmd, ctx.help(), o->nodes);
  cmd->add_option("--reason", o->reason, "Why the node is cordoned (recorded on the node)");
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_cordon(*o, ctx); }; });

  auto u = std::make_shared<CordonOptions>();
  u->cordon = false;
  auto* un = app.add_subcommand("uncordon", "Mark nodes schedulable again and clear their cordon record");
  document(*un, ctx.help(),
           {R"(--verify first probes each node's GPUs over ssh, as 'gpuctl gpus' does (the --ssh-* flags, else
~/.ssh/config and $GPUCTL_SSH_*), and runs diagnose's node-side checks on it. Only a node with
nothing critical is uncordoned. A node with a critical finding (driver not loaded or mismatched,
a GPU lost or missing, a fatal Xid, a failed row remap, Fabric Manager down) or whose GPUs do not
all answer stays cordoned, or is cordoned, with the finding as its gpuctl.io/cordon-reason. A node
that cannot be checked (ssh fails, no nvidia-smi on the host, Ctrl-C) is left as it is: never
uncordoned unverified. Both are reported failed (exit 1); the other nodes go on. Nodes that are
not GPU nodes have nothing to verify and are uncordoned.)",
            {{"Bring a repaired node back", "gpuctl uncordon gpu-7"},
             {"Only if its driver and GPUs are healthy now", "gpuctl uncordon gpu-7 --verify"},
             {"Every node cordoned for the upgrade",
              "gpuctl uncordon -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --verify --ssh-user ubuntu"}}});
  completes(un->add_option("nodes", u->nodes.args, "NODE..."), ctx.help(), ValueKind::node);
  add_node_change_flags(*un, ctx.help(), u->nodes);
  un->add_flag("--verify", u->verify,
               "Probe each node's GPUs over ssh first; a node with a critical finding stays cordoned, saying why");
  add_ssh_flags(*un, ctx.help(), u->ssh);
  u->cmd = un;
  o->cmd = cmd;
  un->callback([u, &ctx] { ctx.run = [u, &ctx] { return run_cordon(*u, ctx); }; });
}

}  // namespace gpuctl::cli
