// The DRA inventory from the listed objects, with the scheduler's rules: a pool counts only
// when every slice of its newest generation is there (resourceSliceCount) and they agree; the
// taints of DeviceTaintRules join the driver's own; a device is taken while a claim's allocation
// names it.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "dra_internal.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
using dra_internal::SliceHead;

namespace {

struct PoolSlices {
  std::vector<std::pair<SliceHead, const json*>> slices;
};

// The problem that keeps a pool out of the counts, "" when it counts; `newest` gets the slices
// of the newest generation.
std::string pool_problem(const PoolSlices& pool, std::vector<const std::pair<SliceHead, const json*>*>& newest) {
  std::int64_t generation = 0;
  for (const auto& s : pool.slices) generation = std::max(generation, s.first.generation);
  std::set<std::int64_t> counts;
  for (const auto& s : pool.slices) {
    if (s.first.generation != generation) continue;  // an older generation the driver is replacing
    newest.push_back(&s);
    counts.insert(s.first.slice_count);
  }
  if (counts.size() > 1) {
    return fmt::format("its slices of generation {} disagree on resourceSliceCount ({})", generation,
                       fmt::join(counts, ", "));
  }
  auto expected = *counts.begin();
  if (static_cast<std::int64_t>(newest.size()) < expected) {
    return fmt::format("incomplete: {} of {} slices of generation {} published", newest.size(), expected, generation);
  }
  if (static_cast<std::int64_t>(newest.size()) > expected) {
    return fmt::format("{} slices of generation {} where resourceSliceCount says {}", newest.size(), generation,
                       expected);
  }
  return {};
}

// Devices of the complete pools; each other pool named with its problem.
void read_pools(const std::vector<json>& slices, DraInventory& inventory) {
  std::map<std::pair<std::string, std::string>, PoolSlices> pools;
  for (const auto& slice : slices) {
    SliceHead head = dra_internal::read_slice_head(slice);
    pools[{head.driver, head.pool}].slices.emplace_back(std::move(head), &slice);
  }
  for (const auto& [key, pool] : pools) {
    std::vector<const std::pair<SliceHead, const json*>*> newest;
    std::string problem = pool_problem(pool, newest);
    std::vector<DraDevice> devices;
    std::set<std::string> names;
    for (const auto* s : newest) {
      for (const auto& d : kube::array_field(kube::field(*s->second, "spec"), "devices")) {
        devices.push_back(dra_internal::read_device(d, s->first));
        if (!names.insert(devices.back().name).second && problem.empty()) {
          problem = fmt::format("device {} is published twice", devices.back().name);
        }
      }
    }
    if (!problem.empty()) {
      inventory.pool_problems.push_back({key.first, key.second, pool.slices.front().first.node, problem});
      continue;
    }
    for (auto& d : devices) inventory.devices.push_back(std::move(d));
  }
}

// Does the rule select the device? Unsupported CEL leaves the answer open (`unresolved`).
CelVerdict rule_selects(const DraTaintRule& rule, const DraDevice& device,
                        const std::map<std::string, const DraDeviceClass*>& classes) {
  auto no = CelVerdict{CelVerdict::Kind::no_match, {}};
  if (!rule.driver.empty() && rule.driver != device.driver) return no;
  if (!rule.pool.empty() && rule.pool != device.pool) return no;
  if (!rule.device.empty() && rule.device != device.name) return no;
  std::vector<std::string> selectors = rule.selectors;
  if (!rule.device_class.empty()) {
    auto it = classes.find(rule.device_class);
    if (it == classes.end()) return no;  // the API server requires the class to exist when it selects
    selectors.insert(selectors.end(), it->second->selectors.begin(), it->second->selectors.end());
  }
  if (selectors.empty()) return {CelVerdict::Kind::match, {}};
  return evaluate_device_selectors(selectors, device);
}

void apply_taint_rules(DraInventory& inventory) {
  std::map<std::string, const DraDeviceClass*> classes;
  for (const auto& c : inventory.classes) classes[c.name] = &c;
  for (auto& rule : inventory.taint_rules) {
    // The API: a rule without any selector matches no device.
    bool selects_something = !rule.driver.empty() || !rule.pool.empty() || !rule.device.empty() ||
                             !rule.device_class.empty() || !rule.selectors.empty();
    if (!selects_something) continue;
    for (auto& device : inventory.devices) {
      CelVerdict v = rule_selects(rule, device, classes);
      if (v.kind == CelVerdict::Kind::unsupported && rule.unresolved.empty()) rule.unresolved = v.problem;
      if (!v.matches()) continue;
      device.taints.push_back(rule.taint);
      ++rule.devices_matched;
    }
  }
}

}  // namespace

void DraInventory::index_claims() {
  claim_of_device.clear();
  for (std::size_t i = 0; i < claims.size(); ++i) {
    if (!claims[i].allocated) continue;
    for (const auto& id : claims[i].devices) claim_of_device.emplace(id, i);  // a shared device: its first claim
  }
}

