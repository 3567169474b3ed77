#pragma once
// The logs of a Job's pods, one pod after the other as they start (a retried pod after the one
// that failed), for `gpuctl submit --follow`. Driven from wait_for_job's on_poll, so waiting,
// progress and the final verdict stay in one place.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

struct JobLogOptions {
  std::string container;                              // "" : the container named "main", else the pod's first container
  std::function<bool(std::string_view)> on_chunk;     // log text; false stops the stream
  std::function<void(const std::string&)> on_notice;  // "==> pod x on node y <==", "logs unavailable: ..."
};

class JobLogFollower {
 public:
  JobLogFollower(kube::Client& client, std::string ns, std::string job, JobLogOptions options);
  // Streams every pod of the job that has started and was not streamed yet, oldest first; a
  // running one is followed until its container ends. Log failures (a node whose kubelet does
  // not answer, a pod that never started) are notices, never errors: the job's result matters
  // more than its logs.
  void poll();
  int streamed() const { return static_cast<int>(done_.size()); }

 private:
  kube::Client& client_;
  std::string ns_, job_;
  JobLogOptions options_;
  std::set<std::string> done_;  // pod uids
};

// ---- gpuctl logs JOB ------------------------------------------------------------------------------

// One line of one pod's log, without its newline. `index` is the pod's completion index
// (Indexed Jobs), "" otherwise.
struct JobLogLine {
  std::string pod, index, container;
  std::string_view text;
};

struct JobLogsRequest {
  std::string ns, job;
  std::string pod;        // "": every pod; all digits: the pod(s) of that completion index; else a pod name
  std::string container;  // "": the container named main, else the pod's first
  bool follow = false;    // stream the running pods, and the pods of retries as they start, until the job ends
  bool previous = false;  // the previous instance of each container (a restarted one)
  std::optional<std::int64_t> tail_lines;
  std::optional<std::int64_t> since_seconds;
  std::chrono::milliseconds poll_interval{1000};  // follow: how often new pods and the job's end are looked for
  // Called for each line as it arrives, never from two threads at once (follow streams every
  // pod at the same time); false stops the reading.
  std::function<bool(const JobLogLine&)> on_line;
  // "logs of pod x are not available: ...", "pod x on node y started": what is not a log line.
  std::function<void(const std::string&)> on_notice;
};

struct JobLogsResult {
  JobSummary job;                 // after the last line: the status line's source
  int pods_read = 0;              // pods whose logs were read
  std::vector<std::string> lost;  // pods whose logs could not be read (each also a notice)
};

// Reads the Job (its NotFound error names it) and the logs of its pods that have started, oldest
// first; with follow, every started pod's log at once, new pods as they start, until the Job is
// Complete or Failed and every stream has ended (the kubelet ends a stream when its container
// stops). A pod whose log cannot be read is named, never a stop. Ctrl-C ends it within about two seconds.
Result<JobLogsResult> read_job_logs(kube::Client& client, const JobLogsRequest& request);

}  // namespace gpuctl::ops
