#pragma once
// The logs of a Job's pods, one pod after the other as they start (a retried pod after the one
// that failed), for `gpuctl submit --follow`. Driven from wait_for_job's on_poll, so waiting,
// progress and the final verdict stay in one place.
#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

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

}  // namespace gpuctl::ops
