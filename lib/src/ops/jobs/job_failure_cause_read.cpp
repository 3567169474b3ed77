// The GPU cause of a failed pod read from its container's log (job_failure_cause.hpp), and the
// bounded reads that fill job summaries' causes in (job_failure_cause_internal.hpp).
#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/parallel.hpp"
#include "job_failure_cause_internal.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops {
namespace {

Result<std::string> read_tail(kube::Client& client, std::string_view ns, const FailedAttempt& attempt, int lines) {
  kube::Query query;
  query.add_if(!attempt.container.empty(), "container", attempt.container)
      .add_if(attempt.previous_instance, "previous", "true")
      .add("tailLines", std::to_string(lines))
      .add("limitBytes", std::to_string(kGpuCauseLogLimitBytes));
  return client.get_text(kube::paths::pod_log(ns, attempt.pod), query, kGpuCauseLogTimeout);
}

}  // namespace

Result<std::optional<GpuCauseFinding>> read_log_gpu_cause(kube::Client& client, std::string_view ns,
                                                          const FailedAttempt& attempt) {
  if (attempt.pod.empty() || attempt.node.empty()) return std::nullopt;  // never ran: no log
  auto cancelled = [&] {
    return fail(util::cancelled_error(fmt::format("reading the log of pod {}/{}", ns, attempt.pod)));
  };
  auto tail = read_tail(client, ns, attempt, kGpuCauseLogTailLines);
  if (util::cancelled()) return cancelled();
  if (!tail) return std::nullopt;  // 403, 404 (node gone), a kubelet that does not answer: unknown
  auto found = classify_log_tail(*tail);
  // The bytes ran out before the tail's last line: read its last few lines alone.
  if (!found && tail->size() >= static_cast<std::size_t>(kGpuCauseLogLimitBytes)) {
    auto short_tail = read_tail(client, ns, attempt, kGpuCauseLogShortTailLines);
    if (util::cancelled()) return cancelled();
    if (short_tail) found = classify_log_tail(*short_tail);
  }
  return found;
}

Result<std::optional<GpuCauseFinding>> read_pod_gpu_cause(kube::Client& client, const nlohmann::json& pod) {
  auto attempt = failed_attempt_of(pod);
  if (!attempt) return std::nullopt;
  if (attempt->gpu_cause) return attempt->gpu_cause;
  return read_log_gpu_cause(client, kube::namespace_of(pod), *attempt);
}

namespace job_cause_detail {
namespace {

struct LogRead {
  JobSummary* summary;
  std::size_t attempt;  // index in summary->failed_attempts
  std::string key;      // in LogCauseCache
  std::optional<GpuCauseFinding> found;
};

std::string cache_key(const JobSummary& s, const FailedAttempt& a) {
  return fmt::format("{}/{}/{}/{}", s.namespace_name, a.pod, a.container, a.finished_at);
}

bool readable(const FailedAttempt& a) { return a.exit_code && !a.gpu_cause && !a.node.empty(); }

// The attempts of one summary whose logs are wanted: the failure's pod first, then the newest.
std::vector<std::size_t> wanted_attempts(const JobSummary& s, std::size_t attempts_max) {
  std::vector<std::size_t> out;
  const auto& attempts = s.failed_attempts;
  if (s.failure && s.failure->exit_code && !s.failure->gpu_cause) {
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      if (attempts[i].pod == s.failure->pod && readable(attempts[i])) out.push_back(i);
    }
  }
  std::size_t taken = 0;
  for (std::size_t i = attempts.size(); i-- > 0 && taken < attempts_max;) {
    if (!readable(attempts[i])) continue;
    ++taken;
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

// A cause found in the log goes to its attempt and, when it is the failure's pod, to the
// failure and its reason.
void apply(JobSummary& s, std::size_t index, const GpuCauseFinding& finding) {
  FailedAttempt& a = s.failed_attempts[index];
  a.gpu_cause = finding;
  if (!s.failure || s.failure->gpu_cause || s.failure->pod != a.pod) return;
  s.failure->gpu_cause = finding.cause;
  s.failure->gpu_cause_source = finding.source;
  s.failure->gpu_cause_evidence = finding.evidence;
  s.reason = job_status_detail::failure_reason(*s.failure);
}

// The GPU jobs with logs to read, the newest failures first, at most budget.jobs of them.
std::vector<LogRead> plan_reads(const std::vector<JobSummary*>& summaries, const LogCauseBudget& budget) {
  std::vector<JobSummary*> jobs;
  for (JobSummary* s : summaries) {
    if (s != nullptr && s->gpu_job && !wanted_attempts(*s, budget.attempts).empty()) jobs.push_back(s);
  }
  auto finished = [](const JobSummary* s) { return s->finished_at.empty() ? s->created_at : s->finished_at; };
  std::stable_sort(jobs.begin(), jobs.end(),
                   [&](const JobSummary* a, const JobSummary* b) { return finished(a) > finished(b); });
  if (jobs.size() > budget.jobs) jobs.resize(budget.jobs);
  std::vector<LogRead> reads;
  for (JobSummary* s : jobs) {
    for (std::size_t i : wanted_attempts(*s, budget.attempts))
      reads.push_back({s, i, cache_key(*s, s->failed_attempts[i]), std::nullopt});
  }
  return reads;
}

}  // namespace

Result<void> add_log_causes(kube::Client& client, const std::vector<JobSummary*>& summaries,
                            const LogCauseBudget& budget, LogCauseCache* cache) {
  std::vector<LogRead> reads = plan_reads(summaries, budget);
  std::vector<std::size_t> to_read;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    auto hit = cache != nullptr ? cache->find(reads[i].key) : LogCauseCache::iterator{};
    if (cache != nullptr && hit != cache->end()) {
      reads[i].found = hit->second;
    } else {
      to_read.push_back(i);
    }
  }
  std::vector<std::optional<Error>> errors(to_read.size());
  util::parallel_for(
      to_read.size(), budget.parallel,
      [&](std::size_t k) {
        LogRead& r = reads[to_read[k]];
        auto found = read_log_gpu_cause(client, r.summary->namespace_name, r.summary->failed_attempts[r.attempt]);
        if (found) {
          r.found = std::move(*found);
        } else {
          errors[k] = found.error();
        }
      },
      [] { return !util::cancelled(); });
  for (auto& e : errors) {
    if (e) return fail(std::move(*e));
  }
  if (util::cancelled()) return fail(util::cancelled_error("reading the logs of failed pods"));
  for (std::size_t k : to_read) {
    if (cache != nullptr) (*cache)[reads[k].key] = reads[k].found;
  }
  for (const LogRead& r : reads) {
    if (r.found) apply(*r.summary, r.attempt, *r.found);
  }
  return {};
}

}  // namespace job_cause_detail
}  // namespace gpuctl::ops
