// gpu-capacity and gpu-free-now: could any node ever hold one pod, and do the pods fit now?
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/dra/dra_extended.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace preflight_detail;
using Requests = std::vector<std::pair<std::string, std::int64_t>>;

constexpr std::string_view kCapacity = "gpu-capacity";
constexpr std::string_view kFreeNow = "gpu-free-now";

std::int64_t allocatable(const json& node, const std::string& resource) {
  auto list = kube::parse_resource_list(field(field(node, "status"), "allocatable"));
  auto it = list.find(resource);
  return it == list.end() ? 0 : it->second.value();
}

// What each node offers of the requested resources: its allocatable or, on a node that does not
// advertise a resource, the devices a DeviceClass serves it with through DRA (DRAExtendedResource;
// `input.dra` is read when no node advertises the resource, see wants_dra).
class Offers {
 public:
  Offers(const PreflightInput& input, const Requests& requests) {
    if (!input.dra || !input.dra->served) return;
    for (const auto& r : requests) dra_[r.first] = dra_extended_room(*input.dra, r.first);
  }

  std::int64_t of(const json& node, const std::string& name) const {
    const DraExtendedRoom* dra = dra_room(node, name);
    return dra != nullptr ? dra->devices : allocatable(node, name);
  }

  // The DRA room of `name` on `node`, nullptr where the node advertises it (or no class maps it).
  const DraExtendedRoom* dra_room(const json& node, const std::string& name) const {
    auto by_node = dra_.find(name);
    if (by_node == dra_.end() || allocatable(node, name) > 0) return nullptr;
    auto it = by_node->second.find(kube::name_of(node));
    return it == by_node->second.end() ? nullptr : &it->second;
  }

  bool fits(const json& node, const Requests& requests) const {
    return std::all_of(requests.begin(), requests.end(), [&](const auto& r) { return of(node, r.first) >= r.second; });
  }

 private:
  std::map<std::string, std::map<std::string, DraExtendedRoom>> dra_;  // by resource, then node
};

// How the message names the nodes the pod may land on.
struct PlacementWords {
  std::string where;     // "with product X ", "matching a=b ", or ""
  std::string of_those;  // "of that product", "matching", "in the cluster"
  bool names_product = false;
};

