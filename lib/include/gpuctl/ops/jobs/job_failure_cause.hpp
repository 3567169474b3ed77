#pragma once
// What one failed pod says about its GPU: the container that failed (its latest non-zero
// termination), then the GPU cause classified (ops/common/gpu_failure_text.hpp) from its
// termination message first and, when that names none, from the last lines of that container's
// log. Most PyTorch programs print "RuntimeError: CUDA error: out of memory" or "NCCL error ...
// unhandled system error" to stderr and exit 1 with no termination message, so the log is where
// the cause usually is. The classifiers are pure; read_pod_gpu_cause reads one log.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/common/gpu_failure_text.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

enum class GpuCauseSource { termination_message, log };
// "termination message", "log".
std::string_view to_string(GpuCauseSource source);

struct GpuCauseFinding {
  TextClass cause;
  GpuCauseSource source = GpuCauseSource::termination_message;
  // The line that named it, trimmed, at most kGpuCauseEvidenceMaxChars bytes (cut at a UTF-8
  // character boundary, "..." appended).
  std::string evidence;
};

// One pod's failure: its container's latest non-zero termination (init containers too).
struct FailedAttempt {
  std::string pod, node, container;  // node "" when never scheduled
  std::optional<int> exit_code;      // nullopt: the pod failed with no container exiting non-zero
  std::string termination_reason;    // "Error", "OOMKilled", ...
  std::string termination_message;
  std::string finished_at;  // RFC 3339, "" when unknown
  // The failure is the container's previous instance (lastState: it was restarted since, as with
  // restartPolicy OnFailure), so its log is the one read with previous=true.
  bool previous_instance = false;
  std::optional<GpuCauseFinding> gpu_cause;
};

// The longest evidence line kept; the rest of a 500-character PyTorch OOM line says sizes.
inline constexpr std::size_t kGpuCauseEvidenceMaxChars = 240;
// The log lines read for a cause (tailLines): a traceback's end and a few lines after it
// (torchrun's summary, CUDA's advice).
inline constexpr int kGpuCauseLogTailLines = 50;
// The bytes read at most (limitBytes). The kubelet counts them from the first of the tail's
// lines, so the tail is read again with kGpuCauseLogShortTailLines when they run out (a
// progress bar's carriage returns make one "line" megabytes long).
inline constexpr std::int64_t kGpuCauseLogLimitBytes = 256 * 1024;
inline constexpr int kGpuCauseLogShortTailLines = 8;
// How long one log read may take: the API server dials the node's kubelet, and a node that is
// gone can hold it for half a minute. A cause is worth little next to the job's status.
inline constexpr std::chrono::milliseconds kGpuCauseLogTimeout{10000};

// Pure: the termination message's cause; its evidence is the message's last line that names it.
std::optional<GpuCauseFinding> classify_termination_message(std::string_view message);

// Pure: the cause named by the last line of `log` that names one (programs end with their fatal
// error, and what they print after it, torchrun's summary or CUDA's advice, names none). Lines end
// at '\n' or '\r'; a line may start with the kubelet's timestamp. nullopt: no line names one.
std::optional<GpuCauseFinding> classify_log_tail(std::string_view log);

// Pure: the pod's failed container (its latest non-zero termination, init containers too), with
// the termination message's cause when it names one. nullopt when no container exited non-zero.
std::optional<FailedAttempt> failed_attempt_of(const nlohmann::json& pod);

// Reads the last lines of the failed container's log (the right instance: previous=true when it
// has restarted since) and classifies them. A log that cannot be read (403, 404 because the node
// is gone, a kubelet that does not answer within kGpuCauseLogTimeout) is nullopt, not an error;
// only cancellation (Ctrl-C) is.
Result<std::optional<GpuCauseFinding>> read_log_gpu_cause(kube::Client& client, std::string_view ns,
                                                          const FailedAttempt& attempt);

// The GPU cause of one failed pod, for callers that hold a pod (submit --avoid-failed-nodes):
// its termination message first, then its log tail (read_log_gpu_cause). nullopt when no
// container of the pod exited non-zero, or neither text names a GPU cause.
Result<std::optional<GpuCauseFinding>> read_pod_gpu_cause(kube::Client& client, const nlohmann::json& pod);

// The finding in -o json/yaml: {id, cause, hint, source, evidence}.
nlohmann::json to_json(const GpuCauseFinding& finding);

}  // namespace gpuctl::ops
