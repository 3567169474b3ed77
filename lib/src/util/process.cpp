#include "gpuctl/util/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "gpuctl/util/cancel.hpp"

extern char** environ;

namespace gpuctl::util {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Closes a file descriptor once; safe to call again.
class Fd {
 public:
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void adopt(int fd) {
    reset();
    fd_ = fd;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read_end;
  Fd write_end;
};

Result<void> make_pipe(Pipe& p) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return fail(Errc::process, fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  }
  p.read_end.adopt(fds[0]);
  p.write_end.adopt(fds[1]);
  return {};
}

// Our environment with `extra` applied on top: an extra name replaces the inherited value.
std::vector<std::string> build_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& [name, value] : extra) {
    const std::string prefix = name + "=";
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(prefix); });
    env.push_back(prefix + value);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// posix_spawn attributes and file actions, destroyed on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
  bool actions_ready = false;
  bool attr_ready = false;
  ~SpawnSetup() {
    if (actions_ready) posix_spawn_file_actions_destroy(&actions);
    if (attr_ready) posix_spawnattr_destroy(&attr);
  }
};

Result<void> check_spawn_call(int rc, const char* what) {
  if (rc != 0)
    return fail(Errc::process, fmt::format("cannot prepare the child process ({}): {}", what, std::strerror(rc)));
  return {};
}

Result<void> prepare(SpawnSetup& s, const ProcessOptions& options, int stdout_fd, int stderr_fd) {
  GPUCTL_TRY(check_spawn_call(posix_spawn_file_actions_init(&s.actions), "file actions"));
  s.actions_ready = true;
  GPUCTL_TRY(check_spawn_call(posix_spawn_file_actions_adddup2(&s.actions, stdout_fd, STDOUT_FILENO), "stdout"));
  if (stderr_fd >= 0) {
    GPUCTL_TRY(check_spawn_call(posix_spawn_file_actions_adddup2(&s.actions, stderr_fd, STDERR_FILENO), "stderr"));
  }
  if (!options.pass_stdin) {
    GPUCTL_TRY(check_spawn_call(posix_spawn_file_actions_addopen(&s.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0),
                                "stdin"));
  }

  GPUCTL_TRY(check_spawn_call(posix_spawnattr_init(&s.attr), "attributes"));
  s.attr_ready = true;
  // The child starts with default signal dispositions and an empty mask, whatever we ignore or
  // block (the CLI ignores SIGPIPE, which a plugin's own pipelines must not inherit).
  sigset_t all_signals;
  sigset_t no_signals;
  sigfillset(&all_signals);
  sigemptyset(&no_signals);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  GPUCTL_TRY(check_spawn_call(posix_spawnattr_setsigdefault(&s.attr, &all_signals), "signal defaults"));
  GPUCTL_TRY(check_spawn_call(posix_spawnattr_setsigmask(&s.attr, &no_signals), "signal mask"));
  if (options.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    GPUCTL_TRY(check_spawn_call(posix_spawnattr_setpgroup(&s.attr, 0), "process group"));
  }
  GPUCTL_TRY(check_spawn_call(posix_spawnattr_setflags(&s.attr, flags), "flags"));
  return {};
}

// What run_process watches while the child runs: the kill deadline, the one-time notice, and
// the output budget.
struct Watch {
  std::optional<SteadyClock::time_point> deadline;
  std::optional<SteadyClock::time_point> notice_at;
  const std::function<void()>* on_notice = nullptr;
  std::size_t max_output_bytes = 0;  // 0: no limit
};

// Milliseconds until the next thing to act on (the deadline or the notice), for poll(); -1
// (wait forever) without either.
int poll_timeout(const Watch& watch) {
  std::optional<SteadyClock::time_point> next = watch.deadline;
  if (watch.notice_at && (!next || *watch.notice_at < *next)) next = watch.notice_at;
  if (!next) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*next - SteadyClock::now()).count();
  if (left <= 0) return 0;
  // Round up so we do not spin just before the deadline.
  return static_cast<int>(std::min<long long>(left + 1, 60'000));
}

bool past(const std::optional<SteadyClock::time_point>& deadline) {
  return deadline && SteadyClock::now() >= *deadline;
}

// Says once that the child is slow (the caller's notice), then forgets the notice time.
void notice_if_due(Watch& watch) {
  if (!past(watch.notice_at)) return;
  watch.notice_at.reset();
  if (watch.on_notice && *watch.on_notice) (*watch.on_notice)();
}

}  // namespace

