#pragma once
// The one-line words for a Job's state that `submit --wait/--follow` and `logs` end with.
#include <string>

#include "gpuctl/ops/jobs/job_status.hpp"

namespace gpuctl::cli {

// "job ml/train succeeded in 3m on gpu-1", "job ml/train failed (BackoffLimitExceeded) ...: why".
std::string job_result_line(const ops::JobSummary& s);
// "job ml/train: Running on gpu-1", "job ml/train: Pending: <reason>".
std::string progress_line(const ops::JobSummary& s);
// The result line once the Job has finished, else the progress line.
std::string job_state_line(const ops::JobSummary& s);

}  // namespace gpuctl::cli
