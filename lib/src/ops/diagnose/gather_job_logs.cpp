// Which failed GPU Jobs' logs diagnose reads for gpu-job-failed: the same pod and container
// `gpuctl jobs` reads (ops/jobs/job_failure_cause.hpp), one per Job, only when its termination
// message names no GPU cause, the newest failures first.
#include <algorithm>
#include <map>

#include "check_support.hpp"
#include "gather_internal.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using json = nlohmann::json;
using kube::field;
using kube::string_field;

// "ns/name" of the GPU Jobs that failed within --since, with when; every Job when the Jobs
// could not be read (the check is then skipped, but the pods still narrow it).
std::map<std::string, std::string> failed_jobs(const Snapshot& snapshot) {
  std::map<std::string, std::string> out;
  for (const auto& job : snapshot.list(Source::jobs)) {
    for (const auto& c : kube::array_field(field(job, "status"), "conditions")) {
      if (string_field(c, "type") != "Failed" || string_field(c, "status") != "True") continue;
      std::string when = string_field(c, "lastTransitionTime");
      auto t = util::parse_rfc3339(when);
      if (t && *t < snapshot.now - snapshot.settings.since) continue;
      out[kube::namespace_of(job) + "/" + kube::name_of(job)] = when;
    }
  }
  return out;
}

}  // namespace

std::vector<json> job_log_reads(const Snapshot& snapshot, std::size_t max_jobs) {
  const bool jobs_read = snapshot.lists.count(Source::jobs) > 0;
  const auto failed = failed_jobs(snapshot);
  struct Latest {
    FailedAttempt attempt;
    std::string ns, job, finished;
  };
  std::map<std::string, Latest> by_job;  // "ns/job" -> its latest failed attempt
  for (const auto& pod : snapshot.list(Source::pods)) {
    std::string job = support::owning_job(pod);
    if (job.empty() || string_field(field(pod, "status"), "phase") != "Failed" || !support::is_gpu_pod(pod)) continue;
    std::string key = kube::namespace_of(pod) + "/" + job;
    if (jobs_read && !failed.count(key)) continue;
    auto attempt = failed_attempt_of(pod);
    if (!attempt) continue;
    std::string finished =
        attempt->finished_at.empty() ? string_field(field(pod, "metadata"), "creationTimestamp") : attempt->finished_at;
    auto& latest = by_job[key];
    if (latest.job.empty() || finished > latest.finished)
      latest = {std::move(*attempt), kube::namespace_of(pod), job, finished};
  }
  std::vector<const Latest*> order;
  for (const auto& [key, latest] : by_job) {
    // What the termination message names is the cause already; a pod that never ran has no log.
    if (!latest.attempt.gpu_cause && !latest.attempt.node.empty()) order.push_back(&latest);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Latest* a, const Latest* b) { return a->finished > b->finished; });
  if (order.size() > max_jobs) order.resize(max_jobs);
  std::vector<json> out;
  for (const Latest* l : order) {
    out.push_back({{"namespace", l->ns},
                   {"pod", l->attempt.pod},
                   {"container", l->attempt.container},
                   {"node", l->attempt.node},
                   {"previous", l->attempt.previous_instance},
                   {"job", l->job},
                   {"causeTail", true}});
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
