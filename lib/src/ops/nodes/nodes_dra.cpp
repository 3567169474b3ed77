// A node's GPU counts from DRA: NVIDIA's driver publishes its GPUs (and MIG partitions) as
// devices, and claims hold them. A pod's DRA-backed nvidia.com/gpu request is served by a claim,
// so on such a node the pods' requests are never added: the claim is the count.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/quantity.hpp"
#include "nodes_internal.hpp"

namespace gpuctl::ops {

namespace nodes_internal {

std::unordered_map<std::string, DraNodeFacts> dra_facts_by_node(const DraInventory& dra) {
  std::unordered_map<std::string, DraNodeFacts> facts;
  for (auto& [node, counts] : dra_counts_by_node(dra)) facts[node].counts = std::move(counts);
  std::map<DraDeviceId, const DraDevice*> devices;
  for (const auto& d : dra.devices) {
    if (d.node.empty()) continue;
    devices[{d.driver, d.pool, d.name}] = &d;
    if (d.driver != kNvidiaDraDriver) continue;
    for (const auto& t : d.taints) facts[d.node].taints.push_back({d.name, t});
  }
  for (const auto& claim : dra.claims) {
    if (!claim.allocated) continue;
    for (const auto& id : claim.devices) {
      auto it = devices.find(id);
      if (it == devices.end() || it->second->driver != kNvidiaDraDriver) continue;
      for (const auto& pod : claim.reserved_for) {
        facts[it->second->node].pods.insert(pod.namespace_name + "/" + pod.name);
      }
    }
  }
  return facts;
}

namespace {

std::string dra_resource_name(const DraCount& c) {
  return c.type == DraDeviceType::mig ? fmt::format("{}mig-{}", kNvidiaResourcePrefix, c.profile)
                                      : std::string(kGpuResource);
}

void add(ResourceCount& rc, const DraCount& c) {
  rc.capacity = kube::saturating_add(rc.capacity, c.capacity);
  rc.allocatable = kube::saturating_add(rc.allocatable, c.capacity - c.unhealthy);
  rc.used = kube::saturating_add(rc.used, c.used);
  rc.used_unhealthy = kube::saturating_add(rc.used_unhealthy, c.used_unhealthy);
}

}  // namespace

void apply_dra(NodeGpuInfo& info, DraNodeFacts facts, const std::set<std::string>& gpu_pods) {
  info.device_taints = std::move(facts.taints);
  if (facts.counts.empty()) return;
  info.gpu_node = true;
  info.source = std::string(kSourceDra);
  if (info.gpus.capacity > 0 || info.gpus.allocatable > 0) info.device_plugin_gpus = info.gpus;
  info.gpus = ResourceCount{std::string(kGpuResource)};
  info.gpus.source = info.source;
  std::map<std::string, ResourceCount> mig;
  for (const auto& c : facts.counts) {
    if (info.product.empty() && !c.product.empty()) info.product = c.product;
    if (c.type == DraDeviceType::gpu) {
      add(info.gpus, c);
      continue;
    }
    ResourceCount& rc = mig[dra_resource_name(c)];
    rc.name = dra_resource_name(c);
    rc.source = info.source;
    add(rc, c);
  }
  // The device plugin's rows of the same MIG names are the same partitions: DRA's stand.
  std::erase_if(info.other_resources, [&](const ResourceCount& rc) { return mig.contains(rc.name); });
  for (auto& [name, rc] : mig) info.other_resources.push_back(std::move(rc));
  std::sort(info.other_resources.begin(), info.other_resources.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::set<std::string> pods = gpu_pods;
  pods.insert(facts.pods.begin(), facts.pods.end());
  info.gpu_pods = static_cast<std::int64_t>(pods.size());
}

}  // namespace nodes_internal

ResourceCount NodeGpuInfo::offered() const {
  bool has_whole = gpus.capacity > 0 || gpus.allocatable > 0 || gpus.used > 0;
  std::vector<const ResourceCount*> mig;
  for (const auto& r : other_resources) {
    if (r.name.starts_with(fmt::format("{}mig-", kNvidiaResourcePrefix))) mig.push_back(&r);
  }
  if (has_whole || mig.empty()) return gpus;
  ResourceCount sum;
  std::vector<std::string> names;
  for (const auto* r : mig) {
    names.push_back(r->name);
    sum.capacity = kube::saturating_add(sum.capacity, r->capacity);
    sum.allocatable = kube::saturating_add(sum.allocatable, r->allocatable);
    sum.used = kube::saturating_add(sum.used, r->used);
    sum.used_unhealthy = kube::saturating_add(sum.used_unhealthy, r->used_unhealthy);
  }
  sum.name = fmt::format("{}", fmt::join(names, ","));
  sum.source = mig.front()->source;
  return sum;
}

}  // namespace gpuctl::ops
