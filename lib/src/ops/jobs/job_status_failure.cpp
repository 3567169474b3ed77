// Why a Job failed: the reason and message of its Failed (or FailureTarget) condition, and the
// container that exited non-zero in its latest failed pod.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/gpu_failure_text.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops::job_status_detail {

using json = nlohmann::json;
namespace {

struct Termination {
  int exit_code = 0;
  std::string container, reason, message;
  util::TimePoint finished{};
};

// The last non-zero termination of a container of this pod.
std::optional<Termination> failed_termination(const json& pod) {
  std::optional<Termination> best;
  for (auto list : {"/status/initContainerStatuses"_json_pointer, "/status/containerStatuses"_json_pointer}) {
    for (const auto& cs : array_at(pod, list)) {
      for (auto state : {"/state/terminated"_json_pointer, "/lastState/terminated"_json_pointer}) {
        if (!cs.contains(state)) continue;
        const json& t = cs.at(state);
        if (!t.is_object() || !t.contains("exitCode") || !t["exitCode"].is_number_integer()) continue;
        int code = t["exitCode"].get<int>();
        if (code == 0) continue;
        Termination term{code, kube::string_field(cs, "name"), kube::string_field(t, "reason"),
                         kube::string_field(t, "message"),
                         util::parse_rfc3339(kube::string_field(t, "finishedAt")).value_or(util::TimePoint{})};
        if (!best || term.finished > best->finished) best = term;
        break;  // state wins over lastState
      }
    }
  }
  return best;
}

// The failed container of the job's latest failed pod. Pods that were evicted or preempted
// (DisruptionTarget) say nothing about the program, so they come last.
std::optional<JobFailure> failed_container(const std::vector<json>& pods) {
  std::optional<JobFailure> best;
  util::TimePoint best_time{};
  bool best_disrupted = true;
  for (const auto& pod : pods) {
    if (pod_phase(pod) != "Failed" && !pod_terminating(pod)) continue;
    auto term = failed_termination(pod);
    if (!term) continue;
    bool disrupted = true_condition(pod, "DisruptionTarget") != nullptr;
    util::TimePoint t = term->finished;
    if (t == util::TimePoint{}) {
      t = util::parse_rfc3339(str(pod, "/metadata/creationTimestamp"_json_pointer)).value_or(t);
    }
    bool better = !best || (best_disrupted && !disrupted) || (best_disrupted == disrupted && t > best_time);
    if (!better) continue;
    JobFailure f;
    f.exit_code = term->exit_code;
    f.pod = kube::name_of(pod);
    f.container = term->container;
    f.termination_reason = term->reason;
    f.termination_message = term->message;
    f.node = str(pod, "/spec/nodeName"_json_pointer);
    f.gpu_cause = classify_gpu_failure(term->message);
    best = f;
    best_time = t;
    best_disrupted = disrupted;
  }
  return best;
}

}  // namespace

std::vector<std::string> failed_attempt_nodes(const std::vector<json>& pods) {
  std::vector<const json*> failed;
  for (const auto& pod : pods) {
    if (pod_phase(pod) == "Failed" && true_condition(pod, "DisruptionTarget") == nullptr) failed.push_back(&pod);
  }
  std::sort(failed.begin(), failed.end(), [](const json* a, const json* b) {
    return str(*a, "/metadata/creationTimestamp"_json_pointer) < str(*b, "/metadata/creationTimestamp"_json_pointer);
  });
  std::vector<std::string> nodes;
  for (const json* pod : failed) {
    std::string node = str(*pod, "/spec/nodeName"_json_pointer);
    nodes.push_back(node.empty() ? "<unscheduled>" : node);
  }
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
  return fmt::format("GPU cause: {}{} ({})", f.gpu_cause->cause, f.node.empty() ? "" : " on node " + f.node,
                     f.gpu_cause->hint);
}

}  // namespace gpuctl::ops
