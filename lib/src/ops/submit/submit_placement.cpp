// Where GPU jobs of a type may go: the product label scheme and the pool taints, read from nodes.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>

#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "submit_dra_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

// "NVIDIA-A100-SXM4-80GB" -> "nvidiaa100sxm480gb": people type products in many spellings.
std::string squash(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Taints the node lifecycle sets on single nodes in trouble (not-ready, unreachable, pressure,
// cordon, cloud init) never mark a GPU pool; tolerating them would send the job to sick nodes.
bool is_lifecycle_taint(const kube::Taint& t) {
  return t.key.starts_with("node.kubernetes.io/") || t.key.starts_with("node.cloudprovider.kubernetes.io/") ||
         t.key.starts_with("node-role.kubernetes.io/");
}

bool offers(const NodeGpuInfo& n, std::string_view resource) {
  if (resource == kGpuResource) return n.gpus.capacity > 0;
  return std::any_of(n.other_resources.begin(), n.other_resources.end(),
                     [&](const ResourceCount& r) { return r.name == resource && r.capacity > 0; });
}

json toleration_for(const kube::Taint& t, bool same_value) {
  json tol = {{"key", t.key}};
  if (same_value && !t.value.empty()) {
    tol["operator"] = "Equal";
    tol["value"] = t.value;
  } else {
    tol["operator"] = "Exists";
  }
  tol["effect"] = t.effect;
  return tol;
}

// The GPU nodes that offer `resource`, and the products they carry.
std::vector<const NodeGpuInfo*> gpu_pool(const NodeInventory& inv, std::string_view resource, GpuPlacement& p) {
  std::vector<const NodeGpuInfo*> pool;
  std::set<std::string> known;
  for (const auto& n : inv.nodes) {
    if (!n.gpu_node || !offers(n, resource)) continue;
    if (!n.product.empty()) known.insert(n.product);
    pool.push_back(&n);
  }
  p.known_products.assign(known.begin(), known.end());
  return pool;
}

// The nodes whose product is `gpu_type`: spelled exactly, then in any spelling, then as part of
// the product's name (A100 finds NVIDIA-A100-SXM4-80GB); the first try that finds any wins.
std::vector<const NodeGpuInfo*> nodes_of_type(const std::vector<const NodeGpuInfo*>& pool, std::string_view gpu_type) {
  auto pick = [&](auto&& pred) {
    std::vector<const NodeGpuInfo*> out;
    for (auto* n : pool) {
      if (!n->product.empty() && pred(*n)) out.push_back(n);
    }
    return out;
  };
  auto matched = pick([&](const NodeGpuInfo& n) { return n.product == gpu_type; });
  if (matched.empty()) matched = pick([&](const NodeGpuInfo& n) { return squash(n.product) == squash(gpu_type); });
  if (matched.empty() && !squash(gpu_type).empty()) {
    matched = pick([&](const NodeGpuInfo& n) { return squash(n.product).find(squash(gpu_type)) != std::string::npos; });
  }
  return matched;
}

// The products matched and, per product label key, the values that select them.
void select_products(const std::vector<const NodeGpuInfo*>& matched, GpuPlacement& p) {
  std::set<std::string> products;
  std::map<std::string, std::set<std::string>> selector;
  for (auto* n : matched) {
    products.insert(n->product);
    selector[n->product_label].insert(n->product);
  }
  p.products.assign(products.begin(), products.end());
  for (auto& [key, values] : selector) p.selector[key].assign(values.begin(), values.end());
}

// The nodes of one product whose taints speak for it: the schedulable, Ready ones (all of them
// when none is), so one node's maintenance taint is not taken for the pool's.
std::vector<const NodeGpuInfo*> representative_nodes(const std::vector<const NodeGpuInfo*>& members) {
  std::vector<const NodeGpuInfo*> healthy;
  for (auto* n : members) {
    if (n->schedulable && n->readiness == "Ready") healthy.push_back(n);
  }
  return healthy.empty() ? members : healthy;
}

struct TaintSpread {
  bool everywhere = true;  // every node has a taint of this key and effect
  bool same_value = true;  // and all with this value
};

TaintSpread spread_of(const kube::Taint& t, const std::vector<const NodeGpuInfo*>& nodes) {
  TaintSpread spread;
  for (auto* n : nodes) {
    auto it = std::find_if(n->taints.begin(), n->taints.end(),
                           [&](const kube::Taint& o) { return o.key == t.key && o.effect == t.effect; });
    if (it == n->taints.end()) {
      spread.everywhere = false;
      break;
    }
    if (it->value != t.value) spread.same_value = false;
  }
  return spread;
}

// Per product: the NoSchedule/NoExecute taints on every representative node, lifecycle taints
// left out; each with whether one value fits all (then it is tolerated by value, else by key).
std::vector<std::pair<kube::Taint, bool>> pool_taints_of(const std::vector<const NodeGpuInfo*>& matched) {
  std::map<std::string, std::vector<const NodeGpuInfo*>> by_product;
  for (auto* n : matched) by_product[n->product].push_back(n);
  std::vector<std::pair<kube::Taint, bool>> taints;  // taint, every node has the same value
  for (auto& [product, members] : by_product) {
    const auto basis = representative_nodes(members);
    for (const auto& t : basis.front()->taints) {
      if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
      if (is_lifecycle_taint(t)) continue;
      const TaintSpread spread = spread_of(t, basis);
      if (!spread.everywhere) continue;
      auto known_taint = std::find_if(taints.begin(), taints.end(), [&](const auto& kt) {
        return kt.first.key == t.key && kt.first.effect == t.effect;
      });
      if (known_taint == taints.end()) {
        taints.emplace_back(kube::Taint{t.key, t.value, t.effect, ""}, spread.same_value);
      } else if (known_taint->first.value != t.value || !spread.same_value) {
        known_taint->second = false;  // pools disagree on the value: tolerate the key
      }
    }
  }
  return taints;
}

void add_pool_tolerations(const std::vector<const NodeGpuInfo*>& matched, GpuPlacement& p) {
  for (auto& [t, same_value] : pool_taints_of(matched)) {
    p.pool_taints.push_back(t);
    p.tolerations.push_back(toleration_for(t, same_value));
  }
}

}  // namespace

GpuPlacement derive_dra_placement(const std::vector<json>& nodes, const DraInventory& dra, const SubmitSpec& spec) {
  using namespace submit_dra_detail;
  GpuPlacement p;
  p.resource.clear();
  p.gpu_type = spec.gpu_type;
  const RequestDevices of_class = request_devices(dra, spec.device_class, {});
  const RequestDevices wanted = request_devices(dra, spec.device_class, gpu_type_selectors(spec.gpu_type));
  std::set<std::string> known, products, holding;
  for (const auto& c : of_class.candidates) {
    // Devices the class may hold (its selectors matched, or could not be judged) name its products.
    if (c.verdict.kind != CelVerdict::Kind::no_match && !c.device->product.empty()) known.insert(c.device->product);
  }
  bool unsure = false;
  for (const auto& c : wanted.candidates) {
    unsure = unsure || c.verdict.kind == CelVerdict::Kind::unsupported;
    if (!c.verdict.matches()) continue;
    if (!c.device->product.empty()) products.insert(c.device->product);
    if (!c.device->node.empty()) holding.insert(c.device->node);
  }
  p.known_products.assign(known.begin(), known.end());
  p.products.assign(products.begin(), products.end());
  // Only a class with devices, none of them the type and none unknown, says the type is absent;
  // a class with no devices at all is the capacity check's to report.
  p.type_found = spec.gpu_type.empty() || !products.empty() || unsure || of_class.candidates.empty();
  // Every node: those holding DRA devices need offer no nvidia.com/gpu.
  NodeInventory inv = build_node_inventory(nodes, {}, true, std::chrono::system_clock::time_point{});
  std::vector<const NodeGpuInfo*> matched;
  for (const auto& n : inv.nodes) {
    if (holding.contains(n.name)) matched.push_back(&n);
  }
  if (!matched.empty()) add_pool_tolerations(matched, p);
  return p;
}

GpuPlacement derive_gpu_placement(const std::vector<json>& nodes, std::string_view gpu_type,
                                  std::string_view resource) {
  GpuPlacement p;
  p.resource = std::string(resource);
  p.gpu_type = std::string(gpu_type);
  NodeInventory inv = build_node_inventory(nodes, {}, false, std::chrono::system_clock::time_point{});
  const std::vector<const NodeGpuInfo*> pool = gpu_pool(inv, resource, p);

  std::vector<const NodeGpuInfo*> matched = pool;
  if (!gpu_type.empty()) {
    matched = nodes_of_type(pool, gpu_type);
    if (matched.empty()) {
      // Nothing carries it: select it as GPU Feature Discovery would label it, so that with
      // --force the job waits for such nodes (and the pre-flight check says there are none).
      p.type_found = false;
      p.products = {std::string(gpu_type)};
      p.selector["nvidia.com/gpu.product"] = {std::string(gpu_type)};
      return p;
    }
    select_products(matched, p);
  }
  add_pool_tolerations(matched, p);
  return p;
}

}  // namespace gpuctl::ops
