#pragma once
// Helpers shared by the submit_workloads*.cpp files; not part of the library's interface.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"

namespace gpuctl::ops::workloads_detail {

// Replicas and pods of one template above this are a manifest's mistake (and keep the counts'
// products far from overflowing).
inline constexpr std::int64_t kMaxReplicas = 10000;

// One pod template's place in the manifest: the replicatedJob or the replica spec that holds it.
struct GroupRef {
  std::string name;   // replicatedJob name, or replica type
  std::string where;  // "spec.replicatedJobs[1]", "spec.pytorchReplicaSpecs.Worker", for errors
  nlohmann::json* replica = nullptr;
  std::int64_t replicas = 1;
};

// The groups of `object` (of `kind`), checked: where the templates are, replicas and (for Kubeflow
// kinds) restartPolicy; invalid_argument names the field. Points into `object`.
Result<std::vector<GroupRef>> group_refs(nlohmann::json& object, const WorkloadKind& kind, std::string_view source);

// Pods one replica makes: for a JobSet's Job min(parallelism (default 1), completions); else 1.
std::int64_t pods_per_replica(const GroupRef& ref, const WorkloadKind& kind);

// The batch/v1 Job "<name>-<group, lower case>" with parallelism `pods` around a completed pod
// template, read by the pre-flight checks and the server dry run of a pod.
nlohmann::json group_job(const nlohmann::json& metadata, const std::string& group, const nlohmann::json& pod_template,
                         std::int64_t pods);

// Notes (or warnings) of several groups: one that every group got is said once, others with the
// groups that got them ("Master, Worker: ..."), in the order first seen.
class NoteMerger {
 public:
  void add(const std::string& group, const std::string& note);
  std::vector<std::string> lines(std::size_t group_count) const;

 private:
  std::vector<std::pair<std::string, std::vector<std::string>>> entries_;
};

}  // namespace gpuctl::ops::workloads_detail
