// Ctrl-C and SIGTERM: the process-wide cancellation state, the real signal handler (in a forked
// child), and the process runner and fan-out stopping real `sleep` children: nothing of their
// process groups may be left, within a bounded time.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "exit_code.hpp"
#include "fakes/fake_ssh_runner.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ssh/ssh.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/fanout.hpp"
#include "gpuctl/util/process.hpp"
#include "test_kubeconfig_support.hpp"

using namespace gpuctl;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Every test leaves the process uncancelled, whatever it asserted.
struct CancelGuard {
  CancelGuard() { util::reset_cancel_for_tests(); }
  ~CancelGuard() { util::reset_cancel_for_tests(); }
};

bool fd_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// Live (not zombie) processes whose process group is `pgid`, from /proc.
int live_members(pid_t pgid) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string text;
    if (!stat || !std::getline(stat, text)) continue;
    auto close = text.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') count++;
  }
  return count;
}

// Waits up to `limit` for the group to have no live member (killed children may take a moment
// to be torn down); true when it has none.
bool group_gone(pid_t pgid, std::chrono::milliseconds limit = 3s) {
  auto deadline = Clock::now() + limit;
  while (live_members(pgid) > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

pid_t read_pid(const std::filesystem::path& file) {
  std::ifstream in(file);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// Waits (bounded) until `file` holds a pid: the child is running its script.
pid_t wait_for_pid_file(const std::filesystem::path& file, std::chrono::milliseconds limit = 30s) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (pid_t pid = read_pid(file); pid > 0) return pid;
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

util::ProcessOptions sh(const std::string& script) {
  util::ProcessOptions p;
  p.argv = {"/bin/sh", "-c", script};
  p.capture_stderr = true;
  p.timeout = 120s;  // far beyond the test: only cancellation may end these
  return p;
}

}  // namespace

TEST_CASE("cancel: the first request wins, wakes pollers and sleepers, and resets for tests", "[cancel]") {
  CancelGuard guard;
  CHECK_FALSE(util::cancelled());
  CHECK(util::cancel_signal_name().empty());
  const int fd = util::cancel_fd();
  REQUIRE(fd >= 0);
  CHECK_FALSE(fd_readable(fd));
  CHECK(util::sleep_unless_cancelled(20ms));  // a full sleep when nothing happens

  util::request_cancel(SIGTERM);
  util::request_cancel(SIGINT);  // too late: the first one is the answer
  CHECK(util::cancelled());
  CHECK(util::cancel_signal() == SIGTERM);
  CHECK(util::cancel_signal_name() == "SIGTERM");
  CHECK(fd_readable(fd));
  CHECK(fd_readable(fd));  // stays readable for every poller
  auto started = Clock::now();
  CHECK_FALSE(util::sleep_unless_cancelled(60s));
  CHECK(Clock::now() - started < 1s);
  auto e = util::cancelled_error("listing nodes");
  CHECK(e.code == Errc::cancelled);
  CHECK(e.message == "listing nodes: interrupted by SIGTERM");

  util::reset_cancel_for_tests();
  CHECK_FALSE(util::cancelled());
  CHECK_FALSE(fd_readable(fd));
}

TEST_CASE("cancel: a sleeper in another thread wakes as soon as the request comes", "[cancel]") {
  CancelGuard guard;
  std::atomic<bool> woke_early{false};
  auto started = Clock::now();
  std::thread sleeper([&] { woke_early = !util::sleep_unless_cancelled(60s); });
  std::this_thread::sleep_for(50ms);
  util::request_cancel(SIGINT);
  sleeper.join();
  CHECK(woke_early);
  CHECK(Clock::now() - started < 5s);
}

TEST_CASE("cancel: the child registry holds what a second signal must kill", "[cancel]") {
  const int before = util::registered_children();
  util::register_child(-424242);
  util::register_child(424243);
  CHECK(util::registered_children() == before + 2);
  util::unregister_child(-424242);
  util::unregister_child(424243);
  util::unregister_child(777777);  // not there: nothing happens
  CHECK(util::registered_children() == before);
}

TEST_CASE("cancel: the real handler: a first signal records itself, a second kills the children and exits 128+N",
          "[cancel]") {
  CancelGuard guard;
  for (int sig : {SIGINT, SIGTERM}) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // In the child: no Catch2 here, only exit codes.
      ::close(fds[0]);
      util::install_interrupt_handlers();
      util::ProcessOptions o;
      o.argv = {"sleep", "100"};
      auto spawned = util::spawn_child(o);
      if (!spawned || spawned->pid <= 0) ::_exit(10);
      pid_t pid = spawned->pid;
      if (::write(fds[1], &pid, sizeof pid) != sizeof pid) ::_exit(11);
      ::raise(sig);
      if (util::cancel_signal() != sig || !fd_readable(util::cancel_fd())) ::_exit(12);
      ::raise(sig);  // the second: _exit(128 + sig) from the handler
      ::_exit(13);
    }
    ::close(fds[1]);
    pid_t sleeper = 0;
    CHECK(::read(fds[0], &sleeper, sizeof sleeper) == sizeof sleeper);
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    REQUIRE(sleeper > 0);
    CHECK(group_gone(sleeper));  // the sleep led its own group, which SIGKILL emptied
  }
}

