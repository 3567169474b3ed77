// What a new taint means for the pods already on a node: who tolerates it, who would be kept
// away or evicted, and the pre-flight verdict of `gpuctl taint`.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

bool toleration_matches(const json& t, const kube::Taint& taint) {
  if (!t.is_object()) return false;
  std::string effect = kube::string_field(t, "effect");
  std::string key = kube::string_field(t, "key");
  std::string op = kube::string_field(t, "operator");
  if (op.empty()) op = "Equal";
  if (!effect.empty() && effect != taint.effect) return false;
  if (!key.empty() && key != taint.key) return false;
  if (op == "Exists") return true;  // an empty key with Exists tolerates every taint
  return !key.empty() && kube::string_field(t, "value") == taint.value;
}

bool tolerates(const json& pod, const kube::Taint& taint) {
  const json* tolerations = nullptr;
  if (pod.contains("spec") && pod["spec"].contains("tolerations")) tolerations = &pod["spec"]["tolerations"];
  if (tolerations == nullptr || !tolerations->is_array()) return false;
  return std::ranges::any_of(*tolerations, [&](const json& t) { return toleration_matches(t, taint); });
}

std::vector<std::string> pods_not_tolerating(const std::vector<json>& pods, const kube::Taint& taint) {
  std::vector<std::string> names;
  for (const auto& pod : pods) {
    if (kube::pod_is_terminal(pod) || tolerates(pod, taint)) continue;
    names.push_back(kube::namespace_of(pod) + "/" + kube::name_of(pod));
  }
  return names;
}

Result<std::map<std::string, std::vector<json>>> pods_on_nodes(kube::Client& client,
                                                               const std::vector<std::string>& nodes) {
  std::map<std::string, std::vector<json>> by_node;
  for (const auto& n : nodes) by_node[n];
  auto keep = [&](std::vector<json>& items) {
    for (auto& pod : items) {
      if (kube::pod_is_terminal(pod)) continue;
      auto node = kube::string_field(kube::field(pod, "spec"), "nodeName");
      if (auto it = by_node.find(node); it != by_node.end()) it->second.push_back(std::move(pod));
    }
  };
  constexpr std::size_t kPerNodeLists = 4;
  if (nodes.size() <= kPerNodeLists) {
    for (const auto& n : nodes) {
      kube::ListOptions options;
      options.field_selector = "spec.nodeName=" + n;
      GPUCTL_TRY_ASSIGN(kube::ListResult list, client.list(kube::paths::pods(), options));
      keep(list.items);
    }
  } else {
    kube::ListOptions options;
    options.field_selector = "spec.nodeName!=";
    GPUCTL_TRY_ASSIGN(kube::ListResult list, client.list(kube::paths::pods(), options));
    keep(list.items);
  }
  return by_node;
}

TaintImpact taint_impact(const std::map<std::string, std::vector<json>>& pods_by_node,
                         const std::vector<TaintSpec>& specs, bool evict_allowed) {
  TaintImpact impact;
  for (const auto& [node, node_pods] : pods_by_node) {
    for (const auto& spec : specs) {
      if (spec.remove || spec.taint.effect == "PreferNoSchedule") continue;
      auto intolerant = pods_not_tolerating(node_pods, spec.taint);
      if (intolerant.empty()) continue;
      std::string list = fmt::format("{}", fmt::join(intolerant, ", "));
      std::string taint = kube::to_string(spec.taint);
      if (spec.taint.effect == "NoSchedule") {
        impact.warnings.push_back(
            fmt::format("node/{}: {} running pod(s) do not tolerate {}; they keep running, but pods like "
                        "them will not be placed there again: {}",
                        node, intolerant.size(), taint, list));
      } else if (evict_allowed) {
        impact.warnings.push_back(fmt::format("node/{}: {} pod(s) do not tolerate {} and will be evicted: {}", node,
                                              intolerant.size(), taint, list));
      } else {
        impact.refusals.push_back(
            fmt::format("node/{}: {} pod(s) do not tolerate {} and would be evicted: {} (add --yes to "
                        "evict them, or give them a toleration)",
                        node, intolerant.size(), taint, list));
      }
    }
  }
  return impact;
}

}  // namespace gpuctl::ops
