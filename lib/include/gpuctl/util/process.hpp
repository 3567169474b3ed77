#pragma once
// A small blocking subprocess runner: argv only (never a shell), extra environment variables,
// stdout captured, stderr passed through or captured, stdin passed through or /dev/null, and
// a timeout that kills the child's whole process group.
#include <chrono>
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
};

struct ProcessResult {
  // errno when the program could not be started at all (ENOENT: not found in PATH or no such
  // file; EACCES: not executable); nothing ran and the other fields are unset.
  int start_error = 0;
  int exit_code = -1;     // the exit status when the child exited normally, else -1
  int term_signal = 0;    // the signal that ended the child, else 0
  bool timed_out = false; // the timeout fired and the child was killed
  std::string stdout_text;
  std::string stderr_text;  // only with capture_stderr

  bool started() const { return start_error == 0; }
  bool success() const { return start_error == 0 && !timed_out && term_signal == 0 && exit_code == 0; }
};

// Runs the program and waits for it. An Error (Errc::process) means the runner itself failed
// (no argv, pipe or spawn machinery failure); a program that cannot start, exits non-zero,
// dies of a signal or times out is reported in the ProcessResult.
Result<ProcessResult> run_process(const ProcessOptions& options);

// A started child whose output the caller reads itself (the ssh fan-out polls many at once).
struct SpawnedChild {
  int start_error = 0;  // errno as in ProcessResult::start_error; then pid is -1
  int pid = -1;
  int stdout_fd = -1;  // read ends, owned by the caller (close them); stderr_fd is -1 unless captured
  int stderr_fd = -1;
};
// Starts the program as run_process would (same environment, stdin, process group and signal
// setup) and returns at once; options.timeout is the caller's to enforce.
Result<SpawnedChild> spawn_child(const ProcessOptions& options);
// Fills exit_code/term_signal from a waitpid() status.
void record_status(int status, ProcessResult& result);

// For messages: "exited with code 3", "was killed by signal 9 (Killed)", "timed out and was
// killed", "could not be started: No such file or directory", "exited successfully".
std::string describe_outcome(const ProcessResult& result);

}  // namespace gpuctl::util