TEST_CASE("cancel: run_process stops a child's whole group (SIGTERM) and reports it interrupted", "[cancel][process]") {
  CancelGuard guard;
  gpuctl_test::TempDir dir;
  const auto pid_file = dir.path() / "pid";
  const int registered = util::registered_children();
  // A grandchild in the same group must go too.
  auto o = sh("echo $$ > " + pid_file.string() + "; sleep 100 & sleep 100; wait");
  std::thread canceller([&] {
    wait_for_pid_file(pid_file);
    std::this_thread::sleep_for(100ms);
    util::request_cancel(SIGINT);
  });
  auto started = Clock::now();
  auto r = util::run_process(o);
  auto took = Clock::now() - started;
  canceller.join();
  REQUIRE(r);
  CHECK(r->interrupted);
  CHECK_FALSE(r->success());
  CHECK_FALSE(r->timed_out);
  CHECK(util::describe_outcome(*r) == "was stopped: gpuctl was interrupted by SIGINT");
  pid_t pgid = read_pid(pid_file);
  REQUIRE(pgid > 0);
  CHECK(group_gone(pgid));
  CHECK(took < 40s);  // the pid file may take long on a loaded machine; the stop itself is quick
  CHECK(util::registered_children() == registered);
}

TEST_CASE("cancel: a child that ignores SIGTERM is killed after the grace period", "[cancel][process]") {
  CancelGuard guard;
  gpuctl_test::TempDir dir;
  const auto pid_file = dir.path() / "pid";
  auto o = sh("trap '' TERM; echo $$ > " + pid_file.string() + "; sleep 100");
  std::atomic<Clock::time_point> cancelled_at{};
  std::thread canceller([&] {
    wait_for_pid_file(pid_file);
    std::this_thread::sleep_for(100ms);
    cancelled_at = Clock::now();
    util::request_cancel(SIGTERM);
  });
  auto r = util::run_process(o);
  auto ended = Clock::now();
  canceller.join();
  REQUIRE(r);
  CHECK(r->interrupted);
  CHECK(ended - cancelled_at.load() >= util::kInterruptGrace);
  CHECK(ended - cancelled_at.load() < util::kInterruptGrace + 10s);
  pid_t pgid = read_pid(pid_file);
  REQUIRE(pgid > 0);
  CHECK(group_gone(pgid));
}

TEST_CASE("cancel: once interrupted, run_process starts nothing", "[cancel][process]") {
  CancelGuard guard;
  gpuctl_test::TempDir dir;
  util::request_cancel(SIGINT);
  auto r = util::run_process(sh("touch " + (dir.path() / "ran").string()));
  REQUIRE(r);
  CHECK(r->interrupted);
  CHECK(r->exit_code == -1);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "ran"));
}

