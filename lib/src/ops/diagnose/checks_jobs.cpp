// The GPU Job checks: failed Jobs with their cause, read from the Job's condition, the failed
// pods' termination messages and the last lines of their logs (gpu-job-failed); finished Jobs
// nobody cleans up (jobs-not-cleaned).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "check_support.hpp"
#include "classify.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

bool is_gpu_job(const json& job) {
  json as_pod = {{"spec", field_at(job, {"spec", "template", "spec"})}};
  return is_gpu_pod(as_pod);
}

const json* condition(const json& job, std::string_view type) {
  for (const auto& c : kube::array_field(field(job, "status"), "conditions")) {
    if (string_field(c, "type") == type && string_field(c, "status") == "True") return &c;
  }
  return nullptr;
}

std::string job_ref(const json& job) { return kube::namespace_of(job) + "/" + kube::name_of(job); }

// The first GPU cause in the failed pods' termination messages, then in their logs.
void read_pod_causes(const Snapshot& snapshot, const json& job, Finding& f) {
  std::optional<MessageClass> cause;
  for (const auto& pod : snapshot.list(Source::pods)) {
    if (kube::namespace_of(pod) != kube::namespace_of(job) || !owned_by(pod, "Job", kube::name_of(job))) continue;
    for (const auto& status : kube::array_field(field(pod, "status"), "containerStatuses")) {
      const json* t = &field_at(status, {"state", "terminated"});
      if (!t->is_object()) t = &field_at(status, {"lastState", "terminated"});
      if (kube::integer_field(*t, "exitCode").value_or(0) == 0) continue;
      std::string message = string_field(*t, "message");
      if (f.evidence.size() < 4) {
        f.evidence.push_back({fmt::format("pod {} container {} terminated", pod_ref(pod), string_field(status, "name")),
                              fmt::format("exitCode={} reason={}{}", kube::integer_field(*t, "exitCode").value_or(0),
                                          string_field(*t, "reason"), message.empty() ? "" : ": " + message),
                              string_field(*t, "finishedAt")});
      }
      if (!cause) cause = classify_gpu_failure(message);
    }
  }
  // The failed container's last log lines, read as `gpuctl jobs` reads them (gather_job_logs.cpp):
  // the last line that names a GPU cause is the one quoted.
  for (const auto& log : snapshot.list(Source::job_logs)) {
    if (string_field(log, "namespace") != kube::namespace_of(job) || string_field(log, "job") != kube::name_of(job))
      continue;
    auto found = classify_log_tail(string_field(log, "text"));
    if (!found) continue;
    if (!cause) cause = found->cause;
    auto [time, line] = split_timestamp(found->evidence);
    if (f.evidence.size() < 5) {
      f.evidence.push_back({fmt::format("log of pod {}/{} container {}", string_field(log, "namespace"),
                                        string_field(log, "pod"), string_field(log, "container")),
                            line, time});
    }
  }
  if (cause) f.summary += fmt::format(": {}; {}", cause->cause, cause->hint);
}

}  // namespace

std::vector<Finding> check_gpu_job_failed(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& job : snapshot.list(Source::jobs)) {
    const json* failed = condition(job, "Failed");
    if (failed == nullptr || !is_gpu_job(job)) continue;
    std::string when = string_field(*failed, "lastTransitionTime");
    auto t = util::parse_rfc3339(when);
    if (t && *t < snapshot.now - snapshot.settings.since) continue;
    Finding f = object_finding("gpu-job-failed", Severity::error, "Job", job,
                               fmt::format("job {} failed ({})", job_ref(job), string_field(*failed, "reason")));
    f.evidence.push_back({fmt::format("job {} condition Failed", job_ref(job)),
                          fmt::format("{}: {}", string_field(*failed, "reason"), string_field(*failed, "message")),
                          when});
    read_pod_causes(snapshot, job, f);
    f.remedy = {fmt::format("gpuctl jobs -n {} {}", kube::namespace_of(job), kube::name_of(job)),
                fmt::format("kubectl logs -n {} job/{}", kube::namespace_of(job), kube::name_of(job))};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_jobs_not_cleaned(const Snapshot& snapshot) {
  struct Tally {
    std::size_t count = 0;
    std::string oldest;
    std::chrono::system_clock::time_point oldest_at = std::chrono::system_clock::time_point::max();
  };
  std::map<std::string, Tally> by_namespace;
  for (const auto& job : snapshot.list(Source::jobs)) {
    if (!is_gpu_job(job) || field_at(job, {"spec", "ttlSecondsAfterFinished"}).is_number()) continue;
    const json* done = condition(job, "Complete");
    if (done == nullptr) done = condition(job, "Failed");
    if (done == nullptr) continue;
    std::string finished = string_field(field(job, "status"), "completionTime");
    if (finished.empty()) finished = string_field(*done, "lastTransitionTime");
    auto t = util::parse_rfc3339(finished);
    if (!t || snapshot.now - *t < snapshot.settings.jobs_older_than) continue;
    Tally& tally = by_namespace[kube::namespace_of(job)];
    ++tally.count;
    if (*t < tally.oldest_at) tally.oldest_at = *t, tally.oldest = kube::name_of(job);
  }
  std::vector<Finding> out;
  for (const auto& [ns, tally] : by_namespace) {
    auto age = std::chrono::duration_cast<std::chrono::seconds>(snapshot.now - tally.oldest_at);
    Finding f;
    f.check = "jobs-not-cleaned";
    f.severity = Severity::info;
    f.object = {"Namespace", "", ns};
    std::string older = util::human_duration(snapshot.settings.jobs_older_than);
    f.summary = fmt::format(
        "{} finished GPU Job(s) in {} are older than {} and have no ttlSecondsAfterFinished "
        "(oldest {}, finished {} ago)",
        tally.count, ns, older, tally.oldest, util::human_duration(age));
    f.remedy = {fmt::format("gpuctl jobs clean -n {} --older-than {} --dry-run", ns, older),
                fmt::format("gpuctl jobs clean -n {} --older-than {}", ns, older)};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