PlacementWords placement_words(const json& spec) {
  if (!kube::has_placement_constraints(spec)) return {"", "in the cluster", false};
  const auto& keys = gpu_product_label_keys();
  auto is_product_key = [&](const std::string& key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  const json& selector = field(spec, "nodeSelector");
  const json& affinity =
      field(field(field(spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
  // A single product label, by nodeSelector or by one In expression with one value.
  std::string product;
  if (selector.is_object() && selector.size() == 1 && affinity.is_null() && is_product_key(selector.begin().key()) &&
      selector.begin()->is_string()) {
    product = selector.begin()->get<std::string>();
  } else if ((selector.is_null() || selector.empty()) && field(affinity, "nodeSelectorTerms").is_array() &&
             field(affinity, "nodeSelectorTerms").size() == 1) {
    const json& term = field(affinity, "nodeSelectorTerms")[0];
    const json& exprs = field(term, "matchExpressions");
    if (exprs.is_array() && exprs.size() == 1 && field(term, "matchFields").is_null() &&
        string_field(exprs[0], "operator") == "In" && is_product_key(string_field(exprs[0], "key")) &&
        field(exprs[0], "values").is_array() && field(exprs[0], "values").size() == 1 &&
        field(exprs[0], "values")[0].is_string()) {
      product = field(exprs[0], "values")[0].get<std::string>();
    }
  }
  if (!product.empty() && string_field(spec, "nodeName").empty())
    return {"with product " + product + " ", "of that product", true};
  bool mentions_product = false;
  std::string described = kube::describe_placement(spec);
  for (auto key : keys) mentions_product = mentions_product || described.find(key) != std::string::npos;
  return {"matching " + described + " ", "matching", mentions_product};
}

// "nvidia.com/gpu.product=NVIDIA-A100 (4 nodes), accelerator=l4 (1 node)", by node product labels.
std::string products_on(const std::vector<json>& nodes) {
  std::map<std::string, std::int64_t> counts;
  for (const auto& node : nodes) {
    if (auto [product, key] = gpu_product_of(node); !product.empty()) ++counts[fmt::format("{}={}", key, product)];
  }
  std::vector<std::string> parts;
  for (const auto& [label, n] : counts) parts.push_back(fmt::format("{} ({})", label, count_of(n, "node", "nodes")));
  return join(parts, ", ");
}

std::string exclusion_reason(const kube::NodeExclusion& ex) {
  if (ex.kind == kube::NodeExclusion::Kind::cordoned) return "cordoned";
  return fmt::format("with taint {} not tolerated", kube::to_string(*ex.taint));
}

std::string requested_amounts(const Requests& requests) {
  std::vector<std::string> parts;
  for (const auto& [name, n] : requests) parts.push_back(amount(n, name));
  return join(parts, " and ");
}

// A job of one pod per node where some nodes fit but too few: it can never run whole.
PreflightFinding too_few_nodes(std::int64_t needed, const std::vector<std::string>& fitting,
                               const PlacementWords& words, const Requests& requests) {
  constexpr std::size_t kNamed = 5;
  std::vector<std::string> named(fitting.begin(), fitting.begin() + std::min(fitting.size(), kNamed));
  std::string names = join(named, ", ");
  if (fitting.size() > kNamed) names += fmt::format(" and {} more", fitting.size() - kNamed);
  return refusal(
      kCapacity,
      fmt::format("the job runs {} pods at once, one per node, but only {} {}{} {} ({})", needed,
                  count_of(static_cast<std::int64_t>(fitting.size()), "schedulable node", "schedulable nodes"),
                  words.where, fitting.size() == 1 ? "has" : "have", requested_amounts(requests), names));
}

}  // namespace

std::vector<PreflightFinding> check_gpu_capacity(const PreflightInput& input) {
  const Requests requests = nvidia_requests(input.job);
  if (requests.empty()) return {};
  const json& spec = pod_spec(input.job);
  const Offers offers(input, requests);
  const bool spread = one_pod_per_node(input.job);
  const std::int64_t needed = concurrent_pods(input.job, false);
  std::vector<std::string> fitting;  // with `spread`: the nodes that could each hold one pod

  std::int64_t matching = 0;
  std::int64_t schedulable = 0;
  std::vector<std::pair<std::string, std::int64_t>> excluded;  // reason -> count, first seen first
  std::map<std::string, std::int64_t> largest;
  for (const auto& node : input.nodes) {
    auto ex = kube::placement_exclusion(spec, node);
    if (ex && ex->kind == kube::NodeExclusion::Kind::placement) continue;
    ++matching;
    if (ex) {
      std::string reason = exclusion_reason(*ex);
      auto it = std::find_if(excluded.begin(), excluded.end(), [&](const auto& e) { return e.first == reason; });
      if (it == excluded.end()) {
        excluded.emplace_back(reason, 1);
      } else {
        ++it->second;
      }
      continue;
    }
    ++schedulable;
    if (offers.fits(node, requests)) {
      if (!spread) return {};
      fitting.push_back(kube::name_of(node));
      if (static_cast<std::int64_t>(fitting.size()) >= needed) return {};
      continue;
    }
    for (const auto& [name, n] : requests) largest[name] = std::max(largest[name], offers.of(node, name));
  }

  const PlacementWords words = placement_words(spec);
  if (!fitting.empty()) return {too_few_nodes(needed, fitting, words, requests)};
  if (matching == 0) {
    if (!kube::has_placement_constraints(spec)) {
      return {refusal(kCapacity,
                      fmt::format("the cluster has no nodes to run pods asking for {}", requested_amounts(requests)))};
    }
    std::string message =
        fmt::format("no node matches the job's placement {} (0 of {})", kube::describe_placement(spec),
                    count_of(static_cast<std::int64_t>(input.nodes.size()), "node", "nodes"));
    if (words.names_product) {
      std::string products = products_on(input.nodes);
      message +=
          products.empty() ? "; no node carries a GPU product label" : "; GPU products on the nodes: " + products;
    }
    return {refusal(kCapacity, std::move(message))};
  }

  std::vector<std::string> reasons;
  for (const auto& [reason, n] : excluded) reasons.push_back(fmt::format("{} {}", n, reason));
  std::string head = fmt::format("no schedulable node {}has {}", words.where, requested_amounts(requests));
  if (schedulable == 0) {
    if (matching == 1) {
      return {refusal(kCapacity, fmt::format("{}: the only node {} is not schedulable ({})", head, words.of_those,
                                             excluded.front().first))};
    }
    return {refusal(kCapacity, fmt::format("{}: none of the {} nodes {} is schedulable ({})", head, matching,
                                           words.of_those, join(reasons, ", ")))};
  }
  std::string biggest;
  if (requests.size() == 1) {
    biggest = fmt::format("the largest has {}", largest[requests.front().first]);
  } else {
    std::vector<std::string> parts;
    for (const auto& [name, n] : requests) parts.push_back(amount(largest[name], name));
    biggest = "the largest offer " + join(parts, ", ");
  }
  std::string counts =
      fmt::format("{} {}, {} schedulable", count_of(matching, "node", "nodes"), words.of_those, schedulable);
  if (!reasons.empty()) counts += "; " + join(reasons, ", ");
  return {refusal(kCapacity, fmt::format("{}: {} ({})", head, biggest, counts))};
}

std::vector<PreflightFinding> check_gpu_free_now(const PreflightInput& input) {
  const Requests requests = nvidia_requests(input.job);
  const std::int64_t wanted = concurrent_pods(input.job, true);
  const bool spread = one_pod_per_node(input.job);
  if (requests.empty() || wanted == 0 || !input.pods_listed) return {};
  const json& spec = pod_spec(input.job);
  const Offers offers(input, requests);

  std::map<std::string, kube::ResourceList> used;  // by node name
  for (const auto& pod : input.pods) {
    std::string node = string_field(field(pod, "spec"), "nodeName");
    if (node.empty() || kube::pod_is_terminal(pod)) continue;
    auto& total = used[node];
    for (const auto& [name, q] : kube::pod_requests(pod)) {
      if (is_nvidia_resource(name)) total[name] += q;
    }
  }

  const std::string& primary = requests.front().first;
  std::int64_t fitting = 0;
  std::int64_t placeable = 0;
  std::int64_t most_free = 0;
  std::int64_t total_free = 0;
  for (const auto& node : input.nodes) {
    if (kube::placement_exclusion(spec, node) || !offers.fits(node, requests)) continue;
    ++fitting;
    const auto& on_node = used[kube::name_of(node)];
    std::int64_t pods_here = -1;
    for (const auto& [name, n] : requests) {
      // Where DRA serves the resource, the claims' devices are its use (the pods' requests are
      // served by those claims: not counted again).
      auto it = on_node.find(name);
      const DraExtendedRoom* dra = offers.dra_room(node, name);
      std::int64_t in_use = dra != nullptr ? dra->held : it == on_node.end() ? 0 : it->second.value();
      std::int64_t free = std::max<std::int64_t>(kube::saturating_sub(offers.of(node, name), in_use), 0);
      if (name == primary) {
        most_free = std::max(most_free, free);
        total_free = kube::saturating_add(total_free, free);
      }
      std::int64_t k = free / n;
      pods_here = pods_here < 0 ? k : std::min(pods_here, k);
    }
    if (spread) pods_here = std::min<std::int64_t>(pods_here, 1);
    placeable = kube::saturating_add(placeable, std::max<std::int64_t>(pods_here, 0));
  }
  if (fitting == 0 || placeable >= wanted) return {};  // no fitting node: gpu-capacity refuses
  if (spread && fitting < wanted) return {};           // too few nodes ever: gpu-capacity refuses too

  const std::string across = fmt::format("{} free across {}", total_free, count_of(fitting, "node", "nodes"));
  if (spread) {
    return {
        warning(kFreeNow, fmt::format("the job needs {} nodes with {} free each (one pod per node), {} {} now ({}); "
                                      "the rest of its pods will wait in Pending",
                                      wanted, amount(requests.front().second, primary), placeable,
                                      placeable == 1 ? "has" : "have", across))};
  }
  if (placeable == 0) {
    return {warning(kFreeNow, fmt::format("the {} per pod exist but are busy: at most {} free on one node now ({}); "
                                          "the job will wait in Pending",
                                          amount(requests.front().second, primary), most_free, across))};
  }
  return {warning(kFreeNow, fmt::format("only {} of the job's {} pods ({} each) fit on the GPUs free now ({}); "
                                        "the rest will wait in Pending",
                                        placeable, wanted, amount(requests.front().second, primary), across))};
}

}  // namespace gpuctl::ops