void record_status(int status, ProcessResult& result) {
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
}

namespace {

enum class Ended { done, deadline, too_large, cancelled };

// Reads stdout (and stderr when captured) until both reach EOF, the deadline passes or gpuctl
// is interrupted (the cancel pipe wakes the poll).
Result<Ended> pump_output(Fd& out, Fd& err, ProcessResult& result, Watch& watch) {
  char buffer[16384];
  const int cancel = cancel_fd();
  while (out.get() >= 0 || err.get() >= 0) {
    pollfd fds[3];
    nfds_t count = 0;
    std::string* sinks[2];
    Fd* owners[2];
    if (out.get() >= 0) {
      fds[count] = {out.get(), POLLIN, 0};
      sinks[count] = &result.stdout_text;
      owners[count++] = &out;
    }
    if (err.get() >= 0) {
      fds[count] = {err.get(), POLLIN, 0};
      sinks[count] = &result.stderr_text;
      owners[count++] = &err;
    }
    const nfds_t streams = count;
    if (cancel >= 0) fds[count++] = {cancel, POLLIN, 0};
    if (cancelled()) return Ended::cancelled;
    if (past(watch.deadline)) return Ended::deadline;
    notice_if_due(watch);
    int ready = ::poll(fds, count, poll_timeout(watch));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return fail(Errc::process, fmt::format("waiting for the child's output: {}", std::strerror(errno)));
    }
    for (nfds_t i = 0; ready > 0 && i < streams; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
        if (watch.max_output_bytes > 0 &&
            result.stdout_text.size() + result.stderr_text.size() > watch.max_output_bytes) {
          return Ended::too_large;
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        owners[i]->reset();  // EOF (or a broken pipe): this stream is done
      }
    }
  }
  return Ended::done;
}

// Waits for the child to exit, polling so a deadline or an interruption can end the wait.
Ended wait_child(const SpawnedChild& child, ProcessResult& result, Watch& watch) {
  for (;;) {
    if (reap_child(child, result, false)) return Ended::done;
    if (cancelled()) return Ended::cancelled;
    if (past(watch.deadline)) return Ended::deadline;
    notice_if_due(watch);
    sleep_unless_cancelled(std::chrono::milliseconds(5));
  }
}

pid_t kill_target(const SpawnedChild& child) { return child.own_group ? -child.pid : child.pid; }

void kill_and_reap(const SpawnedChild& child, ProcessResult& result) {
  ::kill(kill_target(child), SIGKILL);
  reap_child(child, result, true);
  result.timed_out = true;
}

}  // namespace

bool reap_child(const SpawnedChild& child, ProcessResult& result, bool block) {
  for (;;) {
    int status = 0;
    pid_t rc = ::waitpid(child.pid, &status, block ? 0 : WNOHANG);
    if (rc == 0) return false;  // still running
    if (rc < 0 && errno == EINTR) continue;
    if (rc == child.pid) record_status(status, result);
    // Reaped, or ECHILD (nothing left to wait for): either way it is no longer ours to kill.
    unregister_child(kill_target(child));
    return true;
  }
}

void stop_children(const std::vector<ChildToStop>& children, std::chrono::milliseconds grace) {
  for (const auto& c : children) ::kill(kill_target(c.child), SIGTERM);
  std::vector<bool> reaped(children.size(), false);
  const auto deadline = SteadyClock::now() + grace;
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!reaped[i]) reaped[i] = reap_child(children[i].child, *children[i].result, false);
      all = all && reaped[i];
    }
    if (all || SteadyClock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    const auto& c = children[i];
    // A group outlives its leader while anything in it runs (a command's own children): kill
    // what is left of it too, not only a leader that ignored SIGTERM.
    if (c.child.own_group || !reaped[i]) ::kill(kill_target(c.child), SIGKILL);
    if (!reaped[i]) reap_child(c.child, *c.result, true);
    c.result->interrupted = true;
  }
}

