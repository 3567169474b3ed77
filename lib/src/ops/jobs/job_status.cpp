// A Job's status in plain words (summarize_job) and its -o json/yaml schema (to_json). Why a job
// failed is read in job_status_failure.cpp, why it pends in job_status_pending.cpp, the
// scheduler's verdicts in job_status_scheduling.cpp; job_status_wait.cpp reads the cluster and waits.
#include "gpuctl/ops/jobs/job_status.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace job_status_detail {

std::string str(const json& object, const json::json_pointer& ptr) {
  if (!object.contains(ptr)) return {};
  const json& v = object.at(ptr);
  return v.is_string() ? v.get<std::string>() : std::string();
}

int integer(const json& object, const json::json_pointer& ptr, int fallback) {
  if (!object.contains(ptr)) return fallback;
  const json& v = object.at(ptr);
  return v.is_number_integer() ? v.get<int>() : fallback;
}

const json& array_at(const json& object, const json::json_pointer& ptr) {
  static const json empty = json::array();
  if (!object.contains(ptr)) return empty;
  const json& v = object.at(ptr);
  return v.is_array() ? v : empty;
}

const json* true_condition(const json& object, std::string_view type) {
  for (const auto& c : array_at(object, "/status/conditions"_json_pointer)) {
    if (kube::string_field(c, "type") == type && kube::string_field(c, "status") == "True") return &c;
  }
  return nullptr;
}

const json* condition(const json& object, std::string_view type) {
  for (const auto& c : array_at(object, "/status/conditions"_json_pointer)) {
    if (kube::string_field(c, "type") == type) return &c;
  }
  return nullptr;
}

bool pod_terminating(const json& pod) {
  return pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp");
}

std::string pod_phase(const json& pod) { return str(pod, "/status/phase"_json_pointer); }

}  // namespace job_status_detail

namespace {

using namespace job_status_detail;

std::int64_t seconds_between(util::TimePoint from, util::TimePoint to) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(to - from).count();
  return s > 0 ? s : 0;
}

// nvidia.com/gpu per pod, and the GPUs the job holds at once: that times parallelism, capped at
// completions when smaller, as the Job controller never runs more pods than that.
void count_gpus(const json& job, JobSummary& s) {
  if (job.contains("/spec/template"_json_pointer)) {
    auto requests = kube::pod_requests(job.at("/spec/template"_json_pointer));
    auto it = requests.find(std::string(kGpuResource));
    if (it != requests.end()) s.gpus_per_pod = it->second.value();
  }
  std::int64_t parallelism = integer(job, "/spec/parallelism"_json_pointer, 1);
  if (job.contains("/spec/completions"_json_pointer) && job.at("/spec/completions"_json_pointer).is_number_integer()) {
    parallelism = std::min<std::int64_t>(parallelism, integer(job, "/spec/completions"_json_pointer));
  }
  s.gpus = kube::saturating_mul(s.gpus_per_pod, std::max<std::int64_t>(parallelism, 0));
}

// The nodes the pods run or ran on, sorted and unique.
std::vector<std::string> nodes_of(const std::vector<json>& pods) {
  std::set<std::string> nodes;
  for (const auto& pod : pods) {
    std::string node = str(pod, "/spec/nodeName"_json_pointer);
    if (!node.empty()) nodes.insert(node);
  }
  return {nodes.begin(), nodes.end()};
}

// Creation, start and finish times, the age, and the running time (to now while unfinished). The
// Job is finished once it is Complete or Failed; when completionTime is unset (a failed Job), the
// condition's lastTransitionTime says when.
void read_times(const json& job, util::TimePoint now, JobSummary& s) {
  s.created_at = str(job, "/metadata/creationTimestamp"_json_pointer);
  s.started_at = str(job, "/status/startTime"_json_pointer);
  const json* finished_condition = true_condition(job, "Complete");
  if (finished_condition == nullptr) finished_condition = true_condition(job, "Failed");
  s.finished = finished_condition != nullptr;
  if (s.finished) {
    s.finished_at = str(job, "/status/completionTime"_json_pointer);
    if (s.finished_at.empty()) s.finished_at = kube::string_field(*finished_condition, "lastTransitionTime");
  }
  if (auto created = util::parse_rfc3339(s.created_at)) s.age_seconds = seconds_between(*created, now);
  if (auto started = util::parse_rfc3339(s.started_at)) {
    auto end = s.finished ? util::parse_rfc3339(s.finished_at) : std::optional<util::TimePoint>(now);
    if (end) s.duration_seconds = seconds_between(*started, *end);
  }
}

bool suspended(const json& job) {
  return job.contains("/spec/suspend"_json_pointer) && job.at("/spec/suspend"_json_pointer).is_boolean() &&
         job.at("/spec/suspend"_json_pointer).get<bool>();
}

// A pod runs; or, when no pods were listed, the Job itself counts ready ones.
bool running(const json& job, const std::vector<json>& pods) {
  for (const auto& pod : pods) {
    if (!pod_terminating(pod) && pod_phase(pod) == "Running") return true;
  }
  return pods.empty() && integer(job, "/status/ready"_json_pointer) > 0;
}

}  // namespace

std::string_view to_string(JobPhase phase) {
  switch (phase) {
    case JobPhase::pending: return "Pending";
    case JobPhase::running: return "Running";
    case JobPhase::succeeded: return "Succeeded";
    case JobPhase::failed: return "Failed";
    case JobPhase::suspended: return "Suspended";
  }
  return "Unknown";
}

