#pragma once
// --avoid-failed-nodes: retries of a job kept off the nodes where its pods failed for a reason
// that blames the node (an NVML error, a lost GPU, an Xid, a driver too old or mismatched, no
// CUDA device), never for the program's own faults (CUDA out of memory) or a peer's (NCCL).
//
// The mechanism, chosen because a Job's pod template cannot change once the Job has started:
//  - the Job is written with a required node affinity `<key> DoesNotExist`, where <key>
//    (avoid_label_key) is this job's own label key, so no other pod is affected;
//  - while `submit --wait`/`--follow` watches, each pod that fails for such a cause gets its node
//    labelled <key>=<cause id>; the Job controller waits (10 s, then 20 s, ...) before it makes the
//    next pod, which the scheduler then keeps off that node;
//  - when the job finishes, the label is removed from every node that carries it.
// Its limits: only while gpuctl watches (Ctrl-C or --timeout leaves the labels, and the job, as
// they are; the message says how to remove them); labelling needs `patch` on nodes (without it a
// warning says the retry may land on the same node); a retry scheduled before the label lands may
// still go there; running pods are never moved (IgnoredDuringExecution).
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/common/gpu_failure_text.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

struct JobSummary;
struct FailedAttempt;

inline constexpr std::string_view kAvoidLabelDomain = "avoid.gpuctl.io";

// "avoid.gpuctl.io/<job name, cut to 56>-<6 hex digits of a hash of namespace/name>": one key per
// job, so jobs of one name in two namespaces never share it.
std::string avoid_label_key(std::string_view namespace_name, std::string_view job_name);

// The policy: whether a GPU cause blames the node the pod ran on.
bool blames_node(const TextClass& cause);

// Pure: the job's failed attempts (JobSummary::failed_attempts, whose causes wait_for_job has
// already read from termination messages and log tails) whose cause blames their node, the first
// one of each node not in `avoided_nodes`.
std::vector<const FailedAttempt*> attempts_to_avoid(const std::vector<FailedAttempt>& attempts,
                                                    const std::set<std::string>& avoided_nodes);

// Pure: the merge patch that sets (or, with a null value, removes) the label on a node.
nlohmann::json avoid_label_patch(std::string_view key, const nlohmann::json& value);

// Watches one job for `submit --wait --avoid-failed-nodes`: call poll() with every summary
// wait_for_job reports and release() once it has finished. Messages go to on_notice.
class FailedNodeAvoider {
 public:
  FailedNodeAvoider(kube::Client& client, std::string namespace_name, std::string job_name,
                    std::function<void(const std::string&)> on_notice);
  // Labels the nodes of the summary's failed attempts whose cause blames them (no reads of its own:
  // the summary holds the causes).
  void poll(const JobSummary& summary);
  // Removes the job's label from every node that carries it (also ones labelled by an earlier
  // run of gpuctl for this job); says which.
  void release();
  // For Ctrl-C and --timeout: the labels stay while the job may still run; says how to remove them.
  void leave();
  const std::set<std::string>& avoided() const { return avoided_; }

 private:
  kube::Client& client_;
  std::string ns_, job_, key_;
  std::function<void(const std::string&)> on_notice_;
  std::set<std::string> avoided_;  // labelled, or tried and refused
};

}  // namespace gpuctl::ops
