// GPUs as DRA devices in gpuctl submit: the ResourceClaimTemplate the pods claim through, which
// DeviceClass to claim from (--device-class, or gpu.nvidia.com when the cluster serves GPUs only
// through DRA), and which devices a request could be given. Pure; send_submission sends.
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "submit_dra_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace submit_dra_detail {

RequestDevices request_devices(const DraInventory& dra, std::string_view device_class,
                               const std::vector<std::string>& selectors) {
  RequestDevices out;
  auto cls = std::find_if(dra.classes.begin(), dra.classes.end(),
                          [&](const DraDeviceClass& c) { return c.name == device_class; });
  out.class_found = cls != dra.classes.end();
  if (!out.class_found) return out;
  for (const auto& device : dra.devices) {
    CelVerdict verdict = evaluate_device_selectors(cls->selectors, device);
    if (verdict.kind == CelVerdict::Kind::no_match) continue;
    CelVerdict request = evaluate_device_selectors(selectors, device);
    // The class's unknown stays unknown unless the request rules the device out.
    if (request.kind == CelVerdict::Kind::no_match || verdict.kind == CelVerdict::Kind::match) verdict = request;
    out.candidates.push_back({&device, std::move(verdict)});
  }
  return out;
}

std::optional<TemplateRequest> read_template_request(const json& claim_template) {
  const json& requests =
      kube::field(kube::field(kube::field(kube::field(claim_template, "spec"), "spec"), "devices"), "requests");
  if (!requests.is_array() || requests.size() != 1) return std::nullopt;
  const json& exactly = kube::field(requests[0], "exactly");
  if (kube::string_field(exactly, "allocationMode") != "ExactCount") return std::nullopt;
  TemplateRequest r;
  r.device_class = kube::string_field(exactly, "deviceClassName");
  const json& count = kube::field(exactly, "count");
  if (r.device_class.empty() || !count.is_number_integer()) return std::nullopt;
  r.count = count.get<std::int64_t>();
  if (const json& selectors = kube::field(exactly, "selectors"); selectors.is_array()) {
    for (const auto& s : selectors) r.selectors.push_back(kube::string_field(kube::field(s, "cel"), "expression"));
  }
  return r;
}

std::vector<std::string> gpu_type_selectors(std::string_view gpu_type) {
  if (gpu_type.empty()) return {};
  return {product_selector_expression(kNvidiaDraDriver, gpu_type)};
}

}  // namespace submit_dra_detail

using namespace submit_dra_detail;

namespace {

auto usage(std::string message) { return fail(Errc::invalid_argument, std::move(message)); }

std::string class_names(const DraInventory& dra) {
  std::vector<std::string> names;
  for (const auto& c : dra.classes) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  return names.empty() ? "the cluster has no DeviceClass" : fmt::format("the cluster has: {}", fmt::join(names, ", "));
}

}  // namespace

std::string claim_template_name(std::string_view job_name) { return fmt::format("{}-{}", job_name, kDeviceClaimName); }

json build_claim_template(const SubmitSpec& spec, const std::string& namespace_name) {
  json exactly = {
      {"deviceClassName", spec.device_class}, {"allocationMode", "ExactCount"}, {"count", spec.gpus.value_or(1)}};
  json selectors = json::array();
  for (const auto& expression : gpu_type_selectors(spec.gpu_type)) {
    selectors.push_back({{"cel", {{"expression", expression}}}});
  }
  if (!selectors.empty()) exactly["selectors"] = std::move(selectors);
  json request = {{"name", kDeviceClaimName}, {"exactly", std::move(exactly)}};
  return {{"apiVersion", kResourceApiVersion},
          {"kind", "ResourceClaimTemplate"},
          {"metadata",
           {{"name", claim_template_name(spec.name)},
            {"namespace", namespace_name},
            {"labels", {{kManagedByLabel, "gpuctl"}}}}},
          {"spec", {{"spec", {{"devices", {{"requests", json::array({std::move(request)})}}}}}}}};
}

std::string describe_claim_template(const json& claim_template) {
  auto request = read_template_request(claim_template);
  if (!request) return "devices through ResourceClaimTemplate " + kube::name_of(claim_template);
  return fmt::format("{} {} of DeviceClass {}", request->count, request->count == 1 ? "device" : "devices",
                     request->device_class);
}

bool any_node_offers(const std::vector<json>& nodes, std::string_view resource) {
  const std::string key(resource);
  return std::any_of(nodes.begin(), nodes.end(), [&](const json& node) {
    const json& status = kube::field(node, "status");
    for (const char* list : {"allocatable", "capacity"}) {
      auto resources = kube::parse_resource_list(kube::field(status, list));
      auto it = resources.find(key);
      if (it != resources.end() && it->second.sign() > 0) return true;
    }
    return false;
  });
}

bool wants_dra(const SubmitSpec& spec, const std::vector<json>& nodes) {
  if (!spec.device_class.empty()) return true;
  if (spec.from_manifest || spec.gpu_resource_given || !spec.gpus || *spec.gpus == 0) return false;
  return spec.gpu_resource == kGpuResource && !any_node_offers(nodes, spec.gpu_resource);
}

Result<DeviceClassChoice> choose_device_class(const SubmitSpec& spec, const std::vector<json>& nodes,
                                              const DraInventory& dra) {
  if (!spec.device_class.empty()) {
    if (!dra.served) {
      return usage(fmt::format(
          "--device-class {}: the cluster does not serve resource.k8s.io/v1 (Dynamic Resource Allocation); ask "
          "for GPUs with --gpus alone (an extended resource such as nvidia.com/gpu)",
          spec.device_class));
    }
    bool found = std::any_of(dra.classes.begin(), dra.classes.end(),
                             [&](const DraDeviceClass& c) { return c.name == spec.device_class; });
    if (found) return DeviceClassChoice{spec.device_class, ""};
    if (dra.classes.empty() && !dra.warnings.empty()) {
      // The classes could not be read: the API server, not gpuctl, will say whether it exists.
      return DeviceClassChoice{spec.device_class, fmt::format("could not check that DeviceClass {} exists: {}",
                                                              spec.device_class, dra.warnings.front())};
    }
    return usage(fmt::format("DeviceClass {:?} does not exist; {} (gpuctl submit --device-class NAME)",
                             spec.device_class, class_names(dra)));
  }
  if (!wants_dra(spec, nodes) || !dra.served) return DeviceClassChoice{};
  // The scheduler serves such a request through DRA itself (DRAExtendedResource): keep it.
  for (const auto& c : dra.classes) {
    if (c.extended_resource_name == spec.gpu_resource) return DeviceClassChoice{};
  }
  const std::string nvidia_class(kNvidiaGpuDeviceClass);
  if (std::none_of(dra.classes.begin(), dra.classes.end(),
                   [&](const DraDeviceClass& c) { return c.name == nvidia_class; }))
    return DeviceClassChoice{};
  auto gpus = std::count_if(dra.devices.begin(), dra.devices.end(), [](const DraDevice& d) {
    return d.driver == kNvidiaDraDriver && d.type == DraDeviceType::gpu;
  });
  if (gpus == 0) return DeviceClassChoice{};
  return DeviceClassChoice{
      nvidia_class,
      fmt::format("no node offers {} as an extended resource, and the cluster has {} {} of NVIDIA's DRA driver: "
                  "claiming them through DeviceClass {} (--gpu-resource {} keeps the extended resource)",
                  spec.gpu_resource, gpus, gpus == 1 ? "GPU" : "GPUs", nvidia_class, spec.gpu_resource)};
}

}  // namespace gpuctl::ops
