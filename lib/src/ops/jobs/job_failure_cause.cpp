// What one failed pod says about its GPU, the pure part (job_failure_cause.hpp): which container
// failed and how, and which line of its termination message or log names a GPU cause. The reads
// are in job_failure_cause_read.cpp.
#include "gpuctl/ops/jobs/job_failure_cause.hpp"

#include <nlohmann/json.hpp>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

std::string_view trimmed(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// The line, trimmed and cut to kGpuCauseEvidenceMaxChars at a UTF-8 character boundary.
std::string evidence_of(std::string_view line) {
  line = trimmed(line);
  if (line.size() <= kGpuCauseEvidenceMaxChars) return std::string(line);
  std::size_t cut = kGpuCauseEvidenceMaxChars - 3;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(trimmed(line.substr(0, cut))) + "...";
}

// Calls `each` with the lines of `text` from the last to the first, until it answers true. A
// carriage return ends a line too: progress bars redraw themselves with it.
template <typename Each>
void each_line_backwards(std::string_view text, Each each) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = text.find_last_of("\r\n", end - 1);
    std::size_t from = start == std::string_view::npos ? 0 : start + 1;
    if (from < end && each(text.substr(from, end - from))) return;
    if (start == std::string_view::npos) return;
    end = start;
  }
}

const json* terminated_at(const json& status, const char* state) {
  const json& s = kube::field(status, state);
  const json& t = kube::field(s, "terminated");
  return t.is_object() ? &t : nullptr;
}

}  // namespace

std::string_view to_string(GpuCauseSource source) {
  return source == GpuCauseSource::log ? "log" : "termination message";
}

std::optional<GpuCauseFinding> classify_log_tail(std::string_view log) {
  std::optional<GpuCauseFinding> found;
  each_line_backwards(log, [&](std::string_view line) {
    auto what = classify_gpu_failure(line);
    if (what) found = GpuCauseFinding{*what, GpuCauseSource::log, evidence_of(line)};
    return what.has_value();
  });
  return found;
}

std::optional<GpuCauseFinding> classify_termination_message(std::string_view message) {
  // The whole message decides, as it always has (a needle pair may span two lines); the line
  // quoted is the last one that names the same cause on its own, else the last one.
  auto what = classify_gpu_failure(message);
  if (!what) return std::nullopt;
  GpuCauseFinding finding{*what, GpuCauseSource::termination_message, {}};
  if (auto line = classify_log_tail(message); line && line->cause.id == what->id) {
    finding.evidence = std::move(line->evidence);
  } else {
    each_line_backwards(message, [&](std::string_view l) {
      finding.evidence = evidence_of(l);
      return !finding.evidence.empty();
    });
  }
  return finding;
}

std::optional<FailedAttempt> failed_attempt_of(const json& pod) {
  std::optional<FailedAttempt> best;
  util::TimePoint best_finished{};
  const json& status = kube::field(pod, "status");
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const auto& cs : kube::array_field(status, list)) {
      // The current instance first; the previous one when the current has not failed.
      for (const char* state : {"state", "lastState"}) {
        const json* t = terminated_at(cs, state);
        if (t == nullptr || !kube::field(*t, "exitCode").is_number_integer()) continue;
        int code = kube::field(*t, "exitCode").get<int>();
        if (code == 0) continue;
        FailedAttempt a;
        a.pod = kube::name_of(pod);
        a.node = kube::string_field(kube::field(pod, "spec"), "nodeName");
        a.container = kube::string_field(cs, "name");
        a.exit_code = code;
        a.termination_reason = kube::string_field(*t, "reason");
        a.termination_message = kube::string_field(*t, "message");
        a.finished_at = kube::string_field(*t, "finishedAt");
        a.previous_instance = std::string_view(state) == "lastState";
        auto finished = util::parse_rfc3339(a.finished_at).value_or(util::TimePoint{});
        if (!best || finished > best_finished) {
          a.gpu_cause = classify_termination_message(a.termination_message);
          best = std::move(a);
          best_finished = finished;
        }
        break;
      }
    }
  }
  return best;
}

json to_json(const GpuCauseFinding& f) {
  return {{"id", f.cause.id},
          {"cause", f.cause.cause},
          {"hint", f.cause.hint},
          {"source", to_string(f.source)},
          {"evidence", f.evidence}};
}

}  // namespace gpuctl::ops
