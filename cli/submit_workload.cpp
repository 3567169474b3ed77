// gpuctl submit -f for the workload kinds: refuse what --wait cannot follow, plan, print the
// pre-flight verdicts, send (or print what would be sent), render.
#include "submit_workload.hpp"

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"

namespace gpuctl::cli {

using json = nlohmann::json;
namespace {

// "jobset.jobset.x-k8s.io/NAME", as kubectl -o name writes it.
std::string object_name(const ops::WorkloadKind& kind, const std::string& name) {
  std::string lower(kind.kind);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return fmt::format("{}.{}/{}", lower, kind.group, name);
}

// Prints the findings; true when one refuses (and --force does not overrule it).
bool report_findings(AppContext& ctx, const std::vector<ops::PreflightFinding>& findings, bool force) {
  bool refused = false;
  for (const auto& f : findings) {
    if (f.severity == ops::FindingSeverity::warning) {
      ctx.warn(f.message);
    } else if (force) {
      ctx.warn("--force: submitting although " + f.message);
    } else {
      print_line(ctx.streams().err, "refused (" + f.check + "): " + f.message);
      refused = true;
    }
  }
  return refused;
}

void print_summary(AppContext& ctx, const ops::BuiltWorkload& built, const std::string& ns, const std::string& name,
                   DryRun dry_run) {
  auto& out = ctx.streams().out;
  print_line(out, fmt::format("{} {}/{} {}{}: {}", built.kind->kind, ns, name,
                              dry_run == DryRun::none ? "submitted" : "would be submitted", dry_run_suffix(dry_run),
                              ops::describe_workload_pods(built)));
  for (const auto& note : built.notes) print_line(out, "  " + note);
  if (dry_run == DryRun::server) {
    print_line(out,
               fmt::format("  the API server admitted the {} and a pod of each of its templates", built.kind->kind));
  }
}

}  // namespace

bool is_workload_manifest(const json& manifest) { return ops::find_workload_kind(manifest) != nullptr; }

Result<ExitCode> submit_workload(AppContext& ctx, const WorkloadSubmit& r) {
  const ops::WorkloadKind& kind = *ops::find_workload_kind(r.manifest);
  if (r.wait_or_follow) {
    // wait_for_job reads a batch/v1 Job's conditions and its pods by job-name; a JobSet's or a
    // PyTorchJob's result is its own status, written by its controller: not read yet.
    return fail(
        usage(fmt::format("--wait and --follow follow a batch/v1 Job, not a {}: submit without them and watch "
                          "it with kubectl get {} NAME -w",
                          kind.kind, kind.resource)));
  }
  GPUCTL_TRY(ops::check_workload_manifest(r.manifest, r.source));  // before any request
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(std::string ns, ctx.namespace_name());
  const bool explicit_namespace = !ctx.globals().namespace_name.empty();
  if (!explicit_namespace) {
    if (auto manifest_ns = kube::namespace_of(r.manifest); !manifest_ns.empty()) ns = manifest_ns;
  }
  GPUCTL_TRY_ASSIGN(ops::WorkloadPlan plan,
                    ops::plan_workload_submission(*client, r.spec, r.manifest, ns, explicit_namespace, r.source));
  const ops::BuiltWorkload& built = plan.built;
  const std::string name = kube::name_of(built.object);
  for (const auto& w : built.warnings) ctx.warn(w);
  if (report_findings(ctx, plan.findings, r.force)) {
    print_line(ctx.streams().err,
               fmt::format("error: {} {}/{} was not submitted; fix the above, or pass --force to submit it anyway",
                           kind.kind, ns, name));
    return ExitCode::refused;
  }
  json sent = built.object;
  if (r.dry_run != DryRun::client) {
    GPUCTL_TRY_ASSIGN(sent, ops::send_workload(*client, built, r.dry_run == DryRun::server));
  }
  auto& out = ctx.streams().out;
  const std::string sent_name = kube::name_of(sent);
  if (r.parsable) {
    print_line(out, ns + '/' + sent_name);
  } else if (r.format && (*r.format == OutputFormat::json || *r.format == OutputFormat::yaml)) {
    out << render_structured(sent, *r.format);
  } else if (r.format && *r.format == OutputFormat::name) {
    print_line(out, object_name(kind, sent_name));
  } else {
    print_summary(ctx, built, ns, sent_name.empty() ? name : sent_name, r.dry_run);
  }
  return ExitCode::ok;
}

}  // namespace gpuctl::cli
