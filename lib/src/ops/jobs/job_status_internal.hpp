#pragma once
// Helpers shared by the job_status*.cpp files; not part of the library's interface.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/ops/jobs/job_status.hpp"

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
// no running pod; never "". `summary` gives the name, namespace, succeeded count and start time
// summarize_job has already read.
std::string pending_reason(const nlohmann::json& job, const std::vector<nlohmann::json>& pods,
                           const std::vector<nlohmann::json>& events, const JobSummary& summary);

}  // namespace gpuctl::ops::job_status_detail
