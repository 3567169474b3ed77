// gpuctl jobs (the list) and gpuctl jobs clean (finished jobs removed with their pods).
#include "gpuctl/ops/jobs/jobs.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "job_failure_cause_internal.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using Key = std::pair<std::string, std::string>;  // namespace, name

std::string str(const json& object, const json::json_pointer& ptr) {
  if (!object.contains(ptr)) return {};
  const json& v = object.at(ptr);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// The uid of the Job that owns this pod: its controller ownerReference, else the labels the Job
// controller sets. "" when neither says.
std::string owner_job_uid(const json& pod) {
  for (const auto& ref : kube::array_field(kube::field(pod, "metadata"), "ownerReferences")) {
    if (kube::string_field(ref, "kind") == "Job" && kube::bool_field(ref, "controller"))
      return kube::string_field(ref, "uid");
  }
  for (auto key : {"batch.kubernetes.io/controller-uid", "controller-uid"}) {
    if (auto uid = kube::label_of(pod, key)) return *uid;
  }
  return {};
}

std::string job_name_label(const json& pod) {
  for (auto key : {"batch.kubernetes.io/job-name", "job-name"}) {
    if (auto name = kube::label_of(pod, key)) return *name;
  }
  return {};
}

bool by_namespace_and_name(const JobSummary& a, const JobSummary& b) {
  return std::tie(a.namespace_name, a.name) < std::tie(b.namespace_name, b.name);
}

// The subject of an event (core/v1 involvedObject, events.k8s.io regarding) as namespace/name.
Key event_key(const json& e, const std::string& fallback_ns) {
  const json* subject = &kube::field(e, "involvedObject");
  if (!subject->is_object()) subject = &kube::field(e, "regarding");
  if (!subject->is_object()) return {};
  std::string ns = kube::string_field(*subject, "namespace");
  return {ns.empty() ? fallback_ns : ns, kube::string_field(*subject, "name")};
}

const json* true_condition(const json& job, std::string_view type) {
  for (const auto& c : kube::array_field(kube::field(job, "status"), "conditions")) {
    if (kube::string_field(c, "type") == type && kube::string_field(c, "status") == "True") return &c;
  }
  return nullptr;
}

}  // namespace

JobList build_job_list(const std::vector<json>& jobs, const std::vector<json>& pods, const std::vector<json>& events,
                       bool include_non_gpu_jobs, util::TimePoint now, const std::vector<json>* nodes) {
  std::map<std::string, std::vector<json>> pods_by_uid;
  std::map<Key, std::vector<json>> pods_by_label;
  for (const auto& pod : pods) {
    std::string uid = owner_job_uid(pod);
    if (!uid.empty()) {
      pods_by_uid[uid].push_back(pod);
    } else if (auto name = job_name_label(pod); !name.empty()) {
      pods_by_label[{kube::namespace_of(pod), name}].push_back(pod);
    }
  }
  std::map<Key, std::vector<json>> events_by_subject;
  for (const auto& e : events) events_by_subject[event_key(e, kube::namespace_of(e))].push_back(e);

  static const std::vector<json> none;
  JobList list;
  for (const auto& job : jobs) {
    if (!include_non_gpu_jobs && !job_requests_gpu(job)) continue;
    Key key{kube::namespace_of(job), kube::name_of(job)};
    std::string uid = str(job, "/metadata/uid"_json_pointer);
    const std::vector<json>* own = &none;
    if (auto it = pods_by_uid.find(uid); !uid.empty() && it != pods_by_uid.end()) {
      own = &it->second;
    } else if (auto lit = pods_by_label.find(key); lit != pods_by_label.end()) {
      own = &lit->second;
    }
    // The job's events and its pods' events.
    std::vector<json> about;
    if (auto it = events_by_subject.find(key); it != events_by_subject.end()) about = it->second;
    for (const auto& pod : *own) {
      if (auto it = events_by_subject.find({key.first, kube::name_of(pod)}); it != events_by_subject.end()) {
        about.insert(about.end(), it->second.begin(), it->second.end());
      }
    }
    list.jobs.push_back(summarize_job(job, *own, about, now, nodes));
  }
  std::sort(list.jobs.begin(), list.jobs.end(), by_namespace_and_name);
  return list;
}