bool job_requests_gpu(const json& job) {
  if (!job.contains("/spec/template"_json_pointer)) return false;
  for (const auto& [resource, quantity] : kube::pod_requests(job.at("/spec/template"_json_pointer))) {
    if (is_nvidia_resource(resource) && !quantity.is_zero()) return true;
  }
  return false;
}

bool pods_unschedulable(const std::vector<json>& pods) {
  for (const auto& pod : pods) {
    if (pod_terminating(pod) || !str(pod, "/spec/nodeName"_json_pointer).empty()) continue;
    const json* scheduled = condition(pod, "PodScheduled");
    if (scheduled != nullptr && kube::string_field(*scheduled, "status") == "False" &&
        kube::string_field(*scheduled, "reason") == "Unschedulable") {
      return true;
    }
  }
  return false;
}

std::string job_pod_selector(const json& job) {
  std::vector<std::string> parts;
  if (job.contains("/spec/selector/matchLabels"_json_pointer)) {
    const json& labels = job.at("/spec/selector/matchLabels"_json_pointer);
    if (labels.is_object()) {
      for (const auto& [k, v] : labels.items()) {
        if (v.is_string()) parts.push_back(fmt::format("{}={}", k, v.get<std::string>()));
      }
    }
  }
  if (parts.empty()) return "job-name=" + kube::name_of(job);
  return fmt::format("{}", fmt::join(parts, ","));
}

JobSummary summarize_job(const json& job, const std::vector<json>& pods, const std::vector<json>& events,
                         util::TimePoint now, const std::vector<json>* nodes) {
  JobSummary s;
  s.namespace_name = kube::namespace_of(job);
  s.name = kube::name_of(job);
  s.gpu_job = job_requests_gpu(job);
  count_gpus(job, s);
  s.active = integer(job, "/status/active"_json_pointer);
  s.succeeded = integer(job, "/status/succeeded"_json_pointer);
  s.failed = integer(job, "/status/failed"_json_pointer);
  s.nodes = nodes_of(pods);
  s.failed_attempts = failed_attempts(pods);
  s.failed_nodes = failed_attempt_nodes(s.failed_attempts);
  read_times(job, now, s);

  // The phase, from the Job's conditions first. FailureTarget and SuccessCriteriaMet already decide
  // it while the last pods are still being terminated; Failed and Complete follow.
  const json* failed = true_condition(job, "Failed");
  if (failed == nullptr) failed = true_condition(job, "FailureTarget");
  if (failed != nullptr) {
    s.phase = JobPhase::failed;
    JobFailure f = read_failure(*failed, pods);
    s.reason = failure_reason(f);
    s.failure = std::move(f);
    return s;
  }
  if (true_condition(job, "Complete") != nullptr || true_condition(job, "SuccessCriteriaMet") != nullptr) {
    s.phase = JobPhase::succeeded;
    return s;
  }
  if (suspended(job)) {
    s.phase = JobPhase::suspended;
    s.reason = "suspended (spec.suspend is true): no pods run until it is resumed, by you or by a queue such as Kueue";
    return s;
  }
  if (running(job, pods)) {
    s.phase = JobPhase::running;
    return s;
  }
  s.phase = JobPhase::pending;
  PendingVerdict pending = pending_reason(job, pods, events, s, nodes);
  s.reason = std::move(pending.reason);
  s.pending = std::move(pending.detail);
  return s;
}

json to_json(const JobSummary& s) {
  auto or_null = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  json failure = nullptr;
  if (s.failure) {
    failure = {
        {"reason", or_null(s.failure->reason)},
        {"message", or_null(s.failure->message)},
        {"exitCode", s.failure->exit_code ? json(*s.failure->exit_code) : json(nullptr)},
        {"pod", or_null(s.failure->pod)},
        {"container", or_null(s.failure->container)},
        {"terminationReason", or_null(s.failure->termination_reason)},
        {"terminationMessage", or_null(s.failure->termination_message)},
        {"node", or_null(s.failure->node)},
        {"gpuCause", s.failure->gpu_cause ? to_json(GpuCauseFinding{*s.failure->gpu_cause, s.failure->gpu_cause_source,
                                                                    s.failure->gpu_cause_evidence})
                                          : json(nullptr)}};
  }
  json attempts = json::array();
  for (const auto& a : s.failed_attempts) {
    attempts.push_back({{"pod", a.pod},
                        {"node", or_null(a.node)},
                        {"container", or_null(a.container)},
                        {"exitCode", a.exit_code ? json(*a.exit_code) : json(nullptr)},
                        {"terminationReason", or_null(a.termination_reason)},
                        {"finishedAt", or_null(a.finished_at)},
                        {"gpuCause", a.gpu_cause ? to_json(*a.gpu_cause) : json(nullptr)}});
  }
  return {
      {"namespace", s.namespace_name},
      {"name", s.name},
      {"status", std::string(to_string(s.phase))},
      {"finished", s.finished},
      {"gpuJob", s.gpu_job},
      {"gpusPerPod", s.gpus_per_pod},
      {"gpus", s.gpus},
      {"nodes", s.nodes},
      {"failedNodes", s.failed_nodes},
      {"failedAttempts", attempts},
      {"pods", {{"active", s.active}, {"succeeded", s.succeeded}, {"failed", s.failed}}},
      {"createdAt", or_null(s.created_at)},
      {"startedAt", or_null(s.started_at)},
      {"finishedAt", or_null(s.finished_at)},
      {"ageSeconds", s.age_seconds},
      {"durationSeconds", s.duration_seconds ? json(*s.duration_seconds) : json(nullptr)},
      {"reason", or_null(s.reason)},
      {"failure", failure},
      {"pending", s.pending ? pending_json(*s.pending) : json(nullptr)},
  };
}

}  // namespace gpuctl::ops
