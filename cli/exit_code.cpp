#include "exit_code.hpp"

#include <csignal>

#include "gpuctl/util/cancel.hpp"

namespace gpuctl::cli {

const std::vector<ExitCodeDoc>& exit_code_docs() {
  static const std::vector<ExitCodeDoc> docs = {
      {"0", "success"},
      {"1", "failure talking to the cluster or carrying out the operation (also when it failed for some objects)"},
      {"2", "usage error: unknown flags, bad arguments, invalid specs, manifests or files; a change that needs --yes"},
      {"3", "refused by a pre-flight check (submit, diagnose --quarantine's circuit breaker): nothing was changed"},
      {"4", "diagnose found something at or above --fail-on"},
      {"5", "diagnose found nothing at or above --fail-on, but some checks could not run"},
      {"6",
       "the cluster does not serve an API the request needs (taint --device: DeviceTaintRules; submit -f: JobSets "
       "or PyTorchJobs); nothing was changed"},
      {"1-255", "submit --wait/--follow: the job failed; its failed container's exit code"},
      {"124", "submit --wait/--follow: the job ran past --active-deadline"},
      {"125", "submit --wait/--follow: the job failed with no container exit code"},
      {"126", "submit --wait/--follow: a pre-flight check refused the job; nothing was created"},
      {"130", "interrupted by Ctrl-C (143: by SIGTERM); nothing half-done is left behind"},
  };
  return docs;
}

ExitCode exit_code_for(const Error& error) {
  switch (error.code) {
    case Errc::invalid_argument: return ExitCode::usage;
    case Errc::not_served: return ExitCode::not_served;
    case Errc::config:
    case Errc::transport:
    case Errc::api:
    case Errc::io:
    case Errc::parse:
    case Errc::process:
    case Errc::timeout:
    case Errc::internal: return ExitCode::failure;
    case Errc::cancelled: return interrupted_exit_code();
  }
  return ExitCode::failure;
}

ExitCode interrupted_exit_code() {
  return util::cancel_signal() == SIGTERM ? ExitCode::terminated : ExitCode::interrupted;
}

int settle_exit_code(int code) {
  // Even a command that got to its end: the user asked it to stop, and a script must not read
  // a 0 it cannot tell from a complete run.
  if (!util::cancelled()) return code;
  return static_cast<int>(interrupted_exit_code());
}

ExitCode exit_code_of_container(int container_exit_code) {
  if (container_exit_code < 1 || container_exit_code > 255) return ExitCode::job_failed;
  return static_cast<ExitCode>(container_exit_code);
}

ExitCode exit_code_for_job(bool succeeded, std::string_view failure_reason, std::optional<int> container_exit_code) {
  if (succeeded) return ExitCode::ok;
  if (failure_reason == "DeadlineExceeded") return ExitCode::job_deadline_exceeded;
  if (container_exit_code) return exit_code_of_container(*container_exit_code);
  return ExitCode::job_failed;
}

ExitCode exit_code_for_diagnosis(bool found_at_threshold, bool some_checks_skipped) {
  if (found_at_threshold) return ExitCode::findings;
  return some_checks_skipped ? ExitCode::incomplete : ExitCode::ok;
}

}  // namespace gpuctl::cli
