#pragma once
// NVIDIA Xid (GPU) and SXid (NVSwitch) errors: the catalogue kept as data (xid_catalog.cpp), the
// kernel-log reader that finds them (kernel_log.cpp) and the pure classifier that folds them per
// GPU into a verdict with NVIDIA's recommended action. Nothing here runs a process or reads a
// file: the probe brings the text, `diagnose` turns the verdicts into findings.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gpuctl::gpu {

// What an Xid says about where the fault lies. `application` codes are the ones the NVIDIA device
// plugin ignores for health (internal/rm/health.go): the app crashed, the GPU is fine.
enum class XidSeverity {
  informational,  // a record, no fault (e.g. 63 row remap done, 154 recovery summary)
  application,    // the user's program faulted (13, 31, 43, 45, 68, 109)
  driver,         // driver or firmware (GSP) fault: a reset or update usually clears it
  hardware,       // the GPU, its memory, its link or its board
  unknown,        // a code the catalogue does not hold
};
std::string_view to_string(XidSeverity severity);

// NVIDIA's resolution buckets (Xid catalogue, sheet "Resolution Buckets"), in rising order of
// cost, so the worst action of many events is their maximum.
enum class XidAction {
  ignore,             // IGNORE
  restart_app,        // RESTART_APP
  update_swfw,        // UPDATE_SWFW: driver/firmware update
  reset_gpu,          // RESET_GPU: nvidia-smi -r, or what a node reboot does
  restart_bm,         // RESTART_BM (RESTART_VM on a guest): reboot the node
  check_mechanicals,  // CHECK_MECHANICALS: power, cooling, seating
  contact_support,    // CONTACT_SUPPORT: field diagnostics, RMA
};
// The bucket name as NVIDIA writes it ("RESTART_APP", "RESET_GPU", ...).
std::string_view to_string(XidAction action);

struct XidInfo {
  int code = 0;
  std::string_view mnemonic;  // NVIDIA's short name, e.g. "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
  std::string_view meaning;   // one line for a person
  XidSeverity severity = XidSeverity::unknown;
  XidAction action = XidAction::contact_support;  // NVIDIA's immediate bucket (or the overlay's, see source)
  std::string_view source;                        // where the row comes from
};

// An NVSwitch SXid (Fabric Manager user guide, "NVSwitch SXid errors"). Whether one occurrence is
// fatal is printed on its headline ("Fatal" / "Non-fatal") and that decides; `fatal` is the
// catalogue's verdict, used when only the follow-up lines ("Data {...}") made it into the log.
struct SxidInfo {
  int code = 0;
  std::string_view meaning;
  bool fatal = false;
  std::string_view source;
};

std::span<const XidInfo> xid_catalog();
std::span<const SxidInfo> sxid_catalog();
const XidInfo* find_xid(int code);    // nullptr when the catalogue lacks it
const SxidInfo* find_sxid(int code);  // nullptr when the catalogue lacks it
// The Xids the NVIDIA device plugin never marks a GPU unhealthy for (13, 31, 43, 45, 68, 109).
bool device_plugin_ignores(int xid);

// Xid 154 (R565+) states the driver's recovery action; NVML's nvmlGpuRecoveryAction_t values.
enum class GpuRecoveryAction {
  none = 0,
  gpu_reset = 1,  // "GPU Reset Required" (Blackwell consumer parts print "PF FLR")
  node_reboot = 2,
  drain_p2p = 3,
  drain_and_reset = 4,
};
std::string_view to_string(GpuRecoveryAction action);
// The action a 154 line changes TO: "... changed from 0x0 (None) to 0x2 (Node Reboot Required)".
// The label decides when present (the driver's words), else the hex value; nullopt when neither
// is readable, so a guess never replaces what the driver said.
std::optional<GpuRecoveryAction> parse_recovery_action(std::string_view text);
XidAction to_xid_action(GpuRecoveryAction action);

// --- Kernel log ---

