// gpuctl taint --device: flags, validation and the report; the rules are planned and written by
// ops/dra/device_taint.
#include "taint_device.hpp"

#include <fmt/format.h>

#include "common_flags.hpp"
#include "gpuctl/ops/dra/device_taint.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

struct DeviceTaintInput {
  ops::DeviceRef ref;
  std::vector<std::string> spec_texts;
  std::vector<ops::TaintSpec> specs;
  DryRun dry_run = DryRun::none;
  std::string output;
};

Result<DeviceTaintInput> validate(const DeviceTaintFlags& flags, const NodeChangeFlags& nodes) {
  if (!nodes.selector.empty() || nodes.all_gpu_nodes) {
    return fail(usage("--device names one device; -l and --all-gpu-nodes choose nodes: use one or the other"));
  }
  DeviceTaintInput in;
  GPUCTL_TRY_ASSIGN(in.ref, ops::parse_device_ref(flags.device));
  for (const auto& arg : nodes.args) {
    if (!ops::looks_like_taint_spec(arg)) {
      return fail(
          usage(fmt::format("\"{}\" is not a taint: with --device NODE/DEVICE give only changes such as "
                            "gpu.health=xid-79:NoSchedule (or KEY- to remove)",
                            arg)));
    }
    GPUCTL_TRY_ASSIGN(ops::TaintSpec spec, ops::parse_taint_spec(arg, ops::TaintTarget::device));
    in.spec_texts.push_back(arg);
    in.specs.push_back(std::move(spec));
  }
  GPUCTL_TRY_ASSIGN(in.dry_run, parse_dry_run(nodes.dry_run));
  in.output = nodes.output;
  return in;
}

// The device resolved and judged before anything is written: a device that cannot be found, or
// a NoExecute that would evict without --yes, changes nothing.
Result<ops::DeviceTaintRequest> prepare(kube::Client& client, const DeviceTaintInput& in, const DeviceTaintFlags& flags,
                                        bool yes, AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(std::string version, ops::device_taint_rule_version(client));
  GPUCTL_TRY_ASSIGN(ops::DraDeviceId id, ops::find_device(client, in.ref, flags.driver));
  std::vector<kube::Taint> added;
  for (const auto& s : in.specs) {
    if (!s.remove) added.push_back(s.taint);
  }
  GPUCTL_TRY_ASSIGN(ops::TaintImpact impact, ops::device_taint_preflight(client, in.ref, id, added, yes));
  for (const auto& w : impact.warnings) ctx.warn(w);
  const auto& refusals = impact.refusals;
  if (!refusals.empty()) {
    for (std::size_t i = 0; i + 1 < refusals.size(); i++) print_line(ctx.streams().err, "error: " + refusals[i]);
    return fail(usage(refusals.back() + (refusals.size() > 1 ? "; nothing was changed" : "")));
  }
  return ops::DeviceTaintRequest{in.ref, id, version, in.spec_texts, in.specs, in.dry_run, 10};
}

void print_text(AppContext& ctx, const ops::DeviceTaintRequest& request, const ops::DeviceTaintResult& result,
                const std::string& output) {
  auto& out = ctx.streams().out;
  for (const auto& c : result.changes) {
    if (c.outcome == ops::DeviceTaintOutcome::failed) continue;
    if (output == "name") {
      if (!c.rule.empty()) print_line(out, "devicetaintrule.resource.k8s.io/" + c.rule);
      continue;
    }
    if (c.outcome == ops::DeviceTaintOutcome::unchanged) {
      print_line(out, fmt::format("device/{} unchanged: {}", request.ref.text(), c.summary));
      continue;
    }
    print_line(out, fmt::format("devicetaintrule/{} {}: {}{}", c.rule, ops::to_string(c.outcome), c.summary,
                                dry_run_suffix(request.dry_run)));
    if (request.dry_run == DryRun::client) {
      print_line(out, fmt::format("  {} {}{}", c.method, c.path, c.body.is_null() ? "" : " " + c.body.dump()));
    }
  }
}

}  // namespace

void add_device_taint_flags(CLI::App& cmd, HelpData& help, DeviceTaintFlags& flags) {
  completes(cmd.add_option("--device", flags.device,
                           "Taint one DRA device (a GPU) instead of nodes: NODE/DEVICE as its ResourceSlice names it, "
                           "then only KEY[=VALUE]:EFFECT[-] or KEY-; writes a DeviceTaintRule"),
            help, ValueKind::node);
  cmd.add_option("--driver", flags.driver,
                 "--device: the DRA driver whose device it is, when several publish that name (e.g. gpu.nvidia.com)");
}

Result<ExitCode> run_device_taint(const DeviceTaintFlags& flags, const NodeChangeFlags& nodes, bool yes,
                                  AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(DeviceTaintInput in, validate(flags, nodes));
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::DeviceTaintRequest request, prepare(*client, in, flags, yes, ctx));
  GPUCTL_TRY_ASSIGN(ops::DeviceTaintResult result, ops::apply_device_taints(*client, request));
  for (const auto& note : result.notes) ctx.warn(note);
  int failed = 0, refused = 0;
  for (const auto& c : result.changes) {
    if (c.outcome != ops::DeviceTaintOutcome::failed) continue;
    ++failed;
    if (c.error && c.error->code == Errc::invalid_argument) ++refused;
    print_line(ctx.streams().err,
               fmt::format("error: device/{}: {}: {}", request.ref.text(), c.spec, c.error ? c.error->message : ""));
  }
  if (in.output == "json" || in.output == "yaml") {
    ctx.streams().out << render_structured(ops::to_json(request, result),
                                           in.output == "json" ? OutputFormat::json : OutputFormat::yaml);
  } else {
    print_text(ctx, request, result, in.output);
  }
  if (failed == 0) return ExitCode::ok;
  // A refusal of the request itself (gpuctl's rule name taken) is a usage error; anything the
  // cluster refused or could not do, a failure.
  return refused == failed ? ExitCode::usage : ExitCode::failure;
}

}  // namespace gpuctl::cli
