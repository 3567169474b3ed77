// Why a Job's pods are not running yet, in the order a user needs it: what the pods themselves
// say (scheduling gates, the scheduler's verdict, a container stuck waiting), then the Job
// controller's refusals to create them (quota, LimitRange, PodSecurity), then what little is left.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops::job_status_detail {

using json = nlohmann::json;
namespace {

// When an event last happened: series.lastObservedTime, then lastTimestamp, then eventTime.
util::TimePoint event_time(const json& e) {
  for (auto ptr : {"/series/lastObservedTime"_json_pointer, "/lastTimestamp"_json_pointer, "/eventTime"_json_pointer,
                   "/metadata/creationTimestamp"_json_pointer}) {
    if (auto t = util::parse_rfc3339(str(e, ptr))) return *t;
  }
  return {};
}

std::string event_message(const json& e) {
  std::string m = str(e, "/message"_json_pointer);
  return m.empty() ? str(e, "/note"_json_pointer) : m;
}

// The object an event is about: core/v1 involvedObject or events.k8s.io/v1 regarding.
const json& event_subject(const json& e) {
  static const json empty = json::object();
  if (e.contains("involvedObject") && e["involvedObject"].is_object()) return e["involvedObject"];
  if (e.contains("regarding") && e["regarding"].is_object()) return e["regarding"];
  return empty;
}

// The latest event with this reason, or nullptr; the first of equally recent ones.
const json* latest_event(const std::vector<json>& events, std::string_view reason) {
  const json* latest = nullptr;
  for (const auto& e : events) {
    if (kube::string_field(e, "reason") != reason) continue;
    if (latest == nullptr || event_time(e) > event_time(*latest)) latest = &e;
  }
  return latest;
}

// The events about this Job and about its pods. A namespace's events may be passed whole, so
// events about other objects (or another Job of the same name, by uid) are dropped.
struct JobEvents {
  std::vector<json> job, pods;
};

JobEvents events_about(const json& job, const std::vector<json>& pods, const std::vector<json>& events,
                       const JobSummary& summary) {
  std::set<std::string> pod_names;
  for (const auto& pod : pods) pod_names.insert(kube::name_of(pod));
  std::string uid = str(job, "/metadata/uid"_json_pointer);
  JobEvents out;
  for (const auto& e : events) {
    const json& subject = event_subject(e);
    std::string kind = kube::string_field(subject, "kind");
    std::string name = kube::string_field(subject, "name");
    std::string subject_uid = kube::string_field(subject, "uid");
    std::string ns = kube::string_field(subject, "namespace");
    if (!ns.empty() && !summary.namespace_name.empty() && ns != summary.namespace_name) continue;
    if (kind == "Job" && name == summary.name && (uid.empty() || subject_uid.empty() || subject_uid == uid)) {
      out.job.push_back(e);
    }
    if (kind == "Pod" && pod_names.contains(name)) out.pods.push_back(e);
  }
  return out;
}

// The pods that wait to run (Pending, or no phase yet), terminating ones left out, by name so
// that the reason given does not change from one poll to the next.
std::vector<const json*> pending_pods(const std::vector<json>& pods) {
  std::vector<const json*> pending;
  for (const auto& pod : pods) {
    if (pod_terminating(pod)) continue;
    std::string phase = pod_phase(pod);
    if (phase == "Pending" || phase.empty()) pending.push_back(&pod);
  }
  std::sort(pending.begin(), pending.end(),
            [](const json* a, const json* b) { return kube::name_of(*a) < kube::name_of(*b); });
  return pending;
}

// The scheduler's verdict in plain words, with what `detail` names beside the entries it explains.
std::string scheduling_words(std::string_view message, const PendingDetail& detail) {
  if (auto verdict = parse_scheduling_message(message)) return explain_scheduling(*verdict, detail);
  std::string text(message);
  for (VerdictTopic topic :
       {VerdictTopic::taint, VerdictTopic::selector, VerdictTopic::resource_claim, VerdictTopic::volume_claim}) {
    if (std::string words = detail_words(detail, topic); !words.empty()) text += "; " + words;
  }
  return text;
}

// Why the scheduler leaves the pods unplaced, in words, with what stands in the way of the pod it
// judged; "" when no pod carries its verdict.
struct Unscheduled {
  std::string reason;
  std::optional<PendingDetail> detail;
};

Unscheduled not_scheduled(const json& pod, std::string message, const std::vector<json>* nodes) {
  PendingDetail detail = pending_detail(pod, std::move(message), nodes);
  std::string words = "not scheduled: " + scheduling_words(detail.scheduler_message, detail);
  return {std::move(words), std::move(detail)};
}

// What a pending pod's PodScheduled=False condition says: scheduling gates, or the scheduler's
// verdict; nothing when no pod's condition carries either.
Unscheduled unscheduled_reason(const std::vector<const json*>& pending, const std::vector<json>* nodes) {
  for (const json* pod : pending) {
    const json* scheduled = condition(*pod, "PodScheduled");
    if (scheduled == nullptr || kube::string_field(*scheduled, "status") != "False") continue;
    std::string message = kube::string_field(*scheduled, "message");
    std::string reason = kube::string_field(*scheduled, "reason");
    if (reason == "SchedulingGated") {
      return {message.empty() ? "scheduling gates hold its pods (spec.schedulingGates)"
                              : "scheduling gates hold its pods: " + message,
              std::nullopt};
    }
    if (!message.empty()) return not_scheduled(*pod, std::move(message), nodes);
  }
  return {};
}

// A pod that has a node but does not run yet: a container waiting for something other than its
// own start (ImagePullBackOff, CreateContainerConfigError, ...), or simply starting; "" when no
// pending pod has a node.
std::string starting_reason(const std::vector<const json*>& pending) {
  for (const json* pod : pending) {
    std::string node = str(*pod, "/spec/nodeName"_json_pointer);
    for (const auto& cs : array_at(*pod, "/status/containerStatuses"_json_pointer)) {
      if (!cs.contains("state") || !cs["state"].contains("waiting")) continue;
      const json& w = cs["state"]["waiting"];
      std::string why = kube::string_field(w, "reason");
      std::string message = kube::string_field(w, "message");
      if (why.empty() || why == "ContainerCreating" || why == "PodInitializing") continue;
      return fmt::format("container {} of pod {} is waiting: {}{}", kube::string_field(cs, "name"), kube::name_of(*pod),
                         why, message.empty() ? "" : " (" + message + ")");
    }
    if (!node.empty()) return fmt::format("pod {} is starting on node {}", kube::name_of(*pod), node);
  }
  return {};
}

// Why the pods are not running yet, from the pods themselves; "" when nothing is known.
Unscheduled pod_pending_reason(const std::vector<const json*>& pending, const std::vector<json>& pod_events,
                               const std::vector<json>* nodes) {
  if (Unscheduled why = unscheduled_reason(pending, nodes); !why.reason.empty()) return why;
  // The scheduler's events, when the condition carries no message: about the pod they name.
  if (const json* latest = latest_event(pod_events, "FailedScheduling")) {
    std::string name = kube::string_field(event_subject(*latest), "name");
    auto pod = std::find_if(pending.begin(), pending.end(), [&](const json* p) { return kube::name_of(*p) == name; });
    if (pod != pending.end()) return not_scheduled(**pod, event_message(*latest), nodes);
    return {"not scheduled: " + scheduling_words(event_message(*latest), PendingDetail{}), std::nullopt};
  }
  if (std::string why = starting_reason(pending); !why.empty()) return {why, std::nullopt};
  if (!pending.empty()) return {"waiting for the scheduler", std::nullopt};
  return {};
}

util::TimePoint newest_creation(const std::vector<json>& pods) {
  util::TimePoint newest{};
  for (const auto& pod : pods) {
    newest = std::max(
        newest, util::parse_rfc3339(str(pod, "/metadata/creationTimestamp"_json_pointer)).value_or(util::TimePoint{}));
  }
  return newest;
}

// Pods the Job controller could not create: quota or LimitRange refusals, PodSecurity, ... An
// old refusal that pods created since have outlived is no longer news; "" when there is none.
std::string creation_refusal(const std::vector<json>& job_events, const std::vector<json>& pods) {
  const json* latest = latest_event(job_events, "FailedCreate");
  if (latest == nullptr || (!pods.empty() && event_time(*latest) < newest_creation(pods))) return {};
  std::string message = event_message(*latest);
  if (auto denial = parse_admission_denial(message)) return "pods refused at creation: " + describe(*denial);
  return "pods cannot be created: " + message;
}

}  // namespace

PendingVerdict pending_reason(const json& job, const std::vector<json>& pods, const std::vector<json>& events,
                              const JobSummary& summary, const std::vector<json>* nodes) {
  const std::vector<const json*> pending = pending_pods(pods);
  const JobEvents about = events_about(job, pods, events, summary);
  Unscheduled why = pod_pending_reason(pending, about.pods, nodes);
  PendingVerdict verdict{std::move(why.reason), std::move(why.detail)};
  std::string& reason = verdict.reason;
  if (reason.empty() || pending.empty()) {
    if (std::string refusal = creation_refusal(about.job, pods); !refusal.empty()) reason = std::move(refusal);
  }
  if (reason.empty() && summary.succeeded > 0) {
    reason = fmt::format("{} {} succeeded, waiting for the next", summary.succeeded,
                         summary.succeeded == 1 ? "pod" : "pods");
  }
  if (reason.empty()) {
    reason = summary.started_at.empty() ? "the Job controller has not started it yet" : "no pods created yet";
  }
  return verdict;
}

}  // namespace gpuctl::ops::job_status_detail
