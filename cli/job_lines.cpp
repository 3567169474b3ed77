#include "job_lines.hpp"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/util/time.hpp"

namespace gpuctl::cli {

std::string job_result_line(const ops::JobSummary& s) {
  std::string where = s.nodes.empty() ? "" : fmt::format(" on {}", fmt::join(s.nodes, ","));
  std::string took = s.duration_seconds ? " in " + util::human_duration(std::chrono::seconds(*s.duration_seconds)) : "";
  if (s.phase == ops::JobPhase::succeeded)
    return fmt::format("job {}/{} succeeded{}{}", s.namespace_name, s.name, took, where);
  std::string why = s.reason;
  std::string tag;
  if (s.failure) {
    tag = s.failure->reason.empty() ? "" : " (" + s.failure->reason + ")";
    if (s.failure->exit_code) {
      why = fmt::format("container {} of pod {} exited with code {}{}", s.failure->container, s.failure->pod,
                        *s.failure->exit_code,
                        s.failure->termination_reason.empty() ? "" : " (" + s.failure->termination_reason + ")");
      if (s.failure->gpu_cause) why += "; " + ops::gpu_cause_text(*s.failure);
    } else if (why.empty()) {
      why = s.failure->message;
    }
  }
  return fmt::format("job {}/{} failed{}{}{}: {}", s.namespace_name, s.name, tag, took, where,
                     why.empty() ? "no reason given" : why);
}

std::string progress_line(const ops::JobSummary& s) {
  std::string line = fmt::format("job {}/{}: {}", s.namespace_name, s.name, ops::to_string(s.phase));
  if (!s.reason.empty()) line += ": " + s.reason;
  if (s.phase == ops::JobPhase::running && !s.nodes.empty()) line += fmt::format(" on {}", fmt::join(s.nodes, ","));
  return line;
}

std::string job_state_line(const ops::JobSummary& s) { return s.finished ? job_result_line(s) : progress_line(s); }

}  // namespace gpuctl::cli
