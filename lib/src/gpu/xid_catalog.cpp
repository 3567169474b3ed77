// The Xid and SXid catalogues as data, one row per code, each with its source. Written by hand
// from the public catalogues (anchors-2026 §3.1-3.3), never generated or copied:
//   [nv]   NVIDIA Xid catalog, docs.nvidia.com/deploy/xid-errors (analyzing-xid-catalog.html, the
//          spreadsheet's "Xids" sheet): mnemonic, description, immediate resolution bucket. Read
//          through gpud's parsed copy (components/accelerator/nvidia/xid/catalog_generated.go,
//          generated 2025-10-29).
//   [dp]   NVIDIA k8s-device-plugin internal/rm/health.go: the Xids it ignores (app-level).
//   [wf]   the catalog names a workflow, not a bucket (WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR...):
//          the row holds the workflow's first step for a lone occurrence; the classifier applies
//          the pattern rules (repeats, 48 with 63/64).
//   [gc]   the catalog gives no bucket (R575+ codes): gpuctl's choice, from the description.
//   [fm]   NVIDIA Fabric Manager user guide "NVSwitch SXid errors", with gpud's severity overlay
//          (components/accelerator/nvidia/sxid/sxid.go: EventType Fatal/Warning).
// The severity class is gpuctl's reading of the description; `application` is exactly [dp]'s list.
#include <algorithm>
#include <array>

#include "gpuctl/gpu/xid.hpp"

