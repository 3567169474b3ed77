#include "gpuctl/ops/common/placement_blockers.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/util/strings.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

// The requirement's values when it is `key In (values)`, else nothing.
std::vector<std::string> in_values(const json& requirement) {
  std::vector<std::string> out;
  if (kube::string_field(requirement, "operator") != "In") return out;
  for (const auto& v : kube::array_field(requirement, "values")) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// The label keys the pod asks a value of, each with the values that satisfy it.
std::vector<std::pair<std::string, std::vector<std::string>>> wanted_labels(const json& pod_spec) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  const json& selector = kube::field(pod_spec, "nodeSelector");
  if (selector.is_object()) {
    for (const auto& [key, want] : selector.items()) {
      if (want.is_string()) out.push_back({key, {want.get<std::string>()}});
    }
  }
  const json& terms = kube::field_at(
      pod_spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
  if (!terms.is_array() || terms.size() != 1) return out;
  for (const auto& requirement : kube::array_field(terms.front(), "matchExpressions")) {
    auto values = in_values(requirement);
    if (!values.empty()) out.push_back({kube::string_field(requirement, "key"), std::move(values)});
  }
  return out;
}

}  // namespace

PlacementBlockers placement_blockers(const json& pod_spec, const std::vector<const json*>& nodes) {
  PlacementBlockers out;
  std::map<std::string, TaintedNodes> by_taint;  // sorted by kubectl's notation
  for (const json* node : nodes) {
    std::string name = kube::name_of(*node);
    if (!kube::matches_node_selector(pod_spec, *node)) {
      out.unmatched.push_back(std::move(name));
      continue;
    }
    if (!kube::node_admits_unschedulable(pod_spec, *node)) {
      out.cordoned.push_back(std::move(name));
      continue;
    }
    auto taints = kube::untolerated_taints(pod_spec, *node);
    if (taints.empty()) {
      out.admitting.push_back(std::move(name));
      continue;
    }
    ++out.tainted;
    for (auto& taint : taints) {
      auto& slot = by_taint[kube::to_string(taint)];
      if (slot.nodes.empty()) slot.taint = std::move(taint);
      slot.nodes.push_back(name);
    }
  }
  for (auto& [text, slot] : by_taint) out.taints.push_back(std::move(slot));
  return out;
}

std::vector<LabelValues> unmatched_labels(const json& pod_spec, const std::vector<const json*>& nodes) {
  std::vector<LabelValues> out;
  for (auto& [key, wanted] : wanted_labels(pod_spec)) {
    LabelValues label{key, util::join(wanted, ","), {}, 0};
    std::set<std::string> values;
    bool satisfied = false;
    for (const json* node : nodes) {
      auto value = kube::label_of(*node, key);
      if (!value) {
        ++label.nodes_without;
        continue;
      }
      satisfied = satisfied || std::find(wanted.begin(), wanted.end(), *value) != wanted.end();
      values.insert(*value);
    }
    if (satisfied) continue;  // not the key that excludes them
    label.values.assign(values.begin(), values.end());
    out.push_back(std::move(label));
  }
  return out;
}

}  // namespace gpuctl::ops