namespace {

Result<std::vector<json>> list_job_objects(kube::Client& client, const JobListOptions& options) {
  std::string ns = options.all_namespaces ? std::string() : options.namespace_name;
  kube::ListOptions list;
  list.label_selector = options.label_selector;
  // One name is one object: the server filters (metadata.name is a field every kind can select on).
  if (options.names.size() == 1) list.field_selector = "metadata.name=" + options.names.front();
  // Each list decodes only its kind's shape table: every field the job summaries read.
  list.fields = kube::Projection(kube::job_shapes());
  GPUCTL_TRY_ASSIGN(kube::ListResult jobs, client.list(kube::paths::jobs(ns), list));
  return std::move(jobs.items);
}

// The pods of `jobs` only, kept page by page as build_job_list will match them (by the owning
// Job's uid, else by the job-name label): the cluster's other pods are never held. Malformed
// pods are named in `skipped`, as before.
Result<std::vector<json>> list_pods_of(kube::Client& client, const std::string& ns, const std::vector<json>& jobs,
                                       std::vector<std::string>& skipped) {
  std::set<std::string> uids;
  std::set<Key> names;
  for (const auto& job : jobs) {
    uids.insert(str(job, "/metadata/uid"_json_pointer));
    names.insert({kube::namespace_of(job), kube::name_of(job)});
  }
  uids.erase("");
  std::vector<json> kept;
  std::vector<std::string> malformed;
  kube::ListPageSink sink;
  sink.on_items = [&](std::vector<json>& page) -> Result<void> {
    for (auto& pod : kube::keep_well_formed(std::move(page), "pod", kube::pod_shape_problem, malformed)) {
      std::string uid = owner_job_uid(pod);
      if (uid.empty() ? names.contains({kube::namespace_of(pod), job_name_label(pod)}) : uids.contains(uid)) {
        kept.push_back(std::move(pod));
      }
    }
    return {};
  };
  sink.on_restart = [&] {
    kept.clear();
    malformed.clear();
  };
  kube::ListOptions pod_list;
  // With what says why one waits: its node affinity and its claims (job_status_blockers.cpp).
  pod_list.fields = kube::Projection(
      kube::pod_shapes(),
      {"spec.affinity", "spec.resourceClaims", "status.resourceClaimStatuses", "status.extendedResourceClaimStatus"});
  GPUCTL_TRY(client.list_pages(kube::paths::pods(ns), pod_list, sink));
  skipped.insert(skipped.end(), malformed.begin(), malformed.end());
  return kept;
}

}  // namespace

Result<JobList> collect_jobs(kube::Client& client, const JobListOptions& options, util::TimePoint now) {
  GPUCTL_TRY_ASSIGN(std::vector<json> jobs, list_job_objects(client, options));
  std::vector<std::string> skipped;
  jobs = kube::keep_well_formed(std::move(jobs), "job", kube::job_shape_problem, skipped);
  std::vector<std::string> not_found;
  const bool named = !options.names.empty();
  if (named) {
    const std::set<std::string> wanted(options.names.begin(), options.names.end());
    std::erase_if(jobs, [&](const json& j) { return !wanted.contains(kube::name_of(j)); });
    std::set<std::string> found;
    for (const auto& j : jobs) found.insert(kube::name_of(j));
    for (const auto& name : wanted) {
      if (!found.contains(name)) not_found.push_back(name);
    }
  } else if (!options.include_non_gpu_jobs) {
    std::erase_if(jobs, [](const json& j) { return !job_requests_gpu(j); });
  }
  if (jobs.empty()) {
    JobList none;
    none.skipped = std::move(skipped);
    none.not_found = std::move(not_found);
    return none;
  }
  std::string ns = options.all_namespaces ? std::string() : options.namespace_name;
  // The jobs' pods, whatever their phase (failed pods carry the exit code), and the Job
  // controller's FailedCreate events (quota refusals). Why pods pend is in their own
  // PodScheduled condition, so pod events are not needed.
  GPUCTL_TRY_ASSIGN(std::vector<json> pods, list_pods_of(client, ns, jobs, skipped));
  kube::ListOptions event_list;
  event_list.field_selector = "involvedObject.kind=Job,reason=FailedCreate";
  event_list.fields = kube::Projection(kube::event_shapes());
  GPUCTL_TRY_ASSIGN(kube::ListResult events, client.list(kube::paths::events(ns), event_list));
  events.items = kube::keep_well_formed(std::move(events.items), "event", kube::event_shape_problem, skipped);
  // The nodes once for every job, and only when a pod waits unscheduled: they name what stands in its way.
  std::optional<std::vector<json>> nodes;
  if (pods_unschedulable(pods)) nodes = job_status_detail::read_nodes_for_detail(client);
  JobList list = build_job_list(jobs, pods, events.items, true, now, nodes ? &*nodes : nullptr);
  // What the failed GPU jobs' latest failed pods printed last, when their termination messages
  // name no GPU cause: one log read per such job, the newest failures first, bounded. Jobs asked
  // for by name are few: each gets its newest attempts read too, as fetch_job_summary does.
  std::vector<JobSummary*> summaries;
  for (auto& j : list.jobs) summaries.push_back(&j);
  job_cause_detail::LogCauseBudget budget;
  budget.jobs = job_cause_detail::kListedJobLogReadsMax;
  if (named) budget.attempts = job_cause_detail::kAttemptLogReadsMax;
  budget.parallel = job_cause_detail::kListedJobLogReadsParallel;
  GPUCTL_TRY(job_cause_detail::add_log_causes(client, summaries, budget));
  list.skipped = std::move(skipped);
  list.not_found = std::move(not_found);
  return list;
}

