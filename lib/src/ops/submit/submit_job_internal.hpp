#pragma once
// Steps of the Job builder kept in files of their own; not part of the library's interface.
#include <nlohmann/json.hpp>

#include "gpuctl/ops/submit/submit.hpp"

namespace gpuctl::ops {

namespace submit_job_detail {
// The object (array) at `key`, made one if it is missing or of another type.
inline nlohmann::json& object_at(nlohmann::json& parent, const char* key) {
  if (!parent.contains(key) || !parent[key].is_object()) parent[key] = nlohmann::json::object();
  return parent[key];
}
inline nlohmann::json& array_at(nlohmann::json& parent, const char* key) {
  if (!parent.contains(key) || !parent[key].is_array()) parent[key] = nlohmann::json::array();
  return parent[key];
}
}  // namespace submit_job_detail

// Pure: `terms` (nodeSelectorTerms, ORed among themselves) ANDed into the pod's required node
// affinity: each existing term gets each of ours; none yet, ours.
void and_node_selector_terms(nlohmann::json& pod_spec, const nlohmann::json& terms);

// Flags only: --nodes (completionMode Indexed, completions = parallelism = nodes, the subdomain,
// anti-affinity, the environment, built.service) or --completions/--parallelism.
void shape_parallel_job(nlohmann::json& job, const SubmitSpec& spec, BuiltJob& built);

// --avoid-failed-nodes: the required node affinity that keeps the pods off nodes labelled for
// this job (avoid_failed_nodes.cpp).
Result<void> keep_off_avoided_nodes(nlohmann::json& job, const SubmitSpec& spec, BuiltJob& built);

// --queue, from flags or beside -f: Kueue's queue label on the Job, and suspend: true.
void hand_to_queue(nlohmann::json& job, const SubmitSpec& spec, BuiltJob& built);

}  // namespace gpuctl::ops
