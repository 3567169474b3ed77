#pragma once
// The log reads behind the GPU causes of job summaries (job_failure_cause_read.cpp), shared by
// fetch_job_summary/wait_for_job (one job, its newest failed attempts too) and collect_jobs
// (many jobs, the latest failed pod of each failed one only); not part of the library's interface.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::job_cause_detail {

// Causes read from logs, by namespace/pod/container/finish time: a terminated container's log
// does not change, so a job polled every second (wait_for_job) has each log read once.
using LogCauseCache = std::map<std::string, std::optional<GpuCauseFinding>>;

struct LogCauseBudget {
  // Failed attempts per job whose logs are read besides the failure's own, newest first.
  std::size_t attempts = 0;
  // Jobs whose logs are read at all, the newest failures first; the others keep what their
  // termination messages say.
  std::size_t jobs = 1;
  int parallel = 4;  // reads at once
};

// Newest failed attempts read for one job (gpuctl jobs NAME through fetch_job_summary, submit --wait).
inline constexpr std::size_t kAttemptLogReadsMax = 5;
// `gpuctl jobs` over many jobs: the latest failed pod of at most this many failed GPU jobs,
// 8 at a time, so a namespace of old failures costs seconds, not minutes.
inline constexpr std::size_t kListedJobLogReadsMax = 32;
inline constexpr int kListedJobLogReadsParallel = 8;

// Fills in what `summaries` lack from the logs of their GPU jobs' failed pods: the failure's
// pod (when its termination message names no cause) and up to budget.attempts newest failed
// attempts; the failure's cause is then in its reason too. Only cancellation is an error.
Result<void> add_log_causes(kube::Client& client, const std::vector<JobSummary*>& summaries,
                            const LogCauseBudget& budget, LogCauseCache* cache = nullptr);

}  // namespace gpuctl::ops::job_cause_detail