Result<SpawnedChild> spawn_child(const ProcessOptions& options) {
  if (options.argv.empty() || options.argv.front().empty()) {
    return fail(Errc::internal, "run_process: no program given");
  }
  Pipe out_pipe;
  Pipe err_pipe;
  GPUCTL_TRY(make_pipe(out_pipe));
  if (options.capture_stderr) GPUCTL_TRY(make_pipe(err_pipe));

  SpawnSetup setup;
  GPUCTL_TRY(prepare(setup, options, out_pipe.write_end.get(), options.capture_stderr ? err_pipe.write_end.get() : -1));

  std::vector<std::string> argv_storage = options.argv;
  std::vector<char*> argv = c_strings(argv_storage);
  std::vector<std::string> env_storage = build_environment(options.extra_env);
  std::vector<char*> envp = c_strings(env_storage);

  SpawnedChild child;
  // posix_spawnp searches our PATH when argv[0] has no '/'; glibc reports exec failures
  // (ENOENT, EACCES, ENOEXEC) as its return value.
  int rc = ::posix_spawnp(&child.pid, argv[0], &setup.actions, &setup.attr, argv.data(), envp.data());
  out_pipe.write_end.reset();
  err_pipe.write_end.reset();
  if (rc != 0) {
    child.start_error = rc;
    child.pid = -1;
    return child;
  }
  child.own_group = options.own_process_group;
  register_child(kill_target(child));
  child.stdout_fd = out_pipe.read_end.release();
  child.stderr_fd = err_pipe.read_end.release();
  return child;
}

Result<ProcessResult> run_process(const ProcessOptions& options) {
  ProcessResult result;
  if (cancelled()) {  // interrupted already: start nothing new
    result.interrupted = true;
    return result;
  }
  Watch watch;
  if (options.timeout) watch.deadline = SteadyClock::now() + *options.timeout;
  if (options.notice_after) watch.notice_at = SteadyClock::now() + *options.notice_after;
  watch.on_notice = &options.on_notice;
  watch.max_output_bytes = options.max_output_bytes;
  GPUCTL_TRY_ASSIGN(SpawnedChild child, spawn_child(options));
  if (child.start_error != 0) {
    result.start_error = child.start_error;
    return result;
  }
  Fd out;
  Fd err;
  out.adopt(child.stdout_fd);
  err.adopt(child.stderr_fd);
  auto pumped = pump_output(out, err, result, watch);
  if (!pumped) {
    stop_children({{child, &result}}, std::chrono::milliseconds(0));
    return fail(pumped.error());
  }
  Ended ended = *pumped == Ended::done ? wait_child(child, result, watch) : *pumped;
  if (ended == Ended::deadline) kill_and_reap(child, result);
  if (ended == Ended::too_large) {
    kill_and_reap(child, result);
    result.timed_out = false;
    result.output_too_large = true;
  }
  if (ended == Ended::cancelled) stop_children({{child, &result}});
  return result;
}

std::string describe_outcome(const ProcessResult& result) {
  if (result.start_error != 0) return fmt::format("could not be started: {}", std::strerror(result.start_error));
  if (result.timed_out) return "timed out and was killed";
  if (result.output_too_large) return "wrote more output than gpuctl reads and was killed";
  if (result.interrupted) {
    std::string by = cancel_signal_name();
    return by.empty() ? "was stopped: gpuctl was interrupted"
                      : fmt::format("was stopped: gpuctl was interrupted by {}", by);
  }
  if (result.term_signal != 0) {
    return fmt::format("was killed by signal {} ({})", result.term_signal, ::strsignal(result.term_signal));
  }
  if (result.exit_code == 0) return "exited successfully";
  return fmt::format("exited with code {}", result.exit_code);
}

}  // namespace gpuctl::util
