// The checks that read GPU pods' own status: refused at admission (gpu-allocation-failed), killed
// for memory (oom-killed), restarting over and over (restart-storm).
#include <map>

#include <fmt/format.h>

#include "check_support.hpp"
#include "classify.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

// A refusal seen on a node: from a failed pod's status or from a kubelet event.
struct Refusal {
  std::string pod;  // ns/name
  std::string message;
  Evidence evidence;
};

bool is_admission_refusal(const json& event) {
  return string_field(event, "reason") == "UnexpectedAdmissionError" ||
         string_field(event, "message").find("Allocate failed") != std::string::npos;
}

// The memory limit of a container, as written ("16Gi"), "" when it has none.
std::string memory_limit(const json& pod, const std::string& container) {
  for (const auto& c : kube::array_field(field(pod, "spec"), "containers")) {
    if (string_field(c, "name") == container) return string_field(field_at(c, {"resources", "limits"}), "memory");
  }
  return "";
}

// "3m ago" from an RFC 3339 time, "" when unknown.
std::string ago(const Snapshot& snapshot, const std::string& time) {
  auto t = util::parse_rfc3339(time);
  if (!t || *t > snapshot.now) return "";
  return util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(snapshot.now - *t)) + " ago";
}

bool within_window(const Snapshot& snapshot, const std::string& time) {
  auto t = util::parse_rfc3339(time);
  return t && *t >= snapshot.now - snapshot.settings.since;
}