namespace gpuctl::gpu {

namespace {

using S = XidSeverity;
using A = XidAction;

// Sorted by code (find_xid searches it). Unused and display-only codes are left out: an unknown
// code is reported as unknown, with CONTACT_SUPPORT, as NVSentinel maps unknown buckets.
constexpr std::array kXids = {
    XidInfo{8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing (idle timeout)", S::application,
            A::restart_app, "[nv]"},
    XidInfo{11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "invalid or corrupted push buffer stream", S::application,
            A::restart_app, "[nv]"},
    XidInfo{13, "ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception (usually the app went out of bounds)",
            S::application, A::restart_app, "[nv] [dp]"},
    XidInfo{25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "invalid or illegal push buffer stream", S::application,
            A::restart_app, "[nv]"},
    XidInfo{31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault (the app touched a bad address)",
            S::application, A::restart_app, "[nv] [dp]"},
    XidInfo{32, "ROBUST_CHANNEL_PBDMA_ERROR", "invalid or corrupted push buffer stream", S::application, A::restart_app,
            "[nv]"},
    XidInfo{38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "driver firmware error", S::driver, A::ignore, "[nv]"},
    XidInfo{39, "ROBUST_CHANNEL_CE0_ERROR", "copy engine exception", S::application, A::restart_app, "[nv]"},
    XidInfo{40, "ROBUST_CHANNEL_CE1_ERROR", "copy engine exception", S::application, A::restart_app, "[nv]"},
    XidInfo{41, "ROBUST_CHANNEL_CE2_ERROR", "copy engine exception", S::application, A::restart_app, "[nv]"},
    XidInfo{43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (the app's channel was reset)",
            S::application, A::ignore, "[nv] [dp]"},
    XidInfo{44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "graphics engine fault during context switch", S::driver,
            A::ignore, "[nv]"},
    XidInfo{45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
            "preemptive cleanup after earlier errors or a killed app (follows the Xid that caused it)", S::application,
            A::ignore, "[nv] [dp] [wf] WORKFLOW_XID_45: follow the other Xids"},
    XidInfo{46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing (timeout)", S::hardware, A::reset_gpu,
            "[nv]"},
    XidInfo{48, "ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit (uncorrectable) ECC error", S::hardware, A::reset_gpu,
            "[nv] [wf] WORKFLOW_XID_48: alone a reset; with 63/64 drain and reset; repeated, field diag"},
    XidInfo{62, "PMU_HALT_ERROR", "internal micro-controller halt", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory row remapping / page retirement event (recorded)",
            S::informational, A::ignore, "[nv] check for a pending remap (reset to apply)"},
    XidInfo{64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory row remapping / page retirement failure", S::hardware,
            A::reset_gpu, "[nv] investigatory CONTACT_SUPPORT: RMA if the remap failure is confirmed"},
    XidInfo{68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 (video decoder) exception", S::application, A::restart_app,
            "[nv] [dp]"},
    XidInfo{69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error", S::application, A::restart_app, "[nv]"},
    XidInfo{74, "NVLINK_ERROR", "NVLink error (the line's hex fields tell which)", S::hardware, A::reset_gpu,
            "[nv] [wf] WORKFLOW_NVLINK_ERR, investigatory CONTACT_SUPPORT"},
    XidInfo{79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus (PCIe)", S::hardware,
            A::restart_bm, "[nv] investigatory CONTACT_SUPPORT"},
    XidInfo{80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "corrupted data sent to GPU", S::application, A::restart_app, "[nv]"},
    XidInfo{92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", S::hardware, A::ignore,
            "[nv] investigatory CONTACT_SUPPORT"},
    XidInfo{93, "INFOROM_ERASE_LIMIT_EXCEEDED", "non-fatal violation of provisioned InfoROM wear limit",
            S::informational, A::ignore, "[nv]"},
    XidInfo{94, "ROBUST_CHANNEL_CONTAINED_ERROR", "contained ECC error (only the app that used the memory died)",
            S::hardware, A::restart_app, "[nv]"},
    XidInfo{95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained ECC error (every app on the GPU is affected)",
            S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", S::application, A::reset_gpu,
            "[nv] [dp] (the plugin ignores it; NVIDIA's bucket is RESET_GPU)"},
    XidInfo{110, "SEC_FAULT_ERROR", "security fault error", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{119, "GSP_RPC_TIMEOUT", "GSP (GPU system processor) RPC timeout", S::driver, A::reset_gpu, "[nv]"},
    XidInfo{120, "GSP_ERROR", "GSP error", S::driver, A::reset_gpu, "[nv]"},
    XidInfo{121, "C2C_ERROR", "C2C (chip-to-chip) link error", S::hardware, A::ignore,
            "[nv] investigatory CONTACT_SUPPORT"},
    XidInfo{136, "ALI_TRAINING_FAIL", "NVLink training failed", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{143, "GPU_INIT_ERROR", "GPU initialization error", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{144, "NVLINK_SAW_ERROR", "NVLink5 SAW error (IntrInfo decides fatal or not)", S::hardware, A::ignore,
            "[nv] [wf] WORKFLOW_NVLINK5_ERR: the line's Fatal/Nonfatal decides"},
    XidInfo{145, "NVLINK_RLW_ERROR", "NVLink5 RLW error", S::hardware, A::ignore, "[nv] [wf] WORKFLOW_NVLINK5_ERR"},
    XidInfo{146, "NVLINK_TLW_ERROR", "NVLink5 TLW error", S::hardware, A::ignore, "[nv] [wf] WORKFLOW_NVLINK5_ERR"},
    XidInfo{147, "NVLINK_TREX_ERROR", "NVLink5 TREX error", S::hardware, A::ignore, "[nv] [wf] WORKFLOW_NVLINK5_ERR"},
    XidInfo{148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink5 NVLPW_CTRL error", S::hardware, A::ignore,
            "[nv] [wf] WORKFLOW_NVLINK5_ERR"},
    XidInfo{149, "NVLINK_NETIR_ERROR", "NVLink5 NETIR error", S::hardware, A::ignore, "[nv] [wf] WORKFLOW_NVLINK5_ERR"},
    XidInfo{150, "NVLINK_MSE_ERROR", "NVLink5 MSE error", S::hardware, A::ignore, "[nv] [wf] WORKFLOW_NVLINK5_ERR"},
    XidInfo{151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "key rotation error (confidential computing)", S::driver,
            A::restart_bm, "[nv] RESTART_VM"},
    XidInfo{154, "GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed (states what recovery is needed)",
            S::informational, A::ignore, "[nv] XID_154: the stated action decides (parse_recovery_action)"},
    XidInfo{155, "NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error", S::driver, A::reset_gpu, "[nv]"},
    XidInfo{156, "RESOURCE_RETIREMENT_EVENT", "resource retirement event", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{157, "RESOURCE_RETIREMENT_FAILURE", "resource retirement failure", S::hardware, A::ignore,
            "[nv] investigatory CONTACT_SUPPORT"},
    XidInfo{158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout", S::hardware, A::reset_gpu, "[nv]"},
    XidInfo{159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI non-data error", S::driver, A::restart_app,
            "[nv] CHECK_UVM"},
    XidInfo{162, "PSHC_REENGAGED", "power smoothing circuitry re-engaged", S::informational, A::ignore, "[gc]"},
    XidInfo{163, "PSHC_DISENGAGED", "power smoothing circuitry disengaged", S::informational, A::ignore, "[gc]"},
    XidInfo{164, "PSHC_LOW_LIFETIME", "power smoothing circuitry low lifetime reached", S::hardware, A::ignore,
            "[gc] plan a replacement"},
    XidInfo{165, "PSHC_ZERO_LIFETIME", "power smoothing circuitry lifetime exhausted", S::hardware, A::contact_support,
            "[gc]"},
    XidInfo{166, "NVLINK_SECURE_CRYPTO_ERR", "CC traffic before the link was set up for encryption", S::driver,
            A::reset_gpu, "[gc]"},
    XidInfo{167, "PCIE_FATAL_TIMEOUT", "PCIe fatal timeout", S::hardware, A::restart_bm, "[gc]"},
    XidInfo{168, "REDUCED_GPU_MEMORY_CAPACITY", "errors found in the write-protected region (less memory)", S::hardware,
            A::restart_bm, "[gc] NVSentinel: WORKFLOW_XID_168 maps to RESTART_VM"},
    XidInfo{169, "SEC2_HALT_ERROR", "internal micro-controller (SEC2) halt", S::hardware, A::reset_gpu, "[gc]"},
    XidInfo{170, "NVLINK_SECURE_OTHER", "interrupt seen in CC mode", S::driver, A::reset_gpu, "[gc]"},
    XidInfo{171, "UNCORRECTABLE_DRAM_ERROR", "detail of an Xid 48: the error is in DRAM", S::hardware, A::reset_gpu,
            "[gc] as Xid 48"},
    XidInfo{172, "UNCORRECTABLE_SRAM_ERROR", "detail of an Xid 48: the error is in SRAM", S::hardware, A::reset_gpu,
            "[gc] as Xid 48"},
};

// Sorted by code. The codes the guide and gpud's overlay name most; others are unknown.
constexpr std::array kSxids = {
    SxidInfo{10001, "host_priv_error", false, "[fm]"},
    SxidInfo{10002, "host_priv_timeout", false, "[fm]"},
    SxidInfo{11001, "ingress invalid command", true, "[fm]"},
    SxidInfo{11004, "ingress invalid ACL", true, "[fm]"},
    SxidInfo{11012, "single-bit ECC errors (ingress)", false, "[fm]"},
    SxidInfo{12021, "single-bit ECC errors (egress)", false, "[fm]"},
    SxidInfo{12023, "single-bit ECC errors (egress)", false, "[fm]"},
    SxidInfo{12028, "egress non-posted PRIV error", true, "[fm] gpud marks it fatal: NVLink traffic stalls"},
    SxidInfo{14017, "TS ATO timeout", true, "[fm]"},
    SxidInfo{15008, "single-bit ECC errors (route)", false, "[fm]"},
    SxidInfo{19047, "NCISOC header ECC double-bit error", true, "[fm]"},
    SxidInfo{19084, "AN1 heartbeat timeout", true, "[fm]"},
    SxidInfo{20001, "TX replay error", false, "[fm]"},
    SxidInfo{20009, "RX short error rate", false, "[fm]"},
    SxidInfo{20034, "LTSSM fault up (the link went down from active)", true, "[fm]"},
    SxidInfo{22012, "minion link NA interrupt", true, "[fm]"},
    SxidInfo{24007, "sourcetrack timeout", true, "[fm]"},
    SxidInfo{28006, "MC TS crumbstore MCTO", false, "[fm] NVSentinel's e2e: non-fatal, no action"},
};

template <class Row, std::size_t N>
const Row* find_row(const std::array<Row, N>& rows, int code) {
  auto it = std::lower_bound(rows.begin(), rows.end(), code, [](const Row& r, int c) { return r.code < c; });
  return it != rows.end() && it->code == code ? &*it : nullptr;
}

}  // namespace

std::span<const XidInfo> xid_catalog() { return kXids; }
std::span<const SxidInfo> sxid_catalog() { return kSxids; }
const XidInfo* find_xid(int code) { return find_row(kXids, code); }
const SxidInfo* find_sxid(int code) { return find_row(kSxids, code); }

bool device_plugin_ignores(int xid) {
  // internal/rm/health.go's hard-coded list; DRA driver's xidsToSkip is the same.
  constexpr std::array kIgnored = {13, 31, 43, 45, 68, 109};
  return std::find(kIgnored.begin(), kIgnored.end(), xid) != kIgnored.end();
}

std::string_view to_string(XidSeverity severity) {
  switch (severity) {
    case XidSeverity::informational: return "informational";
    case XidSeverity::application: return "application";
    case XidSeverity::driver: return "driver";
    case XidSeverity::hardware: return "hardware";
    case XidSeverity::unknown: return "unknown";
  }
  return "unknown";
}

std::string_view to_string(XidAction action) {
  switch (action) {
    case XidAction::ignore: return "IGNORE";
    case XidAction::restart_app: return "RESTART_APP";
    case XidAction::update_swfw: return "UPDATE_SWFW";
    case XidAction::reset_gpu: return "RESET_GPU";
    case XidAction::restart_bm: return "RESTART_BM";
    case XidAction::check_mechanicals: return "CHECK_MECHANICALS";
    case XidAction::contact_support: return "CONTACT_SUPPORT";
  }
  return "CONTACT_SUPPORT";
}

std::string_view to_string(GpuRecoveryAction action) {
  switch (action) {
    case GpuRecoveryAction::none: return "None";
    case GpuRecoveryAction::gpu_reset: return "GPU Reset Required";
    case GpuRecoveryAction::node_reboot: return "Node Reboot Required";
    case GpuRecoveryAction::drain_p2p: return "Drain P2P";
    case GpuRecoveryAction::drain_and_reset: return "Drain and Reset";
  }
  return "None";
}

XidAction to_xid_action(GpuRecoveryAction action) {
  switch (action) {
    case GpuRecoveryAction::none: return XidAction::ignore;
    case GpuRecoveryAction::gpu_reset:
    case GpuRecoveryAction::drain_p2p:
    case GpuRecoveryAction::drain_and_reset: return XidAction::reset_gpu;
    case GpuRecoveryAction::node_reboot: return XidAction::restart_bm;
  }
  return XidAction::contact_support;
}

}  // namespace gpuctl::gpu
