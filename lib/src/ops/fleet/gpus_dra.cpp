// The live GPUs joined with their DRA devices: the driver publishes each GPU's UUID as an
// attribute, and a claim's allocation names the device, so each GPU nvidia-smi reports can be
// traced to the claim and the pod that hold it.
#include <algorithm>

#include "gpuctl/ops/fleet/gpus.hpp"

namespace gpuctl::ops {

std::map<std::string, std::vector<DraDeviceHolding>> dra_holdings_by_node(const DraInventory& dra) {
  std::map<std::string, std::vector<DraDeviceHolding>> out;
  for (const auto& d : dra.devices) {
    if (d.node.empty() || d.driver != kNvidiaDraDriver) continue;
    DraDeviceHolding h;
    h.device = d;
    if (const DraClaim* c = dra.holder({d.driver, d.pool, d.name})) {
      h.claim_namespace = c->namespace_name;
      h.claim_name = c->name;
      h.extended_resource = c->extended_resource;
      for (const auto& p : c->reserved_for) h.pods.push_back(p.namespace_name + "/" + p.name);
    }
    out[d.node].push_back(std::move(h));
  }
  return out;
}

std::vector<const DraDeviceHolding*> NodeGpuView::dra_devices_of(std::string_view gpu_uuid) const {
  std::vector<const DraDeviceHolding*> out;
  if (gpu_uuid.empty()) return out;
  for (const auto& h : dra_devices) {
    bool whole = h.device.type != DraDeviceType::mig && h.device.uuid == gpu_uuid;
    bool partition = h.device.type == DraDeviceType::mig && h.device.parent_uuid == gpu_uuid;
    if (whole || partition) out.push_back(&h);
  }
  return out;
}

}  // namespace gpuctl::ops