TEST_CASE("cancel: the fan-out starts no new host, stops the running ones, and leaves no process", "[cancel][fanout]") {
  CancelGuard guard;
  gpuctl_test::TempDir dir;
  const int registered = util::registered_children();
  std::vector<util::ProcessOptions> jobs;
  for (int i = 0; i < 6; i++) {
    jobs.push_back(sh("echo $$ > " + (dir.path() / std::to_string(i)).string() + "; echo started; exec sleep 100"));
  }
  std::thread canceller([&] {
    for (int i = 0; i < 3; i++) wait_for_pid_file(dir.path() / std::to_string(i));
    std::this_thread::sleep_for(100ms);
    util::request_cancel(SIGINT);
  });
  util::FanoutOptions options;
  options.max_parallel = 3;
  auto r = util::run_fanout(jobs, options);
  canceller.join();
  REQUIRE(r);
  REQUIRE(r->size() == 6);
  for (int i = 0; i < 6; i++) {
    INFO("job " << i);
    CHECK((*r)[i].process.interrupted);
  }
  for (int i = 0; i < 3; i++) {
    pid_t pgid = read_pid(dir.path() / std::to_string(i));
    REQUIRE(pgid > 0);
    CHECK(group_gone(pgid));
  }
  for (int i = 3; i < 6; i++) {
    CHECK_FALSE(std::filesystem::exists(dir.path() / std::to_string(i)));  // never started
    CHECK((*r)[i].process.stdout_text.empty());
  }
  CHECK(util::registered_children() == registered);
}

TEST_CASE("cancel: interrupted ssh runs are their own outcome, grouped into one line", "[cancel][ssh]") {
  CancelGuard guard;
  util::request_cancel(SIGINT);
  util::ProcessResult stopped;
  stopped.interrupted = true;
  stopped.term_signal = SIGTERM;
  util::ProcessResult never_started;
  never_started.interrupted = true;
  ssh::SshSettings settings;
  auto verdict = ssh::classify_ssh_run(stopped, settings);
  CHECK(verdict.outcome == ssh::HostOutcome::interrupted);
  CHECK(ssh::to_string(verdict.outcome) == "interrupted");
  CHECK(verdict.message == "gpuctl was interrupted by SIGINT before the node answered (re-run to probe it)");
  auto a = ops::read_probe_run({"gpu-1", "10.0.0.1", ""}, testing::classified_run(stopped, settings));
  auto b = ops::read_probe_run({"gpu-2", "10.0.0.2", ""}, testing::classified_run(never_started, settings));
  CHECK(a.outcome == "interrupted");
  CHECK_FALSE(a.report);
  auto groups = ops::group_failures({a, b});
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].outcome == "interrupted");
  CHECK(groups[0].nodes == std::vector<std::string>{"gpu-1", "gpu-2"});
}

TEST_CASE("cancel: exit codes 130 after SIGINT and 143 after SIGTERM", "[cancel][cli]") {
  CancelGuard guard;
  Error cancelled;
  cancelled.code = Errc::cancelled;
  CHECK(cli::settle_exit_code(0) == 0);
  CHECK(cli::settle_exit_code(1) == 1);
  CHECK(cli::exit_code_for(cancelled) == cli::ExitCode::interrupted);  // no signal recorded: as Ctrl-C
  util::request_cancel(SIGINT);
  CHECK(static_cast<int>(cli::exit_code_for(cancelled)) == 130);
  CHECK(cli::settle_exit_code(1) == 130);
  CHECK(cli::settle_exit_code(0) == 130);
  util::reset_cancel_for_tests();
  util::request_cancel(SIGTERM);
  CHECK(static_cast<int>(cli::exit_code_for(cancelled)) == 143);
  CHECK(cli::settle_exit_code(1) == 143);
}
