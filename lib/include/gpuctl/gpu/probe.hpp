#pragma once
// The GPU probe: one fixed POSIX sh script that gpuctl runs on every GPU node through the system
// ssh, and the parser of what it prints. The script is a constant: no node name, label or cluster
// data is ever spliced into it, so nothing a cluster says can change what runs on a node.
//
// What the script does, in one connection (every part optional: a node without one still answers
// the rest):
//   1. the kernel log's NVIDIA lines of the current boot, the last 2,000 (step "kernel"):
//      `journalctl -k -b -o short-iso` when the journal holds kernel messages, else
//      `dmesg --time-format iso`, else plain `dmesg` (whose error is kept when it is refused);
//      then the node's clock and uptime, which turn dmesg's seconds-since-boot into times;
//   2. the NVSwitch device count, and on NVSwitch systems whether nv-fabricmanager runs (step
//      "fabricmanager", `pgrep -x nv-fabricmanager`);
//   3. `nvidia-smi -q -x` (step "all");
//   4. unless nvidia-smi is missing, `nvidia-smi -L` (step "list": MIG profile names and UUIDs,
//      and a cross-check of the GPU count);
//   5. if step 3 answered (exit 0 or 14, the infoROM warning), `nvidia-smi nvlink -s` (step
//      "nvlink");
//   6. otherwise it enumerates the GPUs (indices from `nvidia-smi -L`, else one per /dev/nvidia[0-9]*
//      node) and runs `nvidia-smi -q -x -i N` for each (steps "gpu-N"), so that one broken GPU,
//      which makes the whole query fail, does not hide the healthy ones (gpustat#125, nvitop#45);
//   7. and when no GPU answered in XML either (builds without XML support), the `--query-gpu`
//      CSV (step "csv"), and when that fails too, the `-q` text (step "text").
// The kernel log comes first: a hung nvidia-smi (a GPU off the bus) must not hide the Xid that
// explains it.
//
// Output framing. Every line the script prints starts with one of:
//   "@@gpuctl-probe-v1@@ "  a control line: "start", "begin <step>", "end <step> rc=<n>",
//                           "indices <list|dev|none> <n>...", "kernel-source <journal|dmesg-iso|
//                           dmesg|none|skipped>" (skipped: GPUCTL_PROBE_UNPRIVILEGED=1 in the
//                           environment, an unprivileged probe pod), "clock <unix seconds> <uptime seconds>",
//                           "nvswitches <n>", "done";
//   "o "                    one line of the current step's stdout;
//   "e "                    one line of the current step's stderr (printed after its stdout).
// A content line can therefore never be taken for a control line, whatever nvidia-smi prints.
// A step's stderr is collected whole and printed after its stdout, so the two never interleave.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/gpu/gpu_info.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"
#include "gpuctl/gpu/reported.hpp"
#include "gpuctl/gpu/xid.hpp"

