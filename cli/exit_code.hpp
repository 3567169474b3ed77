#pragma once
// gpuctl's exit-code contract, documented in README.md. Codes are chosen only here and in
// run_cli; commands return an ExitCode or an Error.
#include <optional>
#include <string_view>
#include <vector>

#include "gpuctl/error.hpp"

namespace gpuctl::cli {

enum class ExitCode : int {
  ok = 0,          // success
  failure = 1,     // talking to the cluster or carrying out the operation failed (also: partly)
  usage = 2,       // bad flags or arguments, invalid specs or manifests
  refused = 3,     // a pre-flight check refused the request (gpuctl submit without --force)
  findings = 4,    // gpuctl diagnose found something at or above --fail-on
  incomplete = 5,  // gpuctl diagnose found nothing at or above --fail-on, but some checks could not run
  not_served = 6,  // the cluster does not serve an API the request needs (taint --device without DeviceTaintRules)
  // gpuctl submit --wait/--follow: a job that failed returns its failed container's exit code
  // (1-255) when it has one; these two say why when it has none.
  job_deadline_exceeded = 124,  // the Job ran past activeDeadlineSeconds (as timeout(1) does)
  job_failed = 125,             // the Job failed with no container exit code to report
  // submit --wait/--follow: a pre-flight check refused the job, nothing was created (3 would read
  // as the container's exit code; 126 is the shell's "found but cannot be run").
  refused_before_run = 126,
  // Ctrl-C or SIGTERM stopped gpuctl before its work was done (128 + the signal, as a shell
  // reports a death by that signal).
  interrupted = 130,  // SIGINT
  terminated = 143,   // SIGTERM
};

// One row of the exit-code contract, as --help, the man pages and README.md's table say it.
struct ExitCodeDoc {
  const char* code;  // "0", "1-255" (a range: the job's own code)
  const char* meaning;
};
const std::vector<ExitCodeDoc>& exit_code_docs();

// A container's exit code as gpuctl's exit code (1-255; 0 and out-of-range values map to
// job_failed, so a failed job never exits 0).
ExitCode exit_code_of_container(int container_exit_code);

// A finished job's result: 0 when it succeeded; job_deadline_exceeded when it ran out of time (its
// last pod's code is then only the kill); the failed container's code; else job_failed.
ExitCode exit_code_for_job(bool succeeded, std::string_view failure_reason, std::optional<int> container_exit_code);
// gpuctl diagnose: findings win over an incomplete run; 0 only when every selected check ran
// and none found anything at or above the threshold.
ExitCode exit_code_for_diagnosis(bool found_at_threshold, bool some_checks_skipped);
// invalid_argument is the user's input (2); not_served is 6; cancelled is interrupted_exit_code();
// everything else is a failure to carry out (1).
ExitCode exit_code_for(const Error& error);
// interrupted after SIGINT (also when no signal is recorded), terminated after SIGTERM.
ExitCode interrupted_exit_code();
// The process's exit code: once gpuctl was interrupted it is interrupted_exit_code(), whatever
// the command returned (a failure the interruption caused on the way, or a late success).
int settle_exit_code(int code);

}  // namespace gpuctl::cli