json to_json(const JobList& list) {
  json items = json::array();
  for (const auto& j : list.jobs) items.push_back(to_json(j));
  return schema_document("GPUJobList", {{"items", items}});
}

CleanVerdict clean_verdict(const json& job, std::chrono::milliseconds older_than, util::TimePoint now) {
  const json* complete = true_condition(job, "Complete");
  const json* failed = true_condition(job, "Failed");
  const json* done = complete != nullptr ? complete : failed;
  if (done == nullptr) {
    std::string phase = std::string(to_string(summarize_job(job, {}, {}, now).phase));
    return {false, phase, fmt::format("not finished ({})", phase)};
  }
  std::string phase = complete != nullptr ? "Succeeded" : "Failed";
  std::string at = str(job, "/status/completionTime"_json_pointer);
  if (at.empty()) at = kube::string_field(*done, "lastTransitionTime");
  auto finished = util::parse_rfc3339(at);
  if (!finished) return {true, phase, fmt::format("{}, finish time unknown", phase)};
  auto ago = std::chrono::duration_cast<std::chrono::seconds>(now - *finished);
  if (ago.count() < 0) ago = std::chrono::seconds(0);
  std::string when = util::human_duration(ago);
  if (older_than.count() > 0 && ago < older_than) {
    return {false, phase,
            fmt::format("{} {} ago, not older than {}", phase, when,
                        util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(older_than)))};
  }
  return {true, phase, fmt::format("{} {} ago", phase, when)};
}

CleanPlan plan_job_clean(const std::vector<json>& jobs, std::chrono::milliseconds older_than, bool include_non_gpu_jobs,
                         util::TimePoint now) {
  CleanPlan plan;
  for (const auto& job : jobs) {
    if (!include_non_gpu_jobs && !job_requests_gpu(job)) continue;
    CleanVerdict v = clean_verdict(job, older_than, now);
    CleanTarget t;
    t.namespace_name = kube::namespace_of(job);
    t.name = kube::name_of(job);
    t.uid = str(job, "/metadata/uid"_json_pointer);
    t.phase = v.phase;
    t.reason = v.reason;
    (v.remove ? plan.remove : plan.keep).push_back(std::move(t));
  }
  auto order = [](const CleanTarget& a, const CleanTarget& b) {
    return std::tie(a.namespace_name, a.name) < std::tie(b.namespace_name, b.name);
  };
  std::sort(plan.remove.begin(), plan.remove.end(), order);
  std::sort(plan.keep.begin(), plan.keep.end(), order);
  return plan;
}

Result<CleanPlan> collect_clean_plan(kube::Client& client, const JobListOptions& scope,
                                     std::chrono::milliseconds older_than, util::TimePoint now) {
  GPUCTL_TRY_ASSIGN(std::vector<json> jobs, list_job_objects(client, scope));
  std::vector<std::string> skipped;
  jobs = kube::keep_well_formed(std::move(jobs), "job", kube::job_shape_problem, skipped);
  CleanPlan plan = plan_job_clean(jobs, older_than, scope.include_non_gpu_jobs, now);
  plan.skipped = std::move(skipped);
  return plan;
}

json job_delete_options(const CleanTarget& target, bool dry_run) {
  json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
  if (!target.uid.empty()) body["preconditions"] = {{"uid", target.uid}};
  if (dry_run) body["dryRun"] = json::array({"All"});
  return body;
}

CleanResult delete_jobs(kube::Client& client, const std::vector<CleanTarget>& targets,
                        const kube::WriteOptions& options, const std::function<void(const CleanOutcome&)>& on_done) {
  CleanResult result;
  for (const auto& t : targets) {
    CleanOutcome outcome;
    outcome.target = t;
    auto r = client.remove(kube::paths::job(t.namespace_name, t.name), job_delete_options(t, options.dry_run), options);
    if (r) {
      outcome.deleted = true;
      ++result.deleted;
    } else if (r.error().is_not_found() || r.error().is_conflict()) {
      // Gone already (its TTL, someone else), or a new Job took the name: not ours to delete.
      outcome.already_gone = true;
      ++result.gone;
    } else {
      outcome.error = fmt::format("job {}/{}: {}", t.namespace_name, t.name, r.error().message);
      ++result.failed;
    }
    if (on_done) on_done(outcome);
    result.outcomes.push_back(std::move(outcome));
  }
  return result;
}

}  // namespace gpuctl::ops