std::vector<Finding> allocation_findings(const std::map<std::string, std::vector<Refusal>>& by_node) {
  std::vector<Finding> out;
  for (const auto& [node, refusals] : by_node) {
    std::vector<std::string> pods;
    for (const auto& r : refusals) {
      if (std::find(pods.begin(), pods.end(), r.pod) == pods.end()) pods.push_back(r.pod);
    }
    auto why = classify_allocation_failure(refusals.front().message);
    std::string cause = why ? std::string(why->cause) : "the kubelet refused the pods at admission";
    std::string where = node.empty() ? "a node" : node;
    Finding f = node_finding(
        "gpu-allocation-failed", Severity::error, node,
        fmt::format("{} refused {} GPU pod(s) at admission: {} ({})", where, pods.size(), cause, first_few(pods)));
    if (node.empty()) f.object = {"Pod", "", pods.front()};
    for (const auto& r : refusals) {
      if (f.evidence.size() < 3) f.evidence.push_back(r.evidence);
    }
    if (!node.empty()) {
      f.remedy = {fmt::format("gpuctl gpus {}", node),
                  fmt::format("kubectl logs -n kube-system -l app.kubernetes.io/name=nvidia-device-plugin "
                              "--field-selector spec.nodeName={}",
                              node),
                  fmt::format("gpuctl cordon {} --reason 'GPU allocation fails'", node)};
    }
    if (why && !why->hint.empty()) f.summary += fmt::format("; {}", why->hint);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::vector<Finding> check_gpu_allocation_failed(const Snapshot& snapshot) {
  std::map<std::string, std::vector<Refusal>> by_node;
  for (const auto& pod : snapshot.list(Source::pods)) {
    if (string_field(field(pod, "status"), "reason") != "UnexpectedAdmissionError" || !is_gpu_pod(pod)) continue;
    std::string message = string_field(field(pod, "status"), "message");
    std::string node = string_field(field(pod, "spec"), "nodeName");
    by_node[node].push_back(
        {pod_ref(pod),
         message,
         {fmt::format("pod {} status (reason UnexpectedAdmissionError)", pod_ref(pod)), message, ""}});
  }
  for (const auto& event : snapshot.list(Source::events)) {
    if (!is_admission_refusal(event)) continue;
    const json& involved = field(event, "involvedObject");
    std::string pod = string_field(involved, "namespace") + "/" + string_field(involved, "name");
    std::string message = string_field(event, "message");
    by_node[event_host(event)].push_back({pod, message, event_evidence(event)});
  }
  return allocation_findings(by_node);
}

std::vector<Finding> check_oom_killed(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& pod : snapshot.list(Source::pods)) {
    if (!is_gpu_pod(pod)) continue;
    for (const auto& status : kube::array_field(field(pod, "status"), "containerStatuses")) {
      const json* terminated = &field_at(status, {"state", "terminated"});
      if (string_field(*terminated, "reason") != "OOMKilled")
        terminated = &field_at(status, {"lastState", "terminated"});
      if (string_field(*terminated, "reason") != "OOMKilled") continue;
      std::string container = string_field(status, "name");
      std::string limit = memory_limit(pod, container);
      std::string finished = string_field(*terminated, "finishedAt");
      std::string when = ago(snapshot, finished);
      Finding f = object_finding(
          "oom-killed", Severity::warning, "Pod", pod,
          fmt::format("{} container {} was OOMKilled{}{} (host memory, not GPU memory){}", pod_ref(pod), container,
                      limit.empty() ? " with no memory limit: the node ran out" : " at its memory limit " + limit,
                      when.empty() ? "" : " " + when, [&] {
                        auto restarts = kube::integer_field(status, "restartCount").value_or(0);
                        return restarts > 0 ? fmt::format("; restarted {} time(s)", restarts) : std::string();
                      }()));
      f.evidence.push_back(
          {fmt::format("pod {} container {} terminated", pod_ref(pod), container),
           fmt::format("reason=OOMKilled exitCode={}", kube::integer_field(*terminated, "exitCode").value_or(137)),
           finished});
      f.remedy = {fmt::format("kubectl describe pod -n {} {}", kube::namespace_of(pod), kube::name_of(pod)),
                  "raise the container's resources.limits.memory (and requests) to what the job needs"};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_restart_storm(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& pod : snapshot.list(Source::pods)) {
    if (!is_gpu_pod(pod) || kube::pod_is_terminal(pod)) continue;
    for (const auto& status : kube::array_field(field(pod, "status"), "containerStatuses")) {
      std::int64_t restarts = kube::integer_field(status, "restartCount").value_or(0);
      const json& waiting = field_at(status, {"state", "waiting"});
      const json& last = field_at(status, {"lastState", "terminated"});
      bool crash_looping = string_field(waiting, "reason") == "CrashLoopBackOff";
      bool recent = within_window(snapshot, string_field(last, "finishedAt"));
      if (restarts < snapshot.settings.restart_threshold || !(crash_looping || recent)) continue;
      std::string container = string_field(status, "name");
      std::string last_exit;
      if (last.is_object()) {
        last_exit = fmt::format("; last exit {} ({}){}", kube::integer_field(last, "exitCode").value_or(0),
                                string_field(last, "reason"), [&] {
                                  std::string when = ago(snapshot, string_field(last, "finishedAt"));
                                  return when.empty() ? std::string() : " " + when;
                                }());
      }
      Finding f = object_finding("restart-storm", Severity::warning, "Pod", pod,
                                 fmt::format("{} container {} restarted {} times{}{}", pod_ref(pod), container,
                                             restarts, crash_looping ? ", now in CrashLoopBackOff" : "", last_exit));
      f.evidence.push_back(
          {fmt::format("pod {} container {} status", pod_ref(pod), container),
           fmt::format("restartCount={}{}", restarts,
                       crash_looping ? " waiting=CrashLoopBackOff: " + string_field(waiting, "message") : ""),
           string_field(last, "finishedAt")});
      if (auto why = classify_gpu_failure(string_field(last, "message"))) {
        f.summary += fmt::format(": {}", why->cause);
        f.evidence.push_back({"last termination message", string_field(last, "message"), ""});
      }
      f.remedy = {
          fmt::format("kubectl logs -n {} {} -c {} --previous", kube::namespace_of(pod), kube::name_of(pod), container),
          fmt::format("kubectl describe pod -n {} {}", kube::namespace_of(pod), kube::name_of(pod))};
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
