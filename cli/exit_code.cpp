#include "exit_code.hpp"

namespace gpuctl::cli {

ExitCode exit_code_for(const Error& error) {
  switch (error.code) {
    case Errc::invalid_argument: return ExitCode::usage;
    case Errc::config:
    case Errc::transport:
    case Errc::api:
    case Errc::io:
    case Errc::parse:
    case Errc::process:
    case Errc::timeout:
    case Errc::cancelled:
    case Errc::internal: return ExitCode::failure;
  }
  return ExitCode::failure;
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

}  // namespace gpuctl::cli