enum class KernelLogEventKind {
  xid,                     // "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., <message>"
  sxid,                    // "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 ..."
  fallen_off_bus,          // "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus." (no Xid on the line)
  rm_init_adapter_failed,  // "NVRM: GPU 0000:04:00.0: RmInitAdapter failed! (0x63:0x0:1905)"
};
std::string_view to_string(KernelLogEventKind kind);

struct KernelLogEvent {
  KernelLogEventKind kind = KernelLogEventKind::xid;
  std::optional<int> code;                // Xid or SXid number
  std::optional<std::string> pci_bus_id;  // canonical_pci_bus_id: "0000:3B:00.0"
  std::optional<std::string> device;      // "nvidia-nvswitch3" for SXid lines
  std::optional<long> pid;                // Xid lines since R460; absent for pid='<unknown>'
  std::optional<std::string> process_name;
  // SXid: true for "Fatal", false for "Non-fatal"; nullopt on the follow-up lines of one report
  // ("Data {...}", "Severity 1 Engine instance ...").
  std::optional<bool> sxid_fatal;
  std::optional<GpuRecoveryAction> recovery_action;  // Xid 154
  std::string time_text;                             // the timestamp as printed, may be empty
  std::optional<double> monotonic_s;                 // "[ 1843.308145]": seconds since boot
  std::optional<std::int64_t> unix_time_s;           // ISO forms with a zone (dmesg --time-format iso, short-iso)
  std::string message;                               // text after the code / after "NVRM:"
  std::string line;                                  // the line verbatim (sanitized, bounded)
  int line_number = 0;                               // 1-based
};

// Finds the NVIDIA GPU and NVSwitch events in kernel-log text: `journalctl -k` (default,
// short-iso, short-precise), `dmesg` ("[  123.456789]", -T, --time-format iso, --decode) and
// syslog forms. Other lines are ignored; never fails. At most kMaxKernelLogEvents are kept (the
// latest ones: the newest evidence matters most).
inline constexpr std::size_t kMaxKernelLogEvents = 10000;
std::vector<KernelLogEvent> parse_kernel_log(std::string_view text);

// --- Classifier ---

// The repeat rules, defaults from the sources (anchors-2026 §3.2, §3.4).
struct XidPolicy {
  // The same hardware Xid this many times on one GPU: the fault recurs, a reset did not hold, so
  // at least a reboot (gpud escalates after repeats; NVIDIA's WORKFLOW_XID_48 the same).
  int hardware_repeat = 2;
  // Fatal Xids this many times on one GPU: CONTACT_SUPPORT (NVSentinel health-events-analyzer).
  int contact_support_repeat = 5;
  // Xid 13/31 from this many distinct processes on one GPU and on no other GPU of the node: the
  // GPU, not the app, is suspect (NVIDIA WORKFLOW_XID_13/31).
  int app_distinct_processes = 2;
};

struct XidCount {
  KernelLogEventKind kind = KernelLogEventKind::xid;
  int code = 0;  // 0 for fallen_off_bus / rm_init_adapter_failed
  int count = 0;
};

// One GPU's (or one NVSwitch's) verdict over a log.
struct XidVerdict {
  std::string pci_bus_id;  // canonical; "unknown" when the lines named none
  bool nvswitch = false;
  XidAction action = XidAction::ignore;  // the worst, after Xid 154 and the repeat rules
  XidSeverity severity = XidSeverity::informational;
  std::optional<GpuRecoveryAction> stated_recovery;  // the last Xid 154 on this GPU
  std::vector<XidCount> counts;                      // per code, in first-seen order
  std::vector<std::string> reasons;                  // why the action, one line each
  std::vector<std::string> evidence;                 // a few decisive lines verbatim
  std::string first_time;                            // time_text of the first and last event
  std::string last_time;
};

// Folds events per PCI bus id, in the order each GPU first appears.
std::vector<XidVerdict> classify_xid_events(std::span<const KernelLogEvent> events, const XidPolicy& policy = {});

void to_json(nlohmann::json& j, const KernelLogEvent& v);
void to_json(nlohmann::json& j, const XidVerdict& v);

}  // namespace gpuctl::gpu
