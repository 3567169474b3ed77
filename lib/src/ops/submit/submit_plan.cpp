// plan_submission: the read-only half of `gpuctl submit`, from the flags (or a manifest) to a
// completed Job and its pre-flight findings.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

Result<SubmitPlan> plan_submission(kube::Client& client, const SubmitSpec& spec, const json& manifest,
                                   const std::string& namespace_name, bool explicit_namespace,
                                   std::string_view source) {
  GPUCTL_TRY_ASSIGN(kube::ListResult nodes, client.list(kube::paths::nodes()));
  std::string resource = spec.from_manifest ? requested_gpu_resource(manifest) : spec.gpu_resource;
  if (resource.empty()) resource = std::string(kGpuResource);
  GpuPlacement placement = derive_gpu_placement(nodes.items, spec.gpu_type, resource);

  SubmitPlan plan;
  if (spec.from_manifest) {
    GPUCTL_TRY_ASSIGN(plan.built, complete_job(manifest, spec, placement, namespace_name, explicit_namespace, source));
  } else {
    GPUCTL_TRY_ASSIGN(plan.built, build_job(spec, placement, namespace_name));
  }
  // A product no node has can never run: said first, with what the cluster does have.
  if (!placement.type_found) {
    plan.findings.push_back(
        {"gpu-type", FindingSeverity::refusal,
         fmt::format("no node offers GPU type {:?} ({}); the cluster has: {}", spec.gpu_type, resource,
                     placement.known_products.empty() ? std::string("no labelled GPU nodes")
                                                      : fmt::format("{}", fmt::join(placement.known_products, ", ")))});
  }
  GPUCTL_TRY_ASSIGN(PreflightInput input, collect_preflight_input(client, plan.built.job, &nodes.items));
  for (auto& finding : run_preflight(input)) plan.findings.push_back(std::move(finding));
  return plan;
}

}  // namespace gpuctl::ops
