// The schemas of the live GPU view: GPUList (`gpus -o json|yaml`) and the "live" summary of
// `nodes --live`.
#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

LiveSummary summarize(const NodeProbe& probe) {
  LiveSummary live;
  live.outcome = probe.outcome;
  live.message = probe.message;
  live.via = probe.via;
  if (!probe.report) return live;
  const auto& r = *probe.report;
  if (r.driver_version) live.driver_version = *r.driver_version;
  double sum = 0;
  int counted = 0;
  for (const auto& g : r.gpus) {
    live.gpus_answered++;
    if (g.utilization.gpu_percent) {
      sum += *g.utilization.gpu_percent;
      counted++;
    }
    if (g.memory.used_mib && g.memory.total_mib) {
      live.memory_used_mib = kube::saturating_add(live.memory_used_mib, *g.memory.used_mib);
      live.memory_total_mib = kube::saturating_add(live.memory_total_mib, *g.memory.total_mib);
    }
  }
  if (counted > 0) live.utilization_percent = sum / counted;
  return live;
}

json to_json(const LiveSummary& live) {
  return {{"outcome", live.outcome},
          {"message", live.message.empty() ? json(nullptr) : json(live.message)},
          {"via", live.via},
          {"driverVersion", live.driver_version.empty() ? json(nullptr) : json(live.driver_version)},
          {"gpusAnswered", live.gpus_answered},
          {"utilizationPercent", live.utilization_percent ? json(*live.utilization_percent) : json(nullptr)},
          {"memoryUsedMiB", live.memory_total_mib > 0 ? json(live.memory_used_mib) : json(nullptr)},
          {"memoryTotalMiB", live.memory_total_mib > 0 ? json(live.memory_total_mib) : json(nullptr)}};
}

json to_json(const NodeInventory& inventory, const std::map<std::string, LiveSummary>& live) {
  json doc = to_json(inventory);
  for (auto& item : doc["items"]) {
    auto it = live.find(kube::string_field(item, "name"));
    item["live"] = it == live.end() ? json(nullptr) : to_json(it->second);
  }
  return doc;
}

json to_json(const DraDeviceHolding& h) {
  json j = {{"device", h.device.name},
            {"type", to_string(h.device.type)},
            {"uuid", h.device.uuid.empty() ? json(nullptr) : json(h.device.uuid)},
            {"profile", h.device.profile.empty() ? json(nullptr) : json(h.device.profile)},
            {"unhealthy", h.device.unhealthy()},
            {"claim", nullptr},
            {"pods", h.pods}};
  if (!h.claim_name.empty()) {
    j["claim"] = {{"namespace", h.claim_namespace}, {"name", h.claim_name}, {"extendedResource", h.extended_resource}};
  }
  return j;
}

namespace {

// When Prometheus sampled the node (RFC 3339); null for the probe, whose data is of the moment.
json sampled_at(const NodeProbe& probe) {
  if (!probe.sampled_at_unix_s) return nullptr;
  return util::format_rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(*probe.sampled_at_unix_s)));
}

}  // namespace

json to_json(const GpuView& view) {
  json items = json::array();
  for (const auto& v : view.nodes) {
    json pods = json::array();
    for (const auto& p : v.pods)
      pods.push_back({{"namespace", p.namespace_name}, {"name", p.name}, {"resources", p.resources}});
    json dra_devices = json::array();
    for (const auto& h : v.dra_devices) dra_devices.push_back(to_json(h));
    json gpus = json::array();
    json failed_gpus = json::array();
    json driver = nullptr, cuda = nullptr;
    if (v.probe.report) {
      for (const auto& g : v.probe.report->gpus) {
        json gpu = g;
        // Which DRA device this GPU is, and which claim and pods hold it (null: not a DRA GPU).
        auto devices = v.dra_devices_of(g.uuid ? *g.uuid : std::string());
        json dra = json::array();
        for (const auto* h : devices) dra.push_back(to_json(*h));
        gpu["dra"] = devices.empty() ? json(nullptr) : dra;
        gpus.push_back(std::move(gpu));
      }
      for (const auto& f : v.probe.report->failed_gpus) failed_gpus.push_back(f);
      if (v.probe.report->driver_version) driver = *v.probe.report->driver_version;
      if (v.probe.report->cuda_version) cuda = *v.probe.report->cuda_version;
    }
    items.push_back({{"name", v.kube.name},
                     {"product", v.kube.product.empty() ? json(nullptr) : json(v.kube.product)},
                     {"address", v.probe.address.empty() ? json(nullptr) : json(v.probe.address)},
                     {"outcome", v.probe.outcome},
                     {"message", v.probe.message.empty() ? json(nullptr) : json(v.probe.message)},
                     {"via", v.probe.via},
                     {"sampledAt", sampled_at(v.probe)},
                     {"durationMs", v.probe.duration.count()},
                     {"kubernetes",
                      {{"capacity", v.kube.gpus.capacity},
                       {"allocatable", v.kube.gpus.allocatable},
                       {"used", v.kube.gpus.used},
                       {"free", v.kube.gpus.free()},
                       {"source", v.kube.source},
                       {"pods", pods}}},
                     {"draDevices", dra_devices},
                     {"driverVersion", driver},
                     {"cudaVersion", cuda},
                     {"gpus", gpus},
                     {"failedGpus", failed_gpus}});
  }
  json failures = json::array();
  for (const auto& g : view.failures) {
    failures.push_back({{"outcome", g.outcome}, {"message", g.message}, {"count", g.nodes.size()}, {"nodes", g.nodes}});
  }
  return schema_document("GPUList", {{"items", items}, {"failures", failures}});
}

}  // namespace gpuctl::ops
