#pragma once
// `gpuctl jobs` and `gpuctl jobs clean` in the library: the GPU jobs of one or every namespace with
// their status (three paginated lists: jobs, pods, FailedCreate events), and the removal of
// finished jobs together with their pods (propagationPolicy=Background).
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {

struct JobListOptions {
  std::string namespace_name;  // ignored with all_namespaces
  bool all_namespaces = false;
  std::string label_selector;         // on the Jobs
  bool include_non_gpu_jobs = false;  // --all
  // Only these jobs (in any namespace with all_namespaces), whatever they request, as kubectl get
  // NAME... lists what it is asked for; each one not found is named in JobList::not_found.
  std::vector<std::string> names;
};

struct JobList {
  std::vector<JobSummary> jobs;  // sorted by namespace, then name
  // Jobs, pods and events left out because a field had the wrong type ("job team-a/x skipped:
  // ..."): named on stderr, exit 1.
  std::vector<std::string> skipped;
  std::vector<std::string> not_found;  // of JobListOptions::names
};

// Pure: summaries of `jobs`, each with the pods it owns (ownerReferences uid, else the job-name
// label) and the events about it. Jobs whose template requests no nvidia.com/* resource are left
// out unless include_non_gpu_jobs. `nodes`, when given, name what stands in the way of each job
// whose pod the scheduler cannot place (JobSummary::pending).
JobList build_job_list(const std::vector<nlohmann::json>& jobs, const std::vector<nlohmann::json>& pods,
                       const std::vector<nlohmann::json>& events, bool include_non_gpu_jobs, util::TimePoint now,
                       const std::vector<nlohmann::json>* nodes = nullptr);

// Lists the Jobs, their namespaces' pods and the Jobs' FailedCreate events, and builds the list;
// the nodes too (once), when some pod waits unscheduled; then reads the log tail of each failed
// GPU job's latest failed pod whose termination message names no GPU cause (the 32 newest
// failures, 8 at a time; jobs named in options.names: their 5 newest failed attempts). A log that
// cannot be read leaves the cause unknown.
Result<JobList> collect_jobs(kube::Client& client, const JobListOptions& options, util::TimePoint now);

// gpuctl's stable output schema: apiVersion gpuctl.io/v1alpha1, kind GPUJobList, items as
// to_json(JobSummary).
nlohmann::json to_json(const JobList& list);

// --- jobs clean ---

// What clean does with one Job, and why (policy as data).
struct CleanVerdict {
  bool remove = false;
  std::string phase;   // the Job's phase: "Succeeded", "Failed", "Running", ...
  std::string reason;  // "Failed 2h ago", "not finished (Running)", "finished 5m ago, not older than 1h"
};

// Pure: a finished Job (Complete or Failed condition) is removed when its finish time
// (status.completionTime, else the condition's lastTransitionTime) is older than `older_than`;
// older_than 0 removes every finished Job. A finished Job with no finish time counts as old.
CleanVerdict clean_verdict(const nlohmann::json& job, std::chrono::milliseconds older_than, util::TimePoint now);

struct CleanTarget {
  std::string namespace_name, name, uid;
  std::string phase;   // "Succeeded" or "Failed"
  std::string reason;  // the verdict's reason
};

struct CleanPlan {
  std::vector<CleanTarget> remove;
  std::vector<CleanTarget> keep;     // phase: the job's phase; reason: why it stays
  std::vector<std::string> skipped;  // jobs gpuctl could not read: never deleted, named, exit 1
};

// Pure: which of `jobs` go, in namespace/name order. Jobs that request no nvidia.com/* resource
// are neither removed nor kept (left out) unless include_non_gpu_jobs.
CleanPlan plan_job_clean(const std::vector<nlohmann::json>& jobs, std::chrono::milliseconds older_than,
                         bool include_non_gpu_jobs, util::TimePoint now);

// Lists the Jobs in scope (namespace or all, label selector, GPU filter as in `gpuctl jobs`) and
// plans their removal.
Result<CleanPlan> collect_clean_plan(kube::Client& client, const JobListOptions& scope,
                                     std::chrono::milliseconds older_than, util::TimePoint now);

// The DeleteOptions body sent for each Job: propagationPolicy Background (so its pods go too), a
// uid precondition (so a new Job of the same name is never deleted by mistake), and with dry_run
// "dryRun": ["All"]. The API server reads DELETE options from the body alone when there is one
// (query parameters such as ?dryRun=All are then ignored), so the dry run must be in the body.
nlohmann::json job_delete_options(const CleanTarget& target, bool dry_run = false);

struct CleanOutcome {
  CleanTarget target;
  bool deleted = false;       // the API accepted the delete (or, dry run, would have)
  bool already_gone = false;  // NotFound, or replaced by a new Job of that name: nothing to do
  std::string error;          // one line when the delete failed
};

struct CleanResult {
  std::vector<CleanOutcome> outcomes;
  int deleted = 0, gone = 0, failed = 0;
};

// Deletes every target; a failed delete never stops the others. `on_done` is called after each.
// options.dry_run sends dryRun=All.
CleanResult delete_jobs(kube::Client& client, const std::vector<CleanTarget>& targets,
                        const kube::WriteOptions& options, const std::function<void(const CleanOutcome&)>& on_done);

}  // namespace gpuctl::ops
