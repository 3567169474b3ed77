// A Job's status in plain words (summarize_job), read from the cluster (fetch_job_summary) and
// waited for (wait_for_job).
#include "gpuctl/ops/jobs/job_status.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/cancel.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

std::string str(const json& object, const json::json_pointer& ptr) {
  if (!object.contains(ptr)) return {};
  const json& v = object.at(ptr);
  return v.is_string() ? v.get<std::string>() : std::string();
}

int integer(const json& object, const json::json_pointer& ptr, int fallback = 0) {
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

// The condition of this type whose status is True, or nullptr.
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

std::int64_t seconds_between(util::TimePoint from, util::TimePoint to) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(to - from).count();
  return s > 0 ? s : 0;
}

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

bool pod_terminating(const json& pod) { return pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp"); }

std::string pod_phase(const json& pod) { return str(pod, "/status/phase"_json_pointer); }

struct Termination {
  int exit_code = 0;
  std::string container, reason;
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
    if (t == util::TimePoint{}) t = util::parse_rfc3339(str(pod, "/metadata/creationTimestamp"_json_pointer)).value_or(t);
    bool better = !best || (best_disrupted && !disrupted) || (best_disrupted == disrupted && t > best_time);
    if (!better) continue;
    JobFailure f;
    f.exit_code = term->exit_code;
    f.pod = kube::name_of(pod);
    f.container = term->container;
    f.termination_reason = term->reason;
    best = f;
    best_time = t;
    best_disrupted = disrupted;
  }
  return best;
}

std::string scheduling_words(std::string_view message) {
  if (auto verdict = parse_scheduling_message(message)) return explain_scheduling(*verdict);
  return std::string(message);
}

