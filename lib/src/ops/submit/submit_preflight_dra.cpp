// device-capacity and device-free-now: could one node ever give a pod's claim its devices, and
// do the job's pods find them unallocated now? Plus the quota keys a claim is counted under.
// Devices come from collect_dra (complete pools only); which ones a claim may get is decided by
// the class's and the claim's CEL selectors (dra_cel), and where that cannot be told the checks
// say they cannot count rather than refuse.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "submit_dra_internal.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace preflight_detail;
using namespace submit_dra_detail;

constexpr std::string_view kCapacity = "device-capacity";
constexpr std::string_view kFreeNow = "device-free-now";

// The claim's devices per node, as the checks count them.
struct DeviceCounts {
  TemplateRequest request;
  bool class_found = false;
  std::map<std::string, std::int64_t> usable;  // node -> matching devices without a blocking taint
  std::map<std::string, std::int64_t> free;    // node -> of those, not allocated to a claim
  std::set<std::string> schedulable;           // nodes holding usable devices the pod may be scheduled to
  std::int64_t matching = 0, blocked = 0, off_node = 0;
  std::string unsure;                                  // why some device's verdict is unknown; "" when none is
  std::map<std::string, std::int64_t> class_products;  // product -> devices the class alone matches
};

std::optional<DeviceCounts> count_devices(const PreflightInput& input) {
  if (input.claim_template.is_null() || !input.dra || !input.dra->served) return std::nullopt;
  auto request = read_template_request(input.claim_template);
  if (!request) return std::nullopt;
  const DraInventory& dra = *input.dra;
  DeviceCounts c;
  c.request = *request;
  RequestDevices of_class = request_devices(dra, request->device_class, {});
  c.class_found = of_class.class_found;
  for (const auto& cand : of_class.candidates) {
    if (cand.verdict.matches()) ++c.class_products[cand.device->product.empty() ? "?" : cand.device->product];
  }
  for (const auto& cand : request_devices(dra, request->device_class, request->selectors).candidates) {
    if (cand.verdict.kind == CelVerdict::Kind::unsupported) {
      if (c.unsure.empty()) c.unsure = cand.verdict.problem;
      continue;
    }
    if (!cand.verdict.matches()) continue;
    const DraDevice& d = *cand.device;
    ++c.matching;
    if (d.node.empty()) {
      ++c.off_node;
    } else if (d.unhealthy()) {
      ++c.blocked;
    } else {
      ++c.usable[d.node];
      if (dra.holder({d.driver, d.pool, d.name}) == nullptr) ++c.free[d.node];
    }
  }
  const json& spec = pod_spec(input.job);
  for (const auto& node : input.nodes) {
    const std::string name = kube::name_of(node);
    if (c.usable.contains(name) && !kube::placement_exclusion(spec, node)) c.schedulable.insert(name);
  }
  return c;
}

std::string devices_of(const DeviceCounts& c, std::int64_t n) {
  return fmt::format("{} {} of DeviceClass {}{}", n, n == 1 ? "device" : "devices", c.request.device_class,
                     c.request.selectors.empty() ? "" : " that the claim's selectors match");
}

std::string class_products(const DeviceCounts& c) {
  std::vector<std::string> parts;
  for (const auto& [product, n] : c.class_products) parts.push_back(fmt::format("{} ({})", product, n));
  return join(parts, ", ");
}

// Pools left out of every count: a refusal names them, as they may hold the devices.
std::string pool_note(const DraInventory& dra) {
  if (dra.pool_problems.empty()) return "";
  std::vector<std::string> pools;
  for (const auto& p : dra.pool_problems) pools.push_back(p.pool + ": " + p.problem);
  return fmt::format("; not counted, incomplete: {}", join(pools, "; "));
}

std::vector<PreflightFinding> cannot_count(const DeviceCounts& c) {
  if (!c.unsure.empty()) {
    return {warning(kCapacity, fmt::format("cannot count the devices of DeviceClass {} the claim may get: {}",
                                           c.request.device_class, c.unsure))};
  }
  return {warning(kCapacity, fmt::format("cannot tell where the claim's devices are: {} of DeviceClass {} are not "
                                         "local to one node",
                                         count_of(c.off_node, "device", "devices"), c.request.device_class))};
}

}  // namespace

