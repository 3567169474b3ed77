// Why a Job failed: the reason and message of its Failed (or FailureTarget) condition, and the
// container that exited non-zero in its latest failed pod.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops::job_status_detail {

using json = nlohmann::json;
namespace {

// The failed container of the job's latest failed pod. Pods that were evicted or preempted
// (DisruptionTarget) say nothing about the program, so they come last.
std::optional<JobFailure> failed_container(const std::vector<json>& pods) {
  std::optional<JobFailure> best;
  util::TimePoint best_time{};
  bool best_disrupted = true;
  for (const auto& pod : pods) {
    if (pod_phase(pod) != "Failed" && !pod_terminating(pod)) continue;
    auto attempt = failed_attempt_of(pod);
    if (!attempt) continue;
    bool disrupted = true_condition(pod, "DisruptionTarget") != nullptr;
    util::TimePoint t = util::parse_rfc3339(attempt->finished_at).value_or(util::TimePoint{});
    if (t == util::TimePoint{}) {
      t = util::parse_rfc3339(str(pod, "/metadata/creationTimestamp"_json_pointer)).value_or(t);
    }
    bool better = !best || (best_disrupted && !disrupted) || (best_disrupted == disrupted && t > best_time);
    if (!better) continue;
    JobFailure f;
    f.exit_code = attempt->exit_code;
    f.pod = attempt->pod;
    f.container = attempt->container;
    f.termination_reason = attempt->termination_reason;
    f.termination_message = attempt->termination_message;
    f.node = attempt->node;
    if (attempt->gpu_cause) {
      f.gpu_cause = attempt->gpu_cause->cause;
      f.gpu_cause_source = attempt->gpu_cause->source;
      f.gpu_cause_evidence = attempt->gpu_cause->evidence;
    }
    best = f;
    best_time = t;
    best_disrupted = disrupted;
  }
  return best;
}

}  // namespace

std::vector<FailedAttempt> failed_attempts(const std::vector<json>& pods) {
  std::vector<const json*> failed;
  for (const auto& pod : pods) {
    if (pod_phase(pod) == "Failed" && true_condition(pod, "DisruptionTarget") == nullptr) failed.push_back(&pod);
  }
  std::stable_sort(failed.begin(), failed.end(), [](const json* a, const json* b) {
    return str(*a, "/metadata/creationTimestamp"_json_pointer) < str(*b, "/metadata/creationTimestamp"_json_pointer);
  });
  std::vector<FailedAttempt> attempts;
  for (const json* pod : failed) {
    // A pod that failed with no container exiting non-zero (deadline, node lost) is an attempt too.
    FailedAttempt a = failed_attempt_of(*pod).value_or(FailedAttempt{});
    a.pod = kube::name_of(*pod);
    a.node = str(*pod, "/spec/nodeName"_json_pointer);
    attempts.push_back(std::move(a));
  }
  return attempts;
}

std::vector<std::string> failed_attempt_nodes(const std::vector<FailedAttempt>& attempts) {
  std::vector<std::string> nodes;
  for (const auto& a : attempts) nodes.push_back(a.node.empty() ? "<unscheduled>" : a.node);
  return nodes;
}

JobFailure read_failure(const json& failed_condition, const std::vector<json>& pods) {
  JobFailure f = failed_container(pods).value_or(JobFailure{});
  f.reason = kube::string_field(failed_condition, "reason");
  f.message = kube::string_field(failed_condition, "message");
  return f;
}

std::string failure_reason(const JobFailure& f) {
  std::string head = f.message.empty() ? f.reason : f.message;
  if (f.exit_code) {
    // The termination message's last non-empty line: programs end theirs with the error.
    std::string said = f.termination_message;
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    if (auto nl = said.rfind('\n'); nl != std::string::npos) said = said.substr(nl + 1);
    std::string gpu = f.gpu_cause ? "; " + gpu_cause_text(f) : "";
    return fmt::format("{}{}container {} of pod {} exited with code {}{}{}{}", head, head.empty() ? "" : ": ",
                       f.container, f.pod, *f.exit_code,
                       f.termination_reason.empty() ? "" : " (" + f.termination_reason + ")",
                       said.empty() ? "" : ": " + said, gpu);
  }
  return head.empty() ? "failed" : head;
}

}  // namespace gpuctl::ops::job_status_detail

namespace gpuctl::ops {

std::string gpu_cause_text(const JobFailure& f) {
  if (!f.gpu_cause) return "";
  // A termination message's line is already quoted in the reason; a log's is not.
  bool from_log = f.gpu_cause_source == GpuCauseSource::log && !f.gpu_cause_evidence.empty();
  return fmt::format("GPU cause: {}{} ({}){}", f.gpu_cause->cause, f.node.empty() ? "" : " on node " + f.node,
                     f.gpu_cause->hint, from_log ? "; its log says: " + f.gpu_cause_evidence : "");
}

}  // namespace gpuctl::ops
