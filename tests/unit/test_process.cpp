#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "gpuctl/util/process.hpp"
#include "test_kubeconfig_support.hpp"

using gpuctl::util::ProcessOptions;
using gpuctl::util::ProcessResult;
using gpuctl::util::run_process;

namespace {
ProcessResult run(ProcessOptions options) {
  auto r = run_process(options);
  REQUIRE(r.has_value());
  return *r;
}
ProcessOptions args(std::vector<std::string> argv) {
  ProcessOptions o;
  o.argv = std::move(argv);
  return o;
}
}  // namespace

TEST_CASE("util::run_process reports exit codes and captures stdout", "[process]") {
  auto ok = run(args({"sh", "-c", "printf hello; exit 0"}));
  CHECK(ok.success());
  CHECK(ok.exit_code == 0);
  CHECK(ok.stdout_text == "hello");

  auto three = run(args({"sh", "-c", "exit 3"}));
  CHECK_FALSE(three.success());
  CHECK(three.exit_code == 3);
  CHECK(three.term_signal == 0);
  CHECK(gpuctl::util::describe_outcome(three) == "exited with code 3");

  auto signalled = run(args({"sh", "-c", "kill -TERM $$"}));
  CHECK(signalled.exit_code == -1);
  CHECK(signalled.term_signal == SIGTERM);
  CHECK_THAT(gpuctl::util::describe_outcome(signalled), Catch::StartsWith("was killed by signal 15"));
}

TEST_CASE("util::run_process passes arguments literally, without a shell", "[process]") {
  gpuctl_test::TempDir dir;
  const std::string marker = dir.str() + "/injected";
  auto r = run(args({"printf", "%s|", "a b; touch " + marker, "$(id)", "*", "'q'"}));
  CHECK(r.success());
  CHECK(r.stdout_text == "a b; touch " + marker + "|$(id)|*|'q'|");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("util::run_process adds and overrides environment variables", "[process]") {
  ::setenv("GPUCTL_TEST_INHERITED", "from-parent", 1);
  ::setenv("GPUCTL_TEST_REPLACED", "old", 1);
  auto o =
      args({"sh", "-c", "printf '%s,%s,%s' \"$GPUCTL_TEST_INHERITED\" \"$GPUCTL_TEST_REPLACED\" \"$GPUCTL_TEST_NEW\""});
  o.extra_env = {{"GPUCTL_TEST_REPLACED", "new"}, {"GPUCTL_TEST_NEW", "a b=c"}, {"GPUCTL_TEST_NEW", "last wins"}};
  auto r = run(o);
  CHECK(r.stdout_text == "from-parent,new,last wins");
  ::unsetenv("GPUCTL_TEST_INHERITED");
  ::unsetenv("GPUCTL_TEST_REPLACED");
}

TEST_CASE("util::run_process captures stderr on request, and large outputs do not deadlock", "[process]") {
  auto o = args({"sh", "-c", "echo to-err >&2; echo to-out"});
  o.capture_stderr = true;
  auto r = run(o);
  CHECK(r.stdout_text == "to-out\n");
  CHECK(r.stderr_text == "to-err\n");

  auto big = args({"sh", "-c", "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2"});
  big.capture_stderr = true;
  big.timeout = std::chrono::seconds(20);
  auto b = run(big);
  CHECK_FALSE(b.timed_out);
  CHECK(b.stdout_text.size() == 300000);
  CHECK(b.stderr_text.size() == 200000);
}

TEST_CASE("util::run_process gives the child /dev/null as stdin unless asked", "[process]") {
  auto o = args({"cat"});
  o.timeout = std::chrono::seconds(10);
  auto r = run(o);
  CHECK_FALSE(r.timed_out);
  CHECK(r.success());
  CHECK(r.stdout_text.empty());
}

TEST_CASE("util::run_process reports a program that cannot start", "[process]") {
  auto missing = run(args({"gpuctl-test-no-such-program"}));
  CHECK_FALSE(missing.started());
  CHECK(missing.start_error == ENOENT);
  CHECK(gpuctl::util::describe_outcome(missing) == "could not be started: No such file or directory");

  gpuctl_test::TempDir dir;
  auto not_exec = run(args({dir.write("data.txt", "not a program")}));
  CHECK(not_exec.start_error == EACCES);

  auto bad = run_process(ProcessOptions{});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == gpuctl::Errc::internal);
}

TEST_CASE("util::run_process timeout kills the whole process group", "[process]") {
  gpuctl_test::TempDir dir;
  const std::string survivor = dir.str() + "/survivor";
  // A background grandchild that would write a file after a second, and a parent that waits.
  auto o = args({"sh", "-c", "(sleep 1; echo alive > \"$1\") & echo started; sleep 30", "sh", survivor});
  o.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto r = run(o);
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(r.timed_out);
  CHECK_FALSE(r.success());
  CHECK(r.term_signal == SIGKILL);
  CHECK(r.stdout_text == "started\n");
  CHECK(elapsed < std::chrono::seconds(5));
  CHECK(gpuctl::util::describe_outcome(r) == "timed out and was killed");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK_FALSE(std::filesystem::exists(survivor));
}

TEST_CASE("util::run_process timeout also fires after the child closed its output", "[process]") {
  auto o = args({"sh", "-c", "exec >/dev/null 2>&1; sleep 30"});
  o.timeout = std::chrono::milliseconds(200);
  auto r = run(o);
  CHECK(r.timed_out);
  CHECK(r.term_signal == SIGKILL);
}

TEST_CASE("util::run_process stops a child whose output passes max_output_bytes", "[process]") {
  // `yes` writes forever: without the budget gpuctl's memory would grow until it was killed.
  auto o = args({"yes", "flood"});
  o.max_output_bytes = 1 << 20;
  auto r = run(o);
  CHECK(r.output_too_large);
  CHECK_FALSE(r.timed_out);
  CHECK_FALSE(r.success());
  CHECK(r.stdout_text.size() > std::size_t{1} << 20);
  CHECK(r.stdout_text.size() < std::size_t{2} << 20);
  CHECK(gpuctl::util::describe_outcome(r) == "wrote more output than gpuctl reads and was killed");

  auto small = args({"sh", "-c", "echo fits"});
  small.max_output_bytes = 1 << 20;
  auto fits = run(small);
  CHECK(fits.success());
  CHECK(fits.stdout_text == "fits\n");
}

TEST_CASE("util::run_process tells the caller once when a child outlives notice_after, and keeps waiting",
          "[process]") {
  int notices = 0;
  auto slow = args({"sh", "-c", "sleep 0.4; echo done"});
  slow.notice_after = std::chrono::milliseconds(50);
  slow.on_notice = [&notices] { ++notices; };
  auto r = run(slow);
  CHECK(r.success());
  CHECK(r.stdout_text == "done\n");
  CHECK(notices == 1);

  // A child that closed its output is still watched while gpuctl waits for it to exit.
  notices = 0;
  auto silent = args({"sh", "-c", "exec >/dev/null 2>&1; sleep 0.4"});
  silent.notice_after = std::chrono::milliseconds(50);
  silent.on_notice = [&notices] { ++notices; };
  CHECK(run(silent).success());
  CHECK(notices == 1);

  notices = 0;
  auto quick = args({"true"});
  quick.notice_after = std::chrono::seconds(30);
  quick.on_notice = [&notices] { ++notices; };
  CHECK(run(quick).success());
  CHECK(notices == 0);
}