std::vector<std::pair<std::string, kube::Quantity>> device_quota_keys(const PreflightInput& input) {
  if (input.claim_template.is_null()) return {};
  auto request = read_template_request(input.claim_template);
  if (!request) return {};
  std::vector<std::pair<std::string, kube::Quantity>> keys = {
      {request->device_class + ".deviceclass.resource.k8s.io/devices", kube::Quantity::from_int(request->count)},
      {"count/resourceclaims.resource.k8s.io", kube::Quantity::from_int(1)}};
  // A class that serves an extended resource (DRAExtendedResource) has its claims counted under
  // requests.<that resource> too: the API server refuses the claim on that key as well.
  if (input.dra) {
    for (const auto& c : input.dra->classes) {
      if (c.name == request->device_class && !c.extended_resource_name.empty())
        keys.emplace_back("requests." + c.extended_resource_name, kube::Quantity::from_int(request->count));
    }
  }
  return keys;
}

std::vector<PreflightFinding> check_device_capacity(const PreflightInput& input) {
  auto counted = count_devices(input);
  if (!counted) return {};
  const DeviceCounts& c = *counted;
  if (!c.class_found) {
    return {warning(kCapacity,
                    fmt::format("cannot count devices: DeviceClass {} could not be read", c.request.device_class))};
  }
  std::int64_t best = 0;
  for (const auto& node : c.schedulable) best = std::max(best, c.usable.at(node));
  if (best >= c.request.count) return {};
  if (!c.unsure.empty() || c.off_node > 0) return cannot_count(c);

  const std::string pools = pool_note(*input.dra);
  if (c.matching == 0) {
    if (c.request.selectors.empty() || c.class_products.empty()) {
      return {refusal(kCapacity, fmt::format("DeviceClass {} has no devices in the cluster's ResourceSlices{}",
                                             c.request.device_class, pools))};
    }
    return {refusal(kCapacity, fmt::format("no device of DeviceClass {} matches the claim's selectors (the class "
                                           "has: {}){}",
                                           c.request.device_class, class_products(c), pools))};
  }
  std::string blocked = c.blocked == 0 ? "" : fmt::format(", {} tainted NoSchedule/NoExecute", c.blocked);
  return {refusal(kCapacity, fmt::format("no schedulable node has {}: the most on one node is {} ({} hold such "
                                         "devices, {} schedulable{}){}",
                                         devices_of(c, c.request.count), best,
                                         count_of(static_cast<std::int64_t>(c.usable.size()), "node", "nodes"),
                                         c.schedulable.size(), blocked, pools))};
}

std::vector<PreflightFinding> check_device_free_now(const PreflightInput& input) {
  const std::int64_t wanted = concurrent_pods(input.job, true);
  if (wanted == 0 || (input.dra && !input.dra->warnings.empty())) return {};
  auto counted = count_devices(input);
  if (!counted || !counted->unsure.empty() || counted->off_node > 0) return {};
  const DeviceCounts& c = *counted;
  std::int64_t fitting = 0, placeable = 0, most_free = 0, total_free = 0;
  for (const auto& node : c.schedulable) {
    if (c.usable.at(node) < c.request.count) continue;
    ++fitting;
    auto it = c.free.find(node);
    std::int64_t free = it == c.free.end() ? 0 : it->second;
    most_free = std::max(most_free, free);
    total_free += free;
    placeable += free / std::max<std::int64_t>(c.request.count, 1);
  }
  if (fitting == 0 || placeable >= wanted) return {};  // no fitting node: device-capacity refuses
  const std::string across = fmt::format("{} free across {}", total_free, count_of(fitting, "node", "nodes"));
  if (placeable == 0) {
    return {warning(kFreeNow, fmt::format("the {} per pod exist but are allocated: at most {} free on one node now "
                                          "({}); the job will wait in Pending",
                                          devices_of(c, c.request.count), most_free, across))};
  }
  return {warning(kFreeNow, fmt::format("only {} of the job's {} pods ({} each) find their devices free now ({}); the "
                                        "rest will wait in Pending",
                                        placeable, wanted, devices_of(c, c.request.count), across))};
}

}  // namespace gpuctl::ops
