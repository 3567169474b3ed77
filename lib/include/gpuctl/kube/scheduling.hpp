#pragma once
// Where a pod may be placed, by the scheduler's own filter rules, as pure functions over JSON:
// the NodeAffinity filter (spec.nodeSelector AND the required node affinity), the
// TaintToleration filter (NoSchedule and NoExecute taints), and the NodeUnschedulable filter
// (spec.unschedulable, unless node.kubernetes.io/unschedulable:NoSchedule is tolerated).
// Mirrors k8s.io/component-helpers/scheduling/corev1 and v1 helper ToleratesTaint.
// `pod_spec` is always a PodSpec (a pod's or a pod template's .spec), never a whole pod.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::kube {

// The taint the node controller puts on cordoned nodes; tolerating it lets a pod land on one.
inline constexpr std::string_view kUnschedulableTaintKey = "node.kubernetes.io/unschedulable";

// One toleration (a JSON object) against one taint, as upstream's Toleration.ToleratesTaint:
// an empty effect matches every effect, an empty key (operator Exists) matches every key,
// operator "" or Equal compares values, Exists ignores them; any other operator tolerates nothing.
bool tolerates(const nlohmann::json& toleration, const Taint& taint);
// True when any toleration in the list tolerates the taint.
bool tolerates(const std::vector<nlohmann::json>& tolerations, const Taint& taint);
// spec.tolerations of a PodSpec as a list (empty when absent or malformed).
std::vector<nlohmann::json> tolerations_of(const nlohmann::json& pod_spec);

// The node's NoSchedule and NoExecute taints that the pod does not tolerate, in node order
// (PreferNoSchedule never blocks). The unschedulable taint is left out: node_admits_unschedulable
// judges cordons.
std::vector<Taint> untolerated_taints(const nlohmann::json& pod_spec, const nlohmann::json& node);

// NodeUnschedulable: false when the node is cordoned and the pod does not tolerate
// node.kubernetes.io/unschedulable:NoSchedule.
bool node_admits_unschedulable(const nlohmann::json& pod_spec, const nlohmann::json& node);

// One NodeSelectorRequirement ({key, operator, values}) against a node's labels:
// In, NotIn (also true when the label is absent), Exists, DoesNotExist, Gt and Lt (the label
// and the single value parsed as integers; false when either does not parse).
bool matches_requirement(const nlohmann::json& requirement, const nlohmann::json& node);
// One NodeSelectorTerm: matchExpressions (labels) and matchFields (only metadata.name) ANDed.
// A term with neither matches nothing, as upstream.
bool matches_node_selector_term(const nlohmann::json& term, const nlohmann::json& node);
// A NodeSelector ({nodeSelectorTerms: [...]}): terms ORed; no terms matches nothing.
bool matches_node_selector_terms(const nlohmann::json& node_selector, const nlohmann::json& node);

// spec.nodeSelector (every label equal) AND
// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (absent: any node),
// AND spec.nodeName when the pod names its node. Preferred affinity never excludes a node.
bool matches_node_selector(const nlohmann::json& pod_spec, const nlohmann::json& node);

// True when the PodSpec constrains placement by labels at all (nodeSelector, required affinity or nodeName).
bool has_placement_constraints(const nlohmann::json& pod_spec);

// The placement constraints in a short human form, e.g.
// `nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`, `zone in (a,b), !spot`, `(a=1) or (b>3)`;
// "" when the pod has none.
std::string describe_placement(const nlohmann::json& pod_spec);

// Why a node cannot take the pod, in the scheduler's filter order; nullopt when it can.
struct NodeExclusion {
  enum class Kind { placement, cordoned, taint };
  Kind kind = Kind::placement;
  std::optional<Taint> taint;  // Kind::taint: the first untolerated taint
};
std::optional<NodeExclusion> placement_exclusion(const nlohmann::json& pod_spec, const nlohmann::json& node);

}  // namespace gpuctl::kube