namespace gpuctl::gpu {

// The marker that starts every control line of the probe output.
inline constexpr std::string_view kProbeMarker = "@@gpuctl-probe-v1@@";

// The probe as a POSIX sh script: one line (no newlines, no single quotes, no '!', no
// backslashes), for `sh -c`. Runs under dash, bash, busybox ash.
std::string_view probe_script();

// What to hand to ssh as the single remote-command argument: "sh -c '<probe_script()>'". ssh gives
// this string to the remote user's login shell; the wrapper makes it work whether that shell is
// sh, bash, zsh, csh/tcsh or fish.
std::string probe_remote_command();

// One framed step of the probe output.
struct ProbeStep {
  std::string name;              // "all", "list", "gpu-3"
  std::string stdout_text;       // the "o " lines, prefix removed, joined with '\n'
  std::string stderr_text;       // the "e " lines
  std::optional<int> exit_code;  // absent when the step never ended (cut off)
};

// The control-level reading of probe output, before any nvidia-smi output is interpreted.
struct ProbeTranscript {
  bool started = false;   // saw "start"
  bool finished = false;  // saw "done"
  std::vector<ProbeStep> steps;
  std::string indices_source;            // "list", "dev", "none", or empty when not printed
  std::vector<int> indices;              // the per-GPU fallback's indices
  std::vector<std::string> stray_lines;  // lines outside the framing (shell noise, motd, garbage)
  std::string kernel_source;             // "journal", "dmesg-iso", "dmesg", "none", "skipped"; empty: not said
  std::optional<std::int64_t> clock_unix_s;
  std::optional<double> uptime_s;
  std::optional<int> nvswitches;
};
ProbeTranscript parse_probe_transcript(std::string_view stdout_text);

enum class ProbeStatus {
  ok,       // every GPU answered
  partial,  // some GPUs answered, some failed (see failed_gpus)
  failed,   // no GPU answered (see kind)
};
std::string_view to_string(ProbeStatus status);

// A GPU the node has but that could not be queried.
struct FailedGpu {
  int index = -1;                    // -1 when only the bus id is known
  Reported<std::string> pci_bus_id;  // from the error message when it names one
  Reported<std::string> uuid;        // from `nvidia-smi -L`, when it still lists the GPU
  Reported<std::string> product_name;
  NvsmiDiagnosis failure;
};

// What the probe read besides nvidia-smi's GPU queries.
struct NodeFacts {
  // The kernel log: where it came from ("journal", "dmesg-iso", "dmesg", "none", "skipped" in an
  // unprivileged probe pod; empty when the probe did not say), why it could not be read, and its NVIDIA events (unix times filled in
  // from the node's clock for dmesg's seconds-since-boot).
  std::string kernel_log_source;
  std::string kernel_log_error;
  std::vector<KernelLogEvent> kernel_events;
  std::optional<std::int64_t> clock_unix_s;  // the node's clock when probed
  std::optional<int> nvswitches;             // /dev/nvidia-nvswitchN nodes
  // On NVSwitch systems: whether nv-fabricmanager runs (nullopt: not checked or unknown).
  std::optional<bool> fabric_manager_running;
  std::optional<std::vector<NvlinkGpuStatus>> nvlinks;  // absent when `nvidia-smi nvlink -s` did not answer
};

struct NodeGpuReport {
  ProbeStatus status = ProbeStatus::failed;
  // ok when status is ok; the node failure when failed; for partial, the first failed GPU's kind.
  NvsmiErrorKind kind = NvsmiErrorKind::unknown_error;
  std::string message;  // one line for a person
  Reported<std::string> driver_version;
  Reported<std::string> cuda_version;
  std::vector<GpuInfo> gpus;  // the GPUs that answered, by index
  std::vector<FailedGpu> failed_gpus;
  std::vector<NvsmiDiagnosis> step_failures;  // failed steps, for diagnose (e.g. the whole query)
  std::vector<std::string> warnings;
  bool truncated = false;  // the output was cut off (caller's flag, or no "done" line)
  // How GPUs were found: "query" (the whole query worked), "list" (per index, indices from -L),
  // "dev" (per index, counted /dev/nvidiaN), "csv" (the --query-gpu CSV: no XML), "text" (the
  // -q text: neither XML nor CSV), "none" (nothing to enumerate).
  std::string enumeration;
  NodeFacts facts;
};

// "ok", "partial", or the NvsmiErrorKind name of a failed node.
std::string node_classification(const NodeGpuReport& report);

// Reads what the probe printed. `exit_code` is the remote command's exit status as ssh reported
// it (the script itself exits 0); `stderr_text` is ssh's stderr. Set `truncated` when the caller
// cut the output short (output cap) or killed the probe at its deadline: the step that was running
// is then reported as truncated instead of failed. ssh-level failures (exit 255, unreachable, auth)
// are the caller's to classify before calling this. Never fails: every input maps to a report.
NodeGpuReport parse_probe_output(int exit_code, std::string_view stdout_text, std::string_view stderr_text,
                                 bool truncated = false);

void to_json(nlohmann::json& j, const FailedGpu& v);
void to_json(nlohmann::json& j, const NvlinkGpuStatus& v);
void to_json(nlohmann::json& j, const NodeFacts& v);
void to_json(nlohmann::json& j, const NodeGpuReport& v);

}  // namespace gpuctl::gpu