const DraClaim* DraInventory::holder(const DraDeviceId& id) const {
  auto it = claim_of_device.find(id);
  return it == claim_of_device.end() ? nullptr : &claims[it->second];
}

DraInventory build_dra_inventory(const std::vector<json>& slices, const std::vector<json>& claims,
                                 const std::vector<json>& classes, const std::vector<json>& taint_rules) {
  DraInventory inventory;
  inventory.served = true;
  read_pools(slices, inventory);
  for (const auto& c : claims) inventory.claims.push_back(read_claim(c));
  for (const auto& c : classes) inventory.classes.push_back(read_device_class(c));
  for (const auto& r : taint_rules) inventory.taint_rules.push_back(read_taint_rule(r));
  inventory.index_claims();
  apply_taint_rules(inventory);
  std::sort(inventory.devices.begin(), inventory.devices.end(), [](const DraDevice& a, const DraDevice& b) {
    return std::tie(a.node, a.driver, a.pool, a.name) < std::tie(b.node, b.driver, b.pool, b.name);
  });
  return inventory;
}

namespace {

// The devices a claim holds, as a set, and the GPUs (by UUID) whose MIG partitions are held: a
// partitioned GPU is not free while one of its partitions is allocated, nor a partition while
// its whole GPU is (they share the GPU's memory and engines).
struct Taken {
  std::set<DraDeviceId> devices;
  std::set<std::string> uuids;
};

Taken taken_devices(const DraInventory& inventory) {
  Taken taken;
  for (const auto& c : inventory.claims) {
    if (!c.allocated) continue;
    taken.devices.insert(c.devices.begin(), c.devices.end());
  }
  for (const auto& d : inventory.devices) {
    if (!taken.devices.contains({d.driver, d.pool, d.name}) || d.uuid.empty()) continue;
    taken.uuids.insert(d.uuid);
  }
  return taken;
}

bool busy(const DraDevice& d, const Taken& taken, const std::set<std::string>& parents_of_taken_migs) {
  if (taken.devices.contains({d.driver, d.pool, d.name})) return true;
  if (d.type == DraDeviceType::mig && !d.parent_uuid.empty() && taken.uuids.contains(d.parent_uuid)) return true;
  return d.type == DraDeviceType::gpu && !d.uuid.empty() && parents_of_taken_migs.contains(d.uuid);
}

}  // namespace

std::map<std::string, std::vector<DraCount>> dra_counts_by_node(const DraInventory& inventory) {
  Taken taken = taken_devices(inventory);
  std::set<std::string> parents_of_taken_migs;
  for (const auto& d : inventory.devices) {
    if (d.type == DraDeviceType::mig && taken.devices.contains({d.driver, d.pool, d.name}))
      parents_of_taken_migs.insert(d.parent_uuid);
  }
  // node -> (type, product, profile) -> counts; gpu sorts before mig.
  std::map<std::string, std::map<std::tuple<int, std::string, std::string>, DraCount>> rows;
  for (const auto& d : inventory.devices) {
    if (d.driver != kNvidiaDraDriver) continue;
    if (d.type != DraDeviceType::gpu && d.type != DraDeviceType::mig) continue;
    DraCount& c = rows[d.node][{static_cast<int>(d.type), d.product, d.profile}];
    c.type = d.type;
    c.product = d.product;
    c.profile = d.profile;
    bool is_busy = busy(d, taken, parents_of_taken_migs);
    bool bad = d.unhealthy();
    ++c.capacity;
    if (bad) ++c.unhealthy;
    if (is_busy) ++c.used;
    if (is_busy && bad) ++c.used_unhealthy;
  }
  std::map<std::string, std::vector<DraCount>> out;
  for (auto& [node, counts] : rows) {
    for (auto& [key, c] : counts) out[node].push_back(std::move(c));
  }
  return out;
}

json to_json(const DraDevice& device, const DraClaim* holder) {
  json taints = json::array();
  for (const auto& t : device.taints) {
    taints.push_back({{"key", t.key},
                      {"value", t.value},
                      {"effect", t.effect},
                      {"timeAdded", t.time_added.empty() ? json(nullptr) : json(t.time_added)},
                      {"rule", t.rule.empty() ? json(nullptr) : json(t.rule)}});
  }
  json claim = nullptr;
  if (holder) {
    json pods = json::array();
    for (const auto& p : holder->reserved_for) pods.push_back(p.name);
    claim = {{"namespace", holder->namespace_name},
             {"name", holder->name},
             {"extendedResource", holder->extended_resource},
             {"pods", pods}};
  }
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"driver", device.driver},
          {"pool", device.pool},
          {"node", or_null(device.node)},
          {"name", device.name},
          {"type", to_string(device.type)},
          {"product", or_null(device.product)},
          {"profile", or_null(device.profile)},
          {"uuid", or_null(device.uuid)},
          {"parentUUID", or_null(device.parent_uuid)},
          {"memoryBytes", device.memory_bytes},
          {"unhealthy", device.unhealthy()},
          {"taints", taints},
          {"claim", claim}};
}

}  // namespace gpuctl::ops
