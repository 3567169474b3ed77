#include "gpuctl/util/fanout.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "gpuctl/util/cancel.hpp"

namespace gpuctl::util {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Running {
  std::size_t index = 0;
  SpawnedChild child;
  int fds[2] = {-1, -1};  // stdout, stderr
  SteadyClock::time_point started;
  std::optional<SteadyClock::time_point> deadline;
  FanoutResult result;

  bool drained() const { return fds[0] < 0 && fds[1] < 0; }
  void close_fds() {
    for (int& fd : fds) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
};

void kill_child(Running& r) { ::kill(r.child.own_group ? -r.child.pid : r.child.pid, SIGKILL); }

// Reaps the child if it has exited; with `block`, waits for it (after a SIGKILL).
bool reap(Running& r, bool block) { return reap_child(r.child, r.result.process, block); }

// gpuctl was interrupted: the running children are stopped and the jobs not started yet are
// marked interrupted without running.
void stop_running(std::vector<Running>& running, std::chrono::milliseconds grace) {
  std::vector<ChildToStop> stopping;
  for (auto& r : running) {
    r.close_fds();  // their output no longer matters
    stopping.push_back({r.child, &r.result.process});
  }
  stop_children(stopping, grace);
}

void stop_all(std::vector<Running>& running, std::vector<FanoutResult>& results, std::size_t next,
              const std::function<void(Running&)>& finish) {
  stop_running(running, kInterruptGrace);
  for (auto& r : running) finish(r);
  running.clear();
  for (std::size_t i = next; i < results.size(); i++) results[i].process.interrupted = true;
}

using Finish = std::function<void(Running&)>;

// Spawns jobs[first, first + count) and returns each spawn's result, in order. posix_spawn waits
// until its child has exec'd, which on a loaded machine takes a scheduling round: 256 ssh spawned
// one after another took 28 s at load 100 (issue 14's bench). Large batches are therefore spread
// over a few threads; every fd we create is close-on-exec, so no child inherits another's pipes.
std::vector<Result<SpawnedChild>> spawn_batch(const std::vector<ProcessOptions>& jobs, std::size_t first,
                                              std::size_t count) {
  constexpr std::size_t kJobsPerThread = 16;
  constexpr std::size_t kMaxThreads = 8;
  std::vector<Result<SpawnedChild>> spawned(count, SpawnedChild{});
  std::atomic<std::size_t> taken{0};
  auto spawn_until_done = [&] {
    for (std::size_t k = taken++; k < count; k = taken++) spawned[k] = spawn_child(jobs[first + k]);
  };
  std::vector<std::thread> helpers;
  const std::size_t threads = std::min(kMaxThreads, (count + kJobsPerThread - 1) / kJobsPerThread);
  for (std::size_t t = 1; t < threads; t++) {
    try {
      helpers.emplace_back(spawn_until_done);
    } catch (const std::system_error&) {
      break;  // no more threads: this one spawns the rest
    }
  }
  spawn_until_done();
  for (auto& h : helpers) h.join();
  return spawned;
}

// Starts children until `parallel` run at once or no job is left. Every job of one batch counts
// its deadline from the batch's start, so the time spent spawning the others is part of each
// host's deadline, and with --fanout at least the hosts the whole run ends within one deadline.
// A child that could not start is finished at once with its start error; a failure of the
// spawning machinery itself stops every running child and is returned.
Result<void> start_jobs(const std::vector<ProcessOptions>& jobs, std::size_t& next, std::size_t parallel,
                        std::vector<Running>& running, const Finish& finish) {
  if (next >= jobs.size() || running.size() >= parallel) return {};
  const std::size_t first = next;
  const std::size_t count = std::min(jobs.size() - next, parallel - running.size());
  const SteadyClock::time_point started = SteadyClock::now();
  std::vector<Result<SpawnedChild>> spawned = spawn_batch(jobs, first, count);
  next += count;
  std::optional<Error> machinery;
  for (std::size_t k = 0; k < count; k++) {
    Running r;
    r.index = first + k;
    r.started = started;
    if (jobs[r.index].timeout) r.deadline = started + *jobs[r.index].timeout;
    if (!spawned[k]) {
      if (!machinery) machinery = spawned[k].error();
      continue;
    }
    const SpawnedChild& child = *spawned[k];
    if (child.start_error != 0) {
      r.result.process.start_error = child.start_error;
      finish(r);
      continue;
    }
    r.child = child;
    r.fds[0] = child.stdout_fd;
    r.fds[1] = child.stderr_fd;
    running.push_back(std::move(r));
  }
  if (machinery) {
    stop_running(running, std::chrono::milliseconds(0));  // the machinery failed: none may outlive us
    return fail(std::move(*machinery));
  }
  return {};
}

// One poll over every open pipe: the pipes first (`streams` of them, each with its running index
// and stream in `owners`), then the cancellation pipe when there is one.
struct PollSet {
  std::vector<pollfd> fds;
  std::vector<std::pair<std::size_t, int>> owners;  // running index, stream
  std::size_t streams = 0;
  long long wait_ms = 1000;
};

// Wakes for the nearest deadline, and soon when a child has closed its pipes but not exited yet.
PollSet poll_set_for(const std::vector<Running>& running, int cancel) {
  PollSet set;
  auto now = SteadyClock::now();
  for (std::size_t i = 0; i < running.size(); i++) {
    const Running& r = running[i];
    for (int s = 0; s < 2; s++) {
      if (r.fds[s] < 0) continue;
      set.fds.push_back({r.fds[s], POLLIN, 0});
      set.owners.emplace_back(i, s);
    }
    if (r.deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*r.deadline - now).count() + 1;
      set.wait_ms = std::min(set.wait_ms, std::max<long long>(left, 0));
    }
    if (r.drained()) set.wait_ms = std::min<long long>(set.wait_ms, 5);
  }
  set.streams = set.fds.size();
  if (cancel >= 0) set.fds.push_back({cancel, POLLIN, 0});  // wakes the loop on Ctrl-C or SIGTERM
  return set;
}

void kill_all(std::vector<Running>& running) {
  for (auto& r : running) {
    kill_child(r);
    reap(r, true);
    r.close_fds();
  }
}

// Reads what the ready pipes hold, up to `output_cap` per stream; a child that writes past the
// cap is killed (nothing more of it will be used). A pipe at its end is closed.
void read_ready(const PollSet& set, std::vector<Running>& running, std::size_t output_cap) {
  char buffer[65536];
  for (std::size_t k = 0; k < set.streams; k++) {
    if (set.fds[k].revents == 0) continue;
    auto [i, s] = set.owners[k];
    Running& r = running[i];
    ssize_t n = ::read(r.fds[s], buffer, sizeof buffer);
    if (n > 0) {
      std::string& sink = s == 0 ? r.result.process.stdout_text : r.result.process.stderr_text;
      std::size_t room = output_cap > sink.size() ? output_cap - sink.size() : 0;
      sink.append(buffer, std::min(room, static_cast<std::size_t>(n)));
      if (static_cast<std::size_t>(n) > room && !r.result.truncated) {
        r.result.truncated = true;
        kill_child(r);  // a runaway: nothing more of it will be used
      }
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      ::close(r.fds[s]);
      r.fds[s] = -1;
    }
  }
}

// Deadlines and exits: children past their deadline are killed (timed out); children that have
// exited after closing their pipes, or after being killed for their output, are finished.
void retire_finished(std::vector<Running>& running, const Finish& finish) {
  auto now = SteadyClock::now();
  for (std::size_t i = 0; i < running.size();) {
    Running& r = running[i];
    bool done = false;
    if (r.deadline && now >= *r.deadline) {
      kill_child(r);
      reap(r, true);
      r.result.process.timed_out = true;
      done = true;
    } else if (r.drained()) {
      done = reap(r, false);
    } else if (r.result.truncated) {
      // Killed for its output: stop reading once it is gone.
      if (reap(r, false)) done = true;
    }
    if (done) {
      finish(r);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      i++;
    }
  }
}

}  // namespace

