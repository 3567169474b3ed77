#pragma once
// Failure classification for one nvidia-smi run (exit code + stdout + stderr), and the kernel-log
// lines (NVIDIA Xid, fallen off the bus, RmInitAdapter failed) that `diagnose` reports next to it.
// Pure text processing: nothing here runs a process.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gpuctl::gpu {

enum class NvsmiErrorKind {
  ok,
  driver_not_loaded,         // "couldn't communicate with the NVIDIA driver", NVML library missing, rc 9/12
  driver_library_mismatch,   // "Failed to initialize NVML: Driver/library version mismatch"
  gpu_lost,                  // "GPU is lost", "fallen off the bus", "Unable to determine the device handle", rc 15
  no_devices,                // "No devices were found", rc 6
  insufficient_permissions,  // "Insufficient Permissions", rc 4
  inforom_corrupted,         // "WARNING: infoROM is corrupted at gpu ...", rc 14 (a warning: data still comes)
  nvml_unknown_error,        // "Failed to initialize NVML: Unknown Error" (e.g. a container lost its devices)
  nvidia_smi_missing,        // rc 127/126, "nvidia-smi: not found", "command not found"
  garbage,                   // exit 0 but the output parses as nothing gpuctl knows
  truncated,                 // the output was cut off (output cap or deadline) before nvidia-smi finished
  unknown_error,             // anything else that failed
};

// "ok", "driver_not_loaded", ... (stable names: JSON and `--output` use them).
std::string_view to_string(NvsmiErrorKind kind);

// The verdict on one nvidia-smi run.
struct NvsmiDiagnosis {
  NvsmiErrorKind kind = NvsmiErrorKind::ok;
  // One line for a person, quoting the decisive line, e.g.
  // "GPU 0000:02:00.0 is lost: \"Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. ...\"".
  std::string message;
  // The decisive line(s) of raw output (at most a few hundred bytes), for `-o json` and bug reports.
  std::string excerpt;
  // PCI bus id named by the message, canonical form (see canonical_pci_bus_id), if any.
  std::optional<std::string> pci_bus_id;
  std::optional<int> exit_code;
  // True when the problem is reported next to otherwise good output (infoROM corrupted):
  // callers keep the data and attach the message as a warning.
  bool warning_only = false;

  bool ok() const { return kind == NvsmiErrorKind::ok; }
};

// Classifies an nvidia-smi run from what it printed; the exit code decides when no known message
// is found (man page RETURN VALUE table; 126/127 from the shell). A run that exited 0 with no
// error text is ok here; deciding that its output is garbage is the parsers' job.
// Pass exit_code = std::nullopt when it is unknown (e.g. only a pasted message is at hand).
NvsmiDiagnosis classify_nvidia_smi_run(std::optional<int> exit_code, std::string_view stdout_text,
                                       std::string_view stderr_text);

// The man page's meaning of an nvidia-smi exit code ("A query to find an object was
// unsuccessful" for 6), or empty for codes it does not list.
std::string_view nvidia_smi_exit_code_meaning(int exit_code);

// --- Kernel log (dmesg, journalctl -k, /dev/kmsg) ---

enum class KernelGpuEventKind {
  xid,                     // "NVRM: Xid (PCI:0000:38:00): 13, pid=..., name=..., <message>"
  fallen_off_bus,          // "NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus" (may span lines)
  rm_init_adapter_failed,  // "NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)"
  probe_failed,            // "NVRM: The NVIDIA probe routine was not called for 3 device(s)" (nouveau owns
                           // them) or "... probe routine failed for 1 device(s)"
};
std::string_view to_string(KernelGpuEventKind kind);

struct KernelGpuEvent {
  KernelGpuEventKind kind = KernelGpuEventKind::xid;
  std::optional<int> xid;                 // kind == xid
  std::optional<std::string> pci_bus_id;  // canonical (see canonical_pci_bus_id)
  std::optional<long> pid;                // Xid lines since R460 carry the process
  std::optional<std::string> process_name;
  std::string message;    // text after the Xid number / the NVRM message
  std::string timestamp;  // whatever preceded "NVRM:" on the line, trimmed
  int line_number = 0;    // 1-based, first line of the event
};

// Finds NVIDIA GPU events in kernel log text of any common format (dmesg, dmesg -T, dmesg
// --decode --time-format=iso, journalctl, raw /dev/kmsg records). Other lines are ignored.
std::vector<KernelGpuEvent> parse_kernel_gpu_events(std::string_view log_text);

void to_json(nlohmann::json& j, const NvsmiDiagnosis& v);
void to_json(nlohmann::json& j, const KernelGpuEvent& v);

}  // namespace gpuctl::gpu
