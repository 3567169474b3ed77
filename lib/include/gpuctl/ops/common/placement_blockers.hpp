#pragma once
// Why nodes turn a pod away, gathered over a list of nodes by the scheduler's own filter rules
// (kube/scheduling.hpp): the nodes its placement (nodeSelector, required node affinity) or a
// cordon excludes, each taint it does not tolerate with the nodes that carry it, and, for a
// selector the nodes do not satisfy, the values its label keys do have there. Pure. Read by
// `jobs` (why a job pends) and diagnose's gpu-pods-pending, so both judge a node alike.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::ops {

struct TaintedNodes {
  kube::Taint taint;
  std::vector<std::string> nodes;  // in the order the nodes were given
};

struct PlacementBlockers {
  std::vector<std::string> admitting;  // nodes these filters let the pod onto
  std::vector<std::string> unmatched;  // nodes its placement excludes
  std::vector<std::string> cordoned;   // nodes its placement allows, cordoned (unschedulable not tolerated)
  // The nodes left (placement allows them, not cordoned) that carry NoSchedule or NoExecute taints
  // it does not tolerate: each such taint, by kubectl's notation, with the nodes carrying it. A
  // node with two of them is under both; `tainted` counts each node once.
  std::vector<TaintedNodes> taints;
  std::size_t tainted = 0;
};

// Judges every node against `pod_spec` (a PodSpec), placement first: a node the pod may not use
// anyway is not counted as tainted, so the taints named are the ones that stand in its way.
PlacementBlockers placement_blockers(const nlohmann::json& pod_spec, const std::vector<const nlohmann::json*>& nodes);

// One label key of a pod's placement that none of the nodes satisfies.
struct LabelValues {
  std::string key;
  std::string wanted;               // the value asked for; "a,b" for `key in (a,b)`
  std::vector<std::string> values;  // the values the nodes have, sorted, unique
  std::size_t nodes_without = 0;    // nodes that lack the key
};

// The keys of the pod's nodeSelector, and of the In requirements of its required node affinity
// when that has a single term (with more, the terms are alternatives and no key alone excludes),
// that no node in `nodes` satisfies, with the values the nodes have for each.
std::vector<LabelValues> unmatched_labels(const nlohmann::json& pod_spec,
                                          const std::vector<const nlohmann::json*>& nodes);

}  // namespace gpuctl::ops