Result<std::vector<FanoutResult>> run_fanout(const std::vector<ProcessOptions>& jobs, const FanoutOptions& options) {
  std::vector<FanoutResult> results(jobs.size());
  std::vector<Running> running;
  std::size_t next = 0;
  const std::size_t parallel = static_cast<std::size_t>(std::max(1, options.max_parallel));

  const Finish finish = [&](Running& r) {
    r.close_fds();
    r.result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - r.started);
    results[r.index] = std::move(r.result);
    if (options.on_finish) options.on_finish(r.index);
  };

  const int cancel = cancel_fd();
  while (next < jobs.size() || !running.empty()) {
    if (cancelled()) {
      stop_all(running, results, next, finish);
      break;
    }
    GPUCTL_TRY(start_jobs(jobs, next, parallel, running, finish));
    if (running.empty()) continue;

    PollSet set = poll_set_for(running, cancel);
    int ready = ::poll(set.fds.data(), set.fds.size(), static_cast<int>(set.wait_ms));
    if (ready < 0 && errno != EINTR) {
      kill_all(running);
      return fail(Errc::process, fmt::format("waiting for the children's output: {}", std::strerror(errno)));
    }
    if (ready > 0) read_ready(set, running, options.output_cap);
    retire_finished(running, finish);
  }
  return results;
}

}  // namespace gpuctl::util