// Why the pods are not running yet, from the pods themselves; "" when nothing is known.
std::string pod_pending_reason(const std::vector<const json*>& pending, const std::vector<json>& pod_events) {
  for (const json* pod : pending) {
    const json* scheduled = condition(*pod, "PodScheduled");
    if (scheduled == nullptr || kube::string_field(*scheduled, "status") != "False") continue;
    std::string message = kube::string_field(*scheduled, "message");
    std::string reason = kube::string_field(*scheduled, "reason");
    if (reason == "SchedulingGated") {
      return message.empty() ? "scheduling gates hold its pods (spec.schedulingGates)" : "scheduling gates hold its pods: " + message;
    }
    if (!message.empty()) return "not scheduled: " + scheduling_words(message);
  }
  // The scheduler's events, when the condition carries no message.
  const json* latest = nullptr;
  for (const auto& e : pod_events) {
    if (kube::string_field(e, "reason") != "FailedScheduling") continue;
    if (latest == nullptr || event_time(e) > event_time(*latest)) latest = &e;
  }
  if (latest != nullptr) return "not scheduled: " + scheduling_words(event_message(*latest));
  for (const json* pod : pending) {
    std::string node = str(*pod, "/spec/nodeName"_json_pointer);
    for (const auto& cs : array_at(*pod, "/status/containerStatuses"_json_pointer)) {
      if (!cs.contains("state") || !cs["state"].contains("waiting")) continue;
      const json& w = cs["state"]["waiting"];
      std::string why = kube::string_field(w, "reason");
      std::string message = kube::string_field(w, "message");
      if (why.empty() || why == "ContainerCreating" || why == "PodInitializing") continue;
      return fmt::format("container {} of pod {} is waiting: {}{}", kube::string_field(cs, "name"), kube::name_of(*pod), why,
                         message.empty() ? "" : " (" + message + ")");
    }
    if (!node.empty()) return fmt::format("pod {} is starting on node {}", kube::name_of(*pod), node);
  }
  if (!pending.empty()) return "waiting for the scheduler";
  return {};
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
    if (resource.starts_with(kNvidiaResourcePrefix) && !quantity.is_zero()) return true;
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
                         util::TimePoint now) {
  JobSummary s;
  s.namespace_name = kube::namespace_of(job);
  s.name = kube::name_of(job);
  s.gpu_job = job_requests_gpu(job);
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
  s.active = integer(job, "/status/active"_json_pointer);
  s.succeeded = integer(job, "/status/succeeded"_json_pointer);
  s.failed = integer(job, "/status/failed"_json_pointer);

  std::set<std::string> nodes;
  for (const auto& pod : pods) {
    std::string node = str(pod, "/spec/nodeName"_json_pointer);
    if (!node.empty()) nodes.insert(node);
  }
  s.nodes.assign(nodes.begin(), nodes.end());

  s.created_at = str(job, "/metadata/creationTimestamp"_json_pointer);
  s.started_at = str(job, "/status/startTime"_json_pointer);
  const json* complete = true_condition(job, "Complete");
  const json* failed = true_condition(job, "Failed");
  const json* failure_target = true_condition(job, "FailureTarget");
  const json* finished_condition = complete != nullptr ? complete : failed;
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

  bool any_running = false;
  std::vector<const json*> pending;
  util::TimePoint newest_pod{};
  std::set<std::string> pod_names;
  for (const auto& pod : pods) {
    pod_names.insert(kube::name_of(pod));
    newest_pod = std::max(newest_pod, util::parse_rfc3339(str(pod, "/metadata/creationTimestamp"_json_pointer)).value_or(util::TimePoint{}));
    if (pod_terminating(pod)) continue;
    std::string phase = pod_phase(pod);
    if (phase == "Running") any_running = true;
    if (phase == "Pending" || phase.empty()) pending.push_back(&pod);
  }
  std::sort(pending.begin(), pending.end(), [](const json* a, const json* b) { return kube::name_of(*a) < kube::name_of(*b); });

  std::string uid = str(job, "/metadata/uid"_json_pointer);
  std::vector<json> job_events, pod_events;
  for (const auto& e : events) {
    const json& subject = event_subject(e);
    std::string kind = kube::string_field(subject, "kind");
    std::string name = kube::string_field(subject, "name");
    std::string subject_uid = kube::string_field(subject, "uid");
    std::string ns = kube::string_field(subject, "namespace");
    if (!ns.empty() && !s.namespace_name.empty() && ns != s.namespace_name) continue;
    if (kind == "Job" && name == s.name && (uid.empty() || subject_uid.empty() || subject_uid == uid)) job_events.push_back(e);
    if (kind == "Pod" && pod_names.contains(name)) pod_events.push_back(e);
  }

  if (failed != nullptr || failure_target != nullptr) {
    s.phase = JobPhase::failed;
    const json* c = failed != nullptr ? failed : failure_target;
    JobFailure f = failed_container(pods).value_or(JobFailure{});
    f.reason = kube::string_field(*c, "reason");
    f.message = kube::string_field(*c, "message");
    std::string head = f.message.empty() ? f.reason : f.message;
    if (f.exit_code) {
      s.reason = fmt::format("{}{}container {} of pod {} exited with code {}{}", head, head.empty() ? "" : ": ", f.container,
                             f.pod, *f.exit_code, f.termination_reason.empty() ? "" : " (" + f.termination_reason + ")");
    } else {
      s.reason = head.empty() ? "failed" : head;
    }
    s.failure = std::move(f);
    return s;
  }
  if (complete != nullptr || true_condition(job, "SuccessCriteriaMet") != nullptr) {
    s.phase = JobPhase::succeeded;
    return s;
  }
  if (job.contains("/spec/suspend"_json_pointer) && job.at("/spec/suspend"_json_pointer).is_boolean() &&
      job.at("/spec/suspend"_json_pointer).get<bool>()) {
    s.phase = JobPhase::suspended;
    s.reason = "suspended (spec.suspend is true): no pods run until it is resumed, by you or by a queue such as Kueue";
    return s;
  }
  if (any_running || (pods.empty() && integer(job, "/status/ready"_json_pointer) > 0)) {
    s.phase = JobPhase::running;
    return s;
  }
  s.phase = JobPhase::pending;
  s.reason = pod_pending_reason(pending, pod_events);
  if (s.reason.empty() || pending.empty()) {
    // Pods the Job controller could not create: quota or LimitRange refusals, PodSecurity, ...
    const json* latest = nullptr;
    for (const auto& e : job_events) {
      if (kube::string_field(e, "reason") != "FailedCreate") continue;
      if (latest == nullptr || event_time(e) > event_time(*latest)) latest = &e;
    }
    if (latest != nullptr && (pods.empty() || event_time(*latest) >= newest_pod)) {
      std::string message = event_message(*latest);
      if (auto denial = parse_admission_denial(message)) {
        s.reason = "pods refused at creation: " + describe(*denial);
      } else {
        s.reason = "pods cannot be created: " + message;
      }
    }
  }
  if (s.reason.empty() && s.succeeded > 0) {
    s.reason = fmt::format("{} {} succeeded, waiting for the next", s.succeeded, s.succeeded == 1 ? "pod" : "pods");
  }
  if (s.reason.empty()) {
    s.reason = s.started_at.empty() ? "the Job controller has not started it yet" : "no pods created yet";
  }
  return s;
}

