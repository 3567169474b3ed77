// gpuctl taint: add, change and remove node taints in kubectl's syntax, without lost updates.
#include <fmt/format.h>

#include "commands.hpp"
#include "gpuctl/util/time.hpp"
#include "node_changes.hpp"
#include "output_format.hpp"
#include "taint_device.hpp"

namespace gpuctl::cli {
namespace {

struct TaintOptions {
  NodeChangeFlags nodes;
  DeviceTaintFlags device;
  bool overwrite = false;
  bool yes = false;
};

bool is_taint_arg(std::string_view arg) { return ops::looks_like_taint_spec(arg); }

Result<ExitCode> run_taint(const TaintOptions& o, AppContext& ctx) {
  if (!o.device.device.empty()) return run_device_taint(o.device, o.nodes, o.yes, ctx);
  if (!o.device.driver.empty()) return fail(usage("--driver only applies to --device NODE/DEVICE"));
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(NamesAndSpecs split, split_names_and_specs(o.nodes.args, &is_taint_arg, "taint"));
  std::vector<ops::TaintSpec> specs;
  bool adds_blocking = false;
  for (const auto& text : split.specs) {
    GPUCTL_TRY_ASSIGN(ops::TaintSpec spec, ops::parse_taint_spec(text));
    adds_blocking = adds_blocking || (!spec.remove && spec.taint.effect != "PreferNoSchedule");
    specs.push_back(std::move(spec));
  }
  GPUCTL_TRY_ASSIGN(NodeChangeRequest request, validate_node_change_flags(o.nodes, split.names));
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::SelectedNodes selected, ops::select_nodes(*client, request.selection));
  // run: a pre-flight over the pods already there, then one write per node
  if (adds_blocking && !selected.nodes.empty()) {
    std::vector<std::string> names;
    for (const auto& n : selected.nodes) names.push_back(kube::name_of(n));
    GPUCTL_TRY_ASSIGN(auto pods, ops::pods_on_nodes(*client, names));
    auto impact = ops::taint_impact(pods, specs, o.yes);
    for (const auto& w : impact.warnings) ctx.warn(w);
    const auto& refusals = impact.refusals;
    if (!refusals.empty()) {
      for (std::size_t i = 0; i + 1 < refusals.size(); i++) print_line(ctx.streams().err, "error: " + refusals[i]);
      return fail(Errc::invalid_argument, refusals.back() + (refusals.size() > 1 ? "; nothing was changed" : ""));
    }
  }
  const std::string now = util::format_rfc3339(std::chrono::system_clock::now());
  auto planner = [&](const nlohmann::json& n) { return ops::plan_taints(n, specs, o.overwrite, now); };
  return apply_and_report(ctx, *client, std::move(selected), planner, "taint", "tainted", request);
}

}  // namespace

void register_taint(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<TaintOptions>();
  auto* cmd = app.add_subcommand("taint", "Add, change or remove taints on nodes (kubectl's syntax, no lost updates)");
  document(
      *cmd, ctx.help(),
      {R"(A taint is KEY[=VALUE]:EFFECT with EFFECT one of NoSchedule, PreferNoSchedule, NoExecute.
KEY[=VALUE]:EFFECT- removes that taint, KEY- removes every taint with that key. A key may carry
one taint per effect, as the API defines. Re-adding a taint that is there reports "unchanged".
Each write carries the node's resourceVersion, so concurrent writers never lose each other's
taints: on a conflict gpuctl reads the node again and retries.

Before adding NoSchedule or NoExecute, gpuctl names the pods already on the node that do not
tolerate it. NoExecute evicts them, so it needs --yes when there are any.

--device NODE/DEVICE quarantines one GPU of a DRA node instead of the node: gpuctl finds the
device in the node's ResourceSlices (--driver when several drivers publish the name) and writes
a DeviceTaintRule that selects exactly it (effects None, NoSchedule, NoExecute). Adding the key
again updates that rule; KEY- and KEY[=VALUE]:EFFECT- delete the rules that taint exactly this
device with the key, whoever made them. NoExecute evicts the pods of the claim holding the
device unless it tolerates the taint, so it needs --yes then. A cluster that does not serve
DeviceTaintRules is told which feature gate and runtime-config enable them (exit 6).)",
       {{"Keep every GPU node for pods that tolerate the GPU taint",
         "gpuctl taint --all-gpu-nodes nvidia.com/gpu=present:NoSchedule"},
        {"Send a node's pods away after an Xid storm", "gpuctl taint gpu-7 gpu.health=xid-79:NoExecute --yes"},
        {R"(Remove every taint with the key "dedicated" from the A100 nodes)",
         "gpuctl taint -l nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB dedicated-"},
        {"Keep new claims off one failing GPU of a DRA node (the node's other GPUs stay in service)",
         "gpuctl taint --device gpu-7/gpu-3 gpu.health=xid-79:NoSchedule"},
        {"Evict the pods using that GPU too", "gpuctl taint --device gpu-7/gpu-3 gpu.health=xid-79:NoExecute --yes"},
        {"Put the GPU back into service", "gpuctl taint --device gpu-7/gpu-3 gpu.health-"}}});
  completes(cmd->add_option("args", o->nodes.args, "NODE... then KEY[=VALUE]:EFFECT[-] or KEY-"), ctx.help(),
            ValueKind::node_or_taint)
      ->required();
  add_node_change_flags(*cmd, ctx.help(), o->nodes);
  add_device_taint_flags(*cmd, ctx.help(), o->device);
  cmd->add_flag("--overwrite", o->overwrite, "Change the value of a taint whose key and effect exist");
  cmd->add_flag("--yes", o->yes,
                "Add a NoExecute taint even though it evicts pods that do not tolerate it (with --device: the "
                "pods of the claim holding the device)");
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_taint(*o, ctx); }; });
}

}  // namespace gpuctl::cli
