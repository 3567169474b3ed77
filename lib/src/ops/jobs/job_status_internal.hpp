#pragma once
// Helpers shared by the job_status*.cpp files; not part of the library's interface.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/ops/jobs/job_status.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::job_status_detail {

// Readers over a Job, its pods and events that never throw: the objects come from the server,
// and a missing or wrongly typed field reads as empty (defined in job_status.cpp).

// The string at `ptr`, "" when absent or not a string.
std::string str(const nlohmann::json& object, const nlohmann::json::json_pointer& ptr);
// The integer at `ptr`, `fallback` when absent or not an integer.
int integer(const nlohmann::json& object, const nlohmann::json::json_pointer& ptr, int fallback = 0);
// The array at `ptr`, an empty array when absent or not an array.
const nlohmann::json& array_at(const nlohmann::json& object, const nlohmann::json::json_pointer& ptr);

// The condition of this type whose status is True, or nullptr.
const nlohmann::json* true_condition(const nlohmann::json& object, std::string_view type);
// The condition of this type whatever its status, or nullptr.
const nlohmann::json* condition(const nlohmann::json& object, std::string_view type);

bool pod_terminating(const nlohmann::json& pod);
std::string pod_phase(const nlohmann::json& pod);

// job_status_failure.cpp: the failure a Failed (or FailureTarget) condition names, with the
// failed container of the job's latest failed pod when one exited non-zero.
JobFailure read_failure(const nlohmann::json& failed_condition, const std::vector<nlohmann::json>& pods);
// Each failed (not evicted or preempted) pod, oldest first, with what its termination says.
std::vector<FailedAttempt> failed_attempts(const std::vector<nlohmann::json>& pods);
// Their nodes, "<unscheduled>" for a pod that never had one.
std::vector<std::string> failed_attempt_nodes(const std::vector<FailedAttempt>& attempts);
// The failure in plain words: the condition's message (or reason), then the container's exit.
std::string failure_reason(const JobFailure& failure);

// job_status_pending.cpp: why a Job that is neither failed, succeeded, suspended nor running has
// no running pod (`reason`, never ""), and, for a pod the scheduler cannot place, what stands in
// its way (`detail`, judged against `nodes` when given). `summary` gives the name, namespace,
// succeeded count and start time summarize_job has already read.
struct PendingVerdict {
  std::string reason;
  std::optional<PendingDetail> detail;
};
PendingVerdict pending_reason(const nlohmann::json& job, const std::vector<nlohmann::json>& pods,
                              const std::vector<nlohmann::json>& events, const JobSummary& summary,
                              const std::vector<nlohmann::json>* nodes);

// What an entry of the scheduler's verdict is about, for putting the detail that explains it beside it.
enum class VerdictTopic { other, taint, selector, resource_claim, volume_claim };
VerdictTopic verdict_topic(std::string_view reason);  // job_status_scheduling.cpp

// job_status_blockers.cpp: what stands in the way of `pod`, unschedulable with the scheduler's
// `message`: taints and selector judged against `nodes` (when given), its claims when the
// scheduler's words are about claims.
PendingDetail pending_detail(const nlohmann::json& pod, std::string message, const std::vector<nlohmann::json>* nodes);
// The detail about one topic in plain words, "" when it names nothing about it. `taint` (as the
// scheduler names one: "key" or "key=value"), when not "", keeps only the taints it names.
std::string detail_words(const PendingDetail& detail, VerdictTopic topic, std::string_view taint = {});
// The JSON of JobSummary::pending (to_json's "pending").
nlohmann::json pending_json(const PendingDetail& detail);

// job_status_wait.cpp: the cluster's nodes, as much of each as the detail reads (labels, taints,
// cordon, allocatable), for summarize_job's `nodes`; nullopt when they cannot be read (a user who
// may read jobs but not nodes still gets the scheduler's verdict, only without the detail).
std::optional<std::vector<nlohmann::json>> read_nodes_for_detail(kube::Client& client);

}  // namespace gpuctl::ops::job_status_detail
