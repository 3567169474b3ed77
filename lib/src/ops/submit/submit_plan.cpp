// plan_submission: the read-only half of `gpuctl submit`, from the flags (or a manifest) to a
// completed Job and its pre-flight findings.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

// "no node offers GPU type ..." with what the cluster does have, for labelled nodes and for devices.
PreflightFinding type_not_found(const SubmitSpec& spec, const GpuPlacement& placement) {
  std::string known = fmt::format("{}", fmt::join(placement.known_products, ", "));
  if (!spec.device_class.empty()) {
    return {"gpu-type", FindingSeverity::refusal,
            fmt::format("no device of DeviceClass {} is a {:?}; the class's devices are: {}", spec.device_class,
                        spec.gpu_type, known)};
  }
  return {"gpu-type", FindingSeverity::refusal,
          fmt::format("no node offers GPU type {:?} ({}); the cluster has: {}", spec.gpu_type, placement.resource,
                      known.empty() ? std::string("no labelled GPU nodes") : known)};
}

// On a cluster where some nodes advertise the GPU resource, DRA was not read up front. Nodes
// without the device plugin may still serve it through a DeviceClass (extendedResourceName), so a
// capacity refusal or a busy-now warning is judged again with their devices before it is believed.
bool judged_without_dra(const PreflightInput& input, const std::vector<PreflightFinding>& findings) {
  if (input.dra || !input.claim_template.is_null()) return false;
  return std::any_of(findings.begin(), findings.end(),
                     [](const PreflightFinding& f) { return f.check == "gpu-capacity" || f.check == "gpu-free-now"; });
}

std::vector<PreflightFinding> run_preflight_with_dra(kube::Client& client, PreflightInput& input) {
  std::vector<PreflightFinding> findings = run_preflight(input);
  if (!judged_without_dra(input, findings)) return findings;
  // Unreadable or not served: the device plugin's numbers stand.
  auto inventory = collect_dra(client);
  if (!inventory || !inventory->served || inventory->classes.empty()) return findings;
  input.dra = std::move(*inventory);
  return run_preflight(input);
}

}  // namespace

Result<SubmitPlan> plan_submission(kube::Client& client, const SubmitSpec& spec, const json& manifest,
                                   const std::string& namespace_name, bool explicit_namespace,
                                   std::string_view source) {
  GPUCTL_TRY_ASSIGN(kube::ListResult nodes, client.list(kube::paths::nodes()));
  SubmitPlan plan;
  // The device class: the one asked for, or the one a DRA-only cluster serves its GPUs through.
  SubmitSpec chosen = spec;
  std::optional<DraInventory> dra;
  if (wants_dra(spec, nodes.items)) {
    GPUCTL_TRY_ASSIGN(DraInventory inventory, collect_dra(client));
    GPUCTL_TRY_ASSIGN(DeviceClassChoice choice, choose_device_class(spec, nodes.items, inventory));
    chosen.device_class = choice.device_class;
    if (!choice.notice.empty()) plan.notices.push_back(std::move(choice.notice));
    dra = std::move(inventory);
  }
  GpuPlacement placement;
  if (!chosen.device_class.empty()) {
    placement = derive_dra_placement(nodes.items, *dra, chosen);
  } else {
    std::string resource = spec.from_manifest ? requested_gpu_resource(manifest) : spec.gpu_resource;
    if (resource.empty()) resource = std::string(kGpuResource);
    placement = derive_gpu_placement(nodes.items, spec.gpu_type, resource);
  }

  if (spec.from_manifest) {
    GPUCTL_TRY_ASSIGN(plan.built,
                      complete_job(manifest, chosen, placement, namespace_name, explicit_namespace, source));
  } else {
    GPUCTL_TRY_ASSIGN(plan.built, build_job(chosen, placement, namespace_name));
  }
  // A product nothing offers can never run: said first, with what the cluster does have.
  if (!placement.type_found) plan.findings.push_back(type_not_found(chosen, placement));
  GPUCTL_TRY_ASSIGN(PreflightInput input, collect_preflight_input(client, plan.built.job, &nodes.items));
  input.claim_template = plan.built.claim_template;
  input.dra = std::move(dra);
  input.kueue = read_kueue(client, plan.built.job);
  for (auto& finding : run_preflight_with_dra(client, input)) plan.findings.push_back(std::move(finding));
  return plan;
}

}  // namespace gpuctl::ops