Result<JobSummary> fetch_job_summary(kube::Client& client, std::string_view ns, std::string_view name, util::TimePoint now) {
  auto job = client.get(kube::paths::job(ns, name));
  if (!job) {
    Error e = job.error();
    if (e.is_not_found()) e.message = fmt::format("job \"{}\" not found in namespace \"{}\"", name, ns);
    return fail(std::move(e));
  }
  kube::ListOptions pod_list;
  pod_list.label_selector = job_pod_selector(*job);
  GPUCTL_TRY_ASSIGN(kube::ListResult pods, client.list(kube::paths::pods(ns), pod_list));
  kube::ListOptions event_list;
  event_list.field_selector = fmt::format("involvedObject.kind=Job,involvedObject.name={}", name);
  GPUCTL_TRY_ASSIGN(kube::ListResult events, client.list(kube::paths::events(ns), event_list));
  // The scheduler's events only for pods whose PodScheduled condition says nothing (a few at most).
  int asked = 0;
  for (const auto& pod : pods.items) {
    if (asked >= 3 || pod_phase(pod) != "Pending" || !str(pod, "/spec/nodeName"_json_pointer).empty()) continue;
    const json* scheduled = condition(pod, "PodScheduled");
    if (scheduled != nullptr && !kube::string_field(*scheduled, "message").empty()) continue;
    kube::ListOptions pod_events;
    pod_events.field_selector = fmt::format("involvedObject.kind=Pod,involvedObject.name={}", kube::name_of(pod));
    GPUCTL_TRY_ASSIGN(kube::ListResult more, client.list(kube::paths::events(ns), pod_events));
    for (auto& e : more.items) events.items.push_back(std::move(e));
    ++asked;
  }
  return summarize_job(*job, pods.items, events.items, now);
}

Result<JobSummary> wait_for_job(kube::Client& client, std::string_view ns, std::string_view name, const JobWaitOptions& options) {
  auto clock = options.clock ? options.clock : [] { return std::chrono::system_clock::now(); };
  auto sleep = options.sleep ? options.sleep : [](std::chrono::milliseconds d) { util::sleep_unless_cancelled(d); };
  // Ctrl-C or SIGTERM (util/cancel.hpp) stops the wait; the job is the cluster's and keeps running.
  auto stopped = [&](const std::optional<JobSummary>& seen) {
    return fail(Errc::cancelled, fmt::format("stopped waiting for job {}/{} ({}{}): it keeps running; see 'gpuctl jobs -n {}'", ns,
                                             name, seen ? "still " + std::string(to_string(seen->phase)) : "not read yet",
                                             util::cancelled() ? ", interrupted by " + util::cancel_signal_name() : "", ns));
  };
  const auto start = clock();
  std::optional<JobSummary> last;
  for (;;) {
    auto summary = fetch_job_summary(client, ns, name, clock());
    if (!summary && util::cancelled()) return stopped(last);
    if (!summary) {
      Error e = summary.error();
      if (e.is_not_found() && last) {
        e.message = fmt::format("job {}/{} was deleted while waiting for it to finish (last seen {})", ns, name,
                                to_string(last->phase));
      }
      return fail(std::move(e));
    }
    if (!last || last->phase != summary->phase || last->reason != summary->reason) {
      if (options.on_change) options.on_change(*summary);
    }
    if (options.on_poll) options.on_poll(*summary);
    if (summary->finished) return std::move(*summary);
    last = std::move(*summary);

    if ((options.cancelled && options.cancelled()) || util::cancelled()) return stopped(last);
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock() - start);
    auto pause = options.poll_interval;
    if (options.timeout.count() > 0) {
      if (elapsed >= options.timeout) {
        return fail(Errc::timeout, fmt::format("job {}/{} is still {} after {}{}: it keeps running; see 'gpuctl jobs -n {}'",
                                               ns, name, to_string(last->phase),
                                               util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(options.timeout)),
                                               last->reason.empty() ? "" : " (" + last->reason + ")", ns));
      }
      pause = std::min(pause, options.timeout - elapsed);
    }
    sleep(pause);
  }
}

json to_json(const JobSummary& s) {
  auto or_null = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  json failure = nullptr;
  if (s.failure) {
    failure = {{"reason", or_null(s.failure->reason)},
               {"message", or_null(s.failure->message)},
               {"exitCode", s.failure->exit_code ? json(*s.failure->exit_code) : json(nullptr)},
               {"pod", or_null(s.failure->pod)},
               {"container", or_null(s.failure->container)},
               {"terminationReason", or_null(s.failure->termination_reason)}};
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
      {"pods", {{"active", s.active}, {"succeeded", s.succeeded}, {"failed", s.failed}}},
      {"createdAt", or_null(s.created_at)},
      {"startedAt", or_null(s.started_at)},
      {"finishedAt", or_null(s.finished_at)},
      {"ageSeconds", s.age_seconds},
      {"durationSeconds", s.duration_seconds ? json(*s.duration_seconds) : json(nullptr)},
      {"reason", or_null(s.reason)},
      {"failure", failure},
  };
}

}  // namespace gpuctl::ops
