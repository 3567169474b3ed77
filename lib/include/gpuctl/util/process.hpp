#pragma once
// A small blocking subprocess runner: argv only (never a shell), extra environment variables,
// stdout captured, stderr passed through or captured, stdin passed through or /dev/null, and
// a timeout that kills the child's whole process group.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuctl/error.hpp"

namespace gpuctl::util {

struct ProcessOptions {
  // argv[0] is the program: a path when it contains a '/', else looked up in our PATH.
  // The arguments reach the program exactly as given (no shell, no splitting, no globbing).
  std::vector<std::string> argv;
  // Added to our environment; a name already set is replaced (the last entry wins).
  std::vector<std::pair<std::string, std::string>> extra_env;
  // true: the child's stderr is captured into ProcessResult::stderr_text;
  // false: it writes straight to our stderr (the user sees it).
  bool capture_stderr = false;
  // true: the child reads our stdin (and may prompt on the terminal); false: /dev/null.
  bool pass_stdin = false;
  // true: the child leads a new process group, so a timeout kills everything it started.
  // Set false for a child that must read from the terminal (pass_stdin with a tty): a
  // background process group that reads the terminal is stopped by SIGTTIN. A timeout then
  // kills only the child itself.
  bool own_process_group = true;
  // Killed with SIGKILL (the whole group, see above) once this much time has passed.
  std::optional<std::chrono::milliseconds> timeout;
  // Killed with SIGKILL (as for a timeout) once stdout and stderr together pass this many bytes:
  // a broken or hostile program must not fill our memory. Zero: no limit.
  std::size_t max_output_bytes = 0;
  // Called once when the child is still running after `notice_after` (a program that may wait
  // for a login says nothing; the caller tells the user what gpuctl waits for). The child is not
  // stopped.
  std::optional<std::chrono::milliseconds> notice_after;
  std::function<void()> on_notice;
};

struct ProcessResult {
  // errno when the program could not be started at all (ENOENT: not found in PATH or no such
  // file; EACCES: not executable); nothing ran and the other fields are unset.
  int start_error = 0;
  int exit_code = -1;             // the exit status when the child exited normally, else -1
  int term_signal = 0;            // the signal that ended the child, else 0
  bool timed_out = false;         // the timeout fired and the child was killed
  bool output_too_large = false;  // it wrote more than max_output_bytes and was killed
  // gpuctl was interrupted (util/cancel.hpp): the child was stopped (SIGTERM, then SIGKILL after
  // a grace period), or was never started when the interruption came first (then pid was never set).
  bool interrupted = false;
  std::string stdout_text;
  std::string stderr_text;  // only with capture_stderr

  bool started() const { return start_error == 0; }
  bool success() const {
    return start_error == 0 && !timed_out && !output_too_large && !interrupted && term_signal == 0 && exit_code == 0;
  }
};

// Runs the program and waits for it. An Error (Errc::process) means the runner itself failed
// (no argv, pipe or spawn machinery failure); a program that cannot start, exits non-zero,
// dies of a signal or times out is reported in the ProcessResult. When gpuctl is interrupted
// (util::cancelled()) the child is stopped (see stop_children) and the result says interrupted;
// once interrupted, nothing new is started.
Result<ProcessResult> run_process(const ProcessOptions& options);

// A started child whose output the caller reads itself (the ssh fan-out polls many at once).
struct SpawnedChild {
  int start_error = 0;  // errno as in ProcessResult::start_error; then pid is -1
  int pid = -1;
  bool own_group = true;  // leads its own process group (kills and the cancel registry use -pid)
  int stdout_fd = -1;     // read ends, owned by the caller (close them); stderr_fd is -1 unless captured
  int stderr_fd = -1;
};
// Starts the program as run_process would (same environment, stdin, process group and signal
// setup) and returns at once; options.timeout is the caller's to enforce. The child is in the
// cancel registry (util/cancel.hpp) until reap_child or stop_children reaps it.
Result<SpawnedChild> spawn_child(const ProcessOptions& options);
// Waits for the child (blocking, or not with `block` false) and records its status; true once
// it is reaped (or there was nothing to wait for), and then it leaves the cancel registry.
bool reap_child(const SpawnedChild& child, ProcessResult& result, bool block);

// How long interrupted children get between SIGTERM and SIGKILL.
inline constexpr std::chrono::milliseconds kInterruptGrace{2000};
struct ChildToStop {
  SpawnedChild child;
  ProcessResult* result = nullptr;  // status recorded, interrupted set
};
// Stops children because gpuctl was interrupted: SIGTERM to each one's process group, up to
// `grace` for them to exit, then SIGKILL to whatever is left of each group; every child is
// reaped before this returns.
void stop_children(const std::vector<ChildToStop>& children, std::chrono::milliseconds grace = kInterruptGrace);
// Fills exit_code/term_signal from a waitpid() status.
void record_status(int status, ProcessResult& result);

// For messages: "exited with code 3", "was killed by signal 9 (Killed)", "timed out and was
// killed", "could not be started: No such file or directory", "exited successfully".
std::string describe_outcome(const ProcessResult& result);

}  // namespace gpuctl::util
