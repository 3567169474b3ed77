#pragma once
// Runs many child processes at once (the ssh fan-out): at most `max_parallel` at a time, one
// event loop over all their pipes (poll), a hard deadline per child after which its whole
// process group is killed, and a cap on the output kept per child. Total time is close to the
// slowest child's deadline, never the sum of them.
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/util/process.hpp"

namespace gpuctl::util {

struct FanoutOptions {
  int max_parallel = 32;
  // Bytes of stdout (and, separately, of stderr) kept per child; past it the child is killed
  // and its result marked truncated, so a runaway host cannot exhaust our memory.
  std::size_t output_cap = 8 * 1024 * 1024;
  // Called from the loop as each child finishes (index into the jobs), for progress.
  std::function<void(std::size_t index)> on_finish;
};

struct FanoutResult {
  ProcessResult process;   // timed_out when its deadline (ProcessOptions::timeout) killed it
  bool truncated = false;  // the output cap was hit
  std::chrono::milliseconds duration{0};
};

// Every job's ProcessOptions is used as run_process would; each job's `timeout` is its deadline,
// counted from when the fan-out started it: jobs started together (up to max_parallel of them)
// share one start, so the time spent spawning them is inside every deadline, and with
// max_parallel at least the jobs' count the whole fan-out ends within the longest timeout. An Error only when the machinery itself fails (no pipes). When
// gpuctl is interrupted (util/cancel.hpp) no further job starts, the running ones are stopped
// (util::stop_children), and every job not finished by then has process.interrupted set.
Result<std::vector<FanoutResult>> run_fanout(const std::vector<ProcessOptions>& jobs, const FanoutOptions& options);

}  // namespace gpuctl::util
