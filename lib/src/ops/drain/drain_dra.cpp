// A drain's plan for pods that hold GPUs as DRA devices: an evicted pod's controller makes a new
// pod whose claims the scheduler must allocate again, on one node, from free devices its
// classes and selectors match. This says whether a node that stays has them, as the scheduler's
// allocator would find them (complete pools only, no NoSchedule/NoExecute taint, not allocated,
// not promised to another pod of the same plan).
#include <map>

#include <fmt/format.h>

#include "gpuctl/ops/dra/dra_cel.hpp"
#include "gpuctl/ops/drain/drain.hpp"

namespace gpuctl::ops {

namespace {

std::string device_key(const DraDevice& d) { return fmt::format("{}/{}/{}", d.driver, d.pool, d.name); }

// What one request of a claim asks for, with its class's selectors joined to its own.
struct Wanted {
  std::int64_t count = 1;
  bool all = false;  // allocationMode All: every matching device of the node
  std::vector<std::string> selectors;
  std::string problem;  // a class that does not exist
};

std::vector<Wanted> wanted_by(const std::vector<const DraClaim*>& claims, const DraInventory& dra) {
  std::map<std::string, const DraDeviceClass*> classes;
  for (const auto& c : dra.classes) classes[c.name] = &c;
  std::vector<Wanted> out;
  for (const auto* claim : claims) {
    for (const auto& r : claim->requests) {
      Wanted w;
      w.count = r.count;
      w.all = r.allocation_mode == "All";
      w.selectors = r.selectors;
      auto it = classes.find(r.device_class);
      if (it == classes.end()) {
        w.problem = fmt::format("device class {} does not exist", r.device_class);
      } else {
        w.selectors.insert(w.selectors.end(), it->second->selectors.begin(), it->second->selectors.end());
      }
      out.push_back(std::move(w));
    }
  }
  return out;
}

// Free devices of `node` for every request, each device used once; `unsupported` when a
// selector could not be evaluated on some device.
bool fits_on(const std::vector<const DraDevice*>& devices, const std::vector<Wanted>& wanted, const DraRoom& room,
             std::vector<std::string>& chosen, std::string& unsupported) {
  chosen.clear();
  std::set<std::string> used;
  for (const auto& w : wanted) {
    std::int64_t found = 0;
    for (const DraDevice* d : devices) {
      if (d->unhealthy()) continue;
      std::string key = device_key(*d);
      if (used.contains(key) || room.promised.contains(key)) continue;
      if (room.dra->holder({d->driver, d->pool, d->name}) != nullptr) continue;
      CelVerdict v = evaluate_device_selectors(w.selectors, *d);
      if (v.kind == CelVerdict::Kind::unsupported && unsupported.empty()) unsupported = v.problem;
      if (!v.matches()) continue;
      used.insert(key);
      chosen.push_back(key);
      if (++found == w.count && !w.all) break;
    }
    if (found == 0 || (!w.all && found < w.count)) return false;
  }
  return true;
}

}  // namespace

void plan_dra_move(PodPlan& pod, DraRoom& room) {
  if (room.dra == nullptr) return;
  std::vector<const DraClaim*> claims;
  for (const auto& c : room.dra->claims) {
    if (!c.allocated) continue;
    for (const auto& p : c.reserved_for) {
      if (p.namespace_name == pod.ns && p.name == pod.name) claims.push_back(&c);
    }
  }
  if (claims.empty()) return;
  pod.gpu_pod = true;
  for (const auto* c : claims) pod.dra_devices += static_cast<std::int64_t>(c->devices.size());
  std::vector<Wanted> wanted = wanted_by(claims, *room.dra);
  for (const auto& w : wanted) {
    if (!w.problem.empty()) {
      pod.dra_fit = "no-room";
      pod.dra_message = w.problem;
      return;
    }
  }
  std::string unsupported;
  std::vector<std::string> chosen;
  for (const auto& [node, devices] : room.devices_by_node) {
    if (!room.staying_nodes.contains(node)) continue;
    if (!fits_on(devices, wanted, room, chosen, unsupported)) continue;
    pod.dra_fit = "fits";
    pod.dra_node = node;
    room.promised.insert(chosen.begin(), chosen.end());
    return;
  }
  if (!unsupported.empty()) {
    pod.dra_fit = "unknown";
    pod.dra_message = "a device selector gpuctl cannot evaluate: " + unsupported;
    return;
  }
  pod.dra_fit = "no-room";
  pod.dra_message =
      fmt::format("no node that stays has {} free device(s) its claims' classes and selectors match", pod.dra_devices);
}

}  // namespace gpuctl::ops
