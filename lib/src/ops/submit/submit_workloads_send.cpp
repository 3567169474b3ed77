// The cluster's half of submitting a workload kind: is it served, the plan (placement, completion,
// pre-flight reads and checks), and the create at the kind's own REST path.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/discovery.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"
#include "submit_send_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

// "jobset", "pytorchjob": how kubectl names the kind on its command line.
std::string lower_kind(const WorkloadKind& kind) {
  std::string out(kind.kind);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// One read for every group: the pre-flight reads look at the template's volumes, so the first
// group's Job carries the volumes of all of them.
json job_for_reads(const BuiltWorkload& built) {
  json job = built.groups.front().job;
  json volumes = json::array();
  for (const auto& g : built.groups) {
    const json& v = kube::field(kube::field(kube::field(kube::field(g.job, "spec"), "template"), "spec"), "volumes");
    if (v.is_array()) volumes.insert(volumes.end(), v.begin(), v.end());
  }
  if (!volumes.empty()) job["spec"]["template"]["spec"]["volumes"] = std::move(volumes);
  return job;
}

Result<void> dry_run_pods(kube::Client& client, const BuiltWorkload& built, const std::string& ns,
                          const std::string& name) {
  for (const auto& g : built.groups) {
    if (g.pods == 0) continue;
    auto pod = client.create(kube::paths::pods(ns), pod_from_job_template(g.job), strict_write(true));
    if (pod) continue;
    Error e = pod.error();
    const std::string whose = fmt::format("the pods of {} of {} {}/{}", g.name, lower_kind(*built.kind), ns, name);
    if (auto denial = parse_admission_denial(e.message)) {
      e.message = fmt::format("the API server would refuse {}: {}", whose, describe(*denial));
    } else {
      e = e.with_context("the API server would refuse " + whose);
    }
    return fail(std::move(e));
  }
  return {};
}

}  // namespace

Result<void> check_workload_served(kube::Client& client, const WorkloadKind& kind) {
  GPUCTL_TRY_ASSIGN(bool served, kube::serves(client, kind.api_version(), kind.resource));
  if (served) return {};
  return fail(Errc::not_served,
              fmt::format("the cluster does not serve {} {}s ({}): install {} to submit one, or submit a batch/v1 Job",
                          kind.api_version(), kind.kind, kind.resource, kind.installs));
}

Result<WorkloadPlan> plan_workload_submission(kube::Client& client, const SubmitSpec& spec, const json& manifest,
                                              const std::string& namespace_name, bool explicit_namespace,
                                              std::string_view source) {
  GPUCTL_TRY(check_workload_manifest(manifest, source));
  GPUCTL_TRY(check_workload_served(client, *find_workload_kind(manifest)));
  GPUCTL_TRY_ASSIGN(kube::ListResult nodes, client.list(kube::paths::nodes()));
  std::string resource = workload_gpu_resource(manifest);
  if (resource.empty()) resource = std::string(kGpuResource);
  const GpuPlacement placement = derive_gpu_placement(nodes.items, spec.gpu_type, resource);
  WorkloadPlan plan;
  GPUCTL_TRY_ASSIGN(plan.built,
                    complete_workload(manifest, spec, placement, namespace_name, explicit_namespace, source));
  if (!placement.type_found) {
    // As plan_submission says it for a Job's labelled nodes.
    const std::string known = fmt::format("{}", fmt::join(placement.known_products, ", "));
    plan.findings.push_back({"gpu-type", FindingSeverity::refusal,
                             fmt::format("no node offers GPU type {:?} ({}); the cluster has: {}", spec.gpu_type,
                                         placement.resource, known.empty() ? "no labelled GPU nodes" : known)});
  }
  GPUCTL_TRY_ASSIGN(PreflightInput input, collect_preflight_input(client, job_for_reads(plan.built), &nodes.items));
  input.kueue = read_kueue(client, plan.built.object);
  for (auto& f : run_workload_preflight(input, plan.built)) plan.findings.push_back(std::move(f));
  return plan;
}

Result<json> send_workload(kube::Client& client, const BuiltWorkload& built, bool server_dry_run) {
  const WorkloadKind& kind = *built.kind;
  const std::string ns = kube::namespace_of(built.object);
  const std::string name = kube::name_of(built.object);
  auto created = client.create(kube::paths::resources(kind.api_version(), kind.resource, true, ns), built.object,
                               strict_write(server_dry_run));
  if (!created) {
    Error e = created.error();
    if (e.is_already_exists()) {
      e.message =
          fmt::format("{} {}/{} already exists; pick another name, or delete it first (kubectl delete {} {} -n {})",
                      lower_kind(kind), ns, name, lower_kind(kind), name, ns);
    } else {
      e = e.with_context(fmt::format("the API server refused {} {}/{}", lower_kind(kind), ns, name));
    }
    return fail(std::move(e));
  }
  // A dry-run object makes no pods, so admission of its pods (quota, LimitRange, pod security)
  // never ran: ask for that with a pod of every group.
  if (server_dry_run) GPUCTL_TRY(dry_run_pods(client, built, ns, name));
  return created;
}

}  // namespace gpuctl::ops
