#pragma once
// DRA inventories for diagnose's DRA tests, built as collect_dra leaves them: A100s of NVIDIA's
// driver on a node's pool, claims holding them, the pending pods that wait for claims.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::testing::dx {

using gpuctl::ops::DraClaim;
using gpuctl::ops::DraClaimRequest;
using gpuctl::ops::DraDevice;
using gpuctl::ops::DraDeviceClass;
using gpuctl::ops::DraDeviceTaint;
using gpuctl::ops::DraDeviceType;
using gpuctl::ops::DraInventory;

inline DraDevice gpu(const std::string& node, int index, std::vector<DraDeviceTaint> taints = {}) {
  DraDevice dev;
  dev.driver = "gpu.nvidia.com";
  dev.pool = node;
  dev.node = node;
  dev.name = "gpu-" + std::to_string(index);
  dev.type = DraDeviceType::gpu;
  dev.product = "NVIDIA A100-PCIE-40GB";
  dev.uuid = "GPU-2fa81118-5a5f-aa66-7660-47" + std::to_string(1000000000 + index);
  dev.attributes = {{"type", {{"string", "gpu"}}}, {"productName", {{"string", dev.product}}}};
  dev.taints = std::move(taints);
  return dev;
}

inline DraDeviceTaint driver_taint(const std::string& key, const std::string& value, const std::string& effect) {
  return {key, value, effect, "2026-12-06T11:40:00Z", ""};
}

inline DraClaim claim(const std::string& ns, const std::string& name, const std::string& device_class,
                      std::int64_t count, std::vector<std::string> selectors = {}) {
  DraClaim c;
  c.namespace_name = ns;
  c.name = name;
  c.created_at = "2026-12-06T11:00:00Z";
  c.requests.push_back({"gpus", device_class, "ExactCount", count, std::move(selectors)});
  return c;
}

inline DraClaim holding(DraClaim c, const DraDevice& dev, const std::string& pod_name) {
  c.allocated = true;
  c.devices.push_back({dev.driver, dev.pool, dev.name});
  c.reserved_for.push_back({c.namespace_name, pod_name});
  return c;
}

inline d::Snapshot with_dra(DraInventory inventory, std::map<Source, std::vector<json>> lists = {}) {
  d::Snapshot s = snapshot(std::move(lists));
  inventory.served = true;
  inventory.index_claims();  // as build_dra_inventory does: holder() reads the index
  s.dra = std::move(inventory);
  return s;
}

// A pending pod with one claim from a template, made (status.resourceClaimStatuses) as `claim_name`.
inline json pod_with_template_claim(const std::string& name, const std::string& claim_name,
                                    const std::string& message) {
  json p = unschedulable_pod("ml", name, 0, message);
  p["spec"]["resourceClaims"] = json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", "gpu-template"}}});
  p["status"]["resourceClaimStatuses"] = json::array({{{"name", "gpus"}, {"resourceClaimName", claim_name}}});
  return p;
}

// Two free GPUs on gpu-a, a third held, one tainted on gpu-b; classes without selectors, so the
// counts do not depend on the CEL evaluator.
inline DraInventory cluster_of_four() {
  DraInventory inv;
  inv.devices = {gpu("gpu-a", 0), gpu("gpu-a", 1), gpu("gpu-a", 2),
                 gpu("gpu-b", 0, {driver_taint("gpu.nvidia.com/gpu-lost", "", "NoSchedule")})};
  inv.classes = {DraDeviceClass{"gpu.nvidia.com", {}, ""}};
  inv.claims = {holding(claim("ml", "running-gpus", "gpu.nvidia.com", 1), inv.devices[2], "running")};
  return inv;
}

}  // namespace gpuctl::testing::dx
