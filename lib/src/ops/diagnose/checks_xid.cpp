// The node-side checks of GPU faults: xid-errors (the kernel log's Xid and SXid events within
// --since, judged per GPU by the catalogue in gpu/xid.hpp) and ecc-errors (nvidia-smi's ECC,
// page retirement and row remapping records).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "check_support.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;
using gpu::XidAction;

// The page count NVIDIA's RMA policy names for page retirement (pre-Ampere data-center GPUs).
constexpr std::int64_t kRetiredPagesRma = 60;

Severity severity_of(const gpu::XidVerdict& v) {
  if (v.severity == gpu::XidSeverity::unknown) return Severity::error;  // never quarantine on a code we lack
  switch (v.action) {
    case XidAction::ignore: return Severity::info;
    case XidAction::restart_app: return Severity::info;
    case XidAction::update_swfw: return Severity::error;
    case XidAction::reset_gpu:
    case XidAction::restart_bm:
    case XidAction::check_mechanicals:
    case XidAction::contact_support: return Severity::critical;
  }
  return Severity::error;
}

std::vector<std::string> remedy_for(XidAction action, const std::string& node, const std::string& bus, int code) {
  const std::string drain = fmt::format("gpuctl drain {} --ignore-daemonsets --reason 'Xid {} on {}'", node, code, bus);
  const std::string verify = fmt::format("gpuctl uncordon {} --verify", node);
  switch (action) {
    case XidAction::ignore:
    case XidAction::restart_app:
      return {"the application faulted, not the GPU: read the job's logs (the pid and process are in the evidence)"};
    case XidAction::update_swfw:
      return {drain, fmt::format("update {}'s NVIDIA driver and GPU firmware", node), verify};
    case XidAction::reset_gpu: return {drain, fmt::format("ssh {} sudo nvidia-smi -r -i {}", node, bus), verify};
    case XidAction::restart_bm: return {drain, fmt::format("ssh {} sudo reboot", node), verify};
    case XidAction::check_mechanicals:
      return {drain, fmt::format("ssh {} sudo nvidia-smi -q -d POWER,TEMPERATURE -i {}", node, bus),
              "check the GPU's power cables, cooling and seating"};
    case XidAction::contact_support:
      return {fmt::format("gpuctl cordon {} --reason 'Xid {} on {}'", node, code, bus),
              fmt::format("ssh {} sudo nvidia-bug-report.sh", node), "open a case with NVIDIA or the vendor (RMA)"};
  }
  return {drain};
}

// "GPU 3 (0000:3B:00.0)" when the probe's GPUs know the bus id, else the bus id.
std::string gpu_at(const gpu::NodeGpuReport& report, const std::string& bus) {
  for (const auto& g : report.gpus) {
    if (!g.pci_bus_id) continue;
    auto canon = gpu::canonical_pci_bus_id(*g.pci_bus_id);
    if (canon && *canon == bus) return fmt::format("GPU {} ({})", g.index, bus);
  }
  return bus;
}

// The events within the window; those without a readable time count (they are of this boot).
std::vector<gpu::KernelLogEvent> within_window(const Snapshot& snapshot, const std::vector<gpu::KernelLogEvent>& all) {
  const auto since = std::chrono::system_clock::to_time_t(snapshot.now - snapshot.settings.since);
  std::vector<gpu::KernelLogEvent> out;
  for (const auto& e : all) {
    if (!e.unix_time_s || *e.unix_time_s >= since) out.push_back(e);
  }
  return out;
}

Finding xid_finding(const NodeProbe& probe, const gpu::XidVerdict& v, const Snapshot& snapshot) {
  const std::string& node = probe.node;
  const gpu::NodeGpuReport& report = *probe.report;
  const std::string where = v.nvswitch ? "NVSwitch " + v.pci_bus_id : gpu_at(report, v.pci_bus_id);
  const int first_code = v.counts.empty() ? 0 : v.counts.front().code;
  std::string reasons;
  for (const auto& r : v.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
  if (v.reasons.size() > 1) reasons += fmt::format(" (overall: {})", gpu::to_string(v.action));
  Finding f = node_finding(
      "xid-errors", severity_of(v), node,
      fmt::format("{} on {}, last {}: {}", where, node, util::human_duration(snapshot.settings.since), reasons));
  for (const auto& line : v.evidence) {
    f.evidence.push_back(probe_evidence(probe, fmt::format("kernel log ({})", report.facts.kernel_log_source), line));
  }
  f.remedy = remedy_for(v.action, node, v.pci_bus_id, first_code);
  return f;
}

// How to let the next probe read the kernel log: a probe pod sees it only when privileged; over
// ssh, the user needs the journal or dmesg.
std::string kernel_log_remedy(const NodeProbe& probe) {
  if (probe.report->facts.kernel_log_source == "skipped") {
    return fmt::format(
        "gpuctl diagnose --check xid-errors --via pod --probe-privileged -l kubernetes.io/hostname={} "
        "(a privileged probe pod reads the host's kernel log; its namespace must admit privileged pods)",
        probe.node);
  }
  if (probe.via == "pod")
    return "the privileged probe pod could not read the kernel log: check the node's journal and dmesg";
  return "give gpuctl's ssh user access to the kernel log (root, or the systemd-journal group)";
}

}  // namespace

std::vector<Finding> check_xid_errors(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    const gpu::NodeGpuReport& report = *probe->report;
    if (!report.facts.kernel_log_error.empty()) {
      Finding f =
          node_finding("xid-errors", Severity::info, name,
                       fmt::format("{}: the kernel log could not be read, so Xid errors are not known there", name));
      f.evidence.push_back(probe_evidence(*probe, "kernel log", report.facts.kernel_log_error));
      f.remedy = {kernel_log_remedy(*probe)};
      out.push_back(std::move(f));
    }
    std::vector<gpu::KernelLogEvent> events = within_window(snapshot, report.facts.kernel_events);
    for (const auto& verdict : gpu::classify_xid_events(events, snapshot.settings.xid)) {
      if (verdict.action == XidAction::ignore && verdict.severity == gpu::XidSeverity::informational) continue;
      out.push_back(xid_finding(*probe, verdict, snapshot));
    }
  }
  return out;
}

std::vector<Finding> check_ecc_errors(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    for (const auto& gpu : probe->report->gpus) {
      Severity worst = Severity::info;
      std::vector<std::string> why;
      std::vector<std::string> evidence;
      auto add = [&](Severity s, std::string reason, std::string field) {
        worst = std::max(worst, s);
        why.push_back(std::move(reason));
        evidence.push_back(std::move(field));
      };
      const auto& rows = gpu.remapped_rows;
      if (rows.failure && *rows.failure)
        add(Severity::critical, "row remapping failed: the GPU needs service (RMA)", "remapped_rows.failure=Yes");
      if (rows.pending && *rows.pending)
        add(Severity::error, "a row remap waits for a GPU reset", "remapped_rows.pending=Yes");
      if (gpu.retired_pages.pending && *gpu.retired_pages.pending)
        add(Severity::error, "a page retirement waits for a GPU reset", "retired_pages.pending=Yes");
      std::int64_t retired =
          gpu.retired_pages.single_bit_count.value_or(0) + gpu.retired_pages.double_bit_count.value_or(0);
      if (retired >= kRetiredPagesRma)
        add(Severity::error, fmt::format("{} pages retired, at NVIDIA's RMA limit of {}", retired, kRetiredPagesRma),
            fmt::format("retired_pages={}", retired));
      std::int64_t volatile_unc = gpu.ecc.volatile_counts.uncorrected.value_or(0);
      std::int64_t aggregate_unc = gpu.ecc.aggregate_counts.uncorrected.value_or(0);
      if (volatile_unc > 0) {
        add(Severity::error, fmt::format("{} uncorrectable ECC error(s) since the driver loaded", volatile_unc),
            fmt::format("ecc_errors.volatile.uncorrected={}", volatile_unc));
      } else if (aggregate_unc > 0) {
        add(Severity::warning, fmt::format("{} uncorrectable ECC error(s) over the GPU's life", aggregate_unc),
            fmt::format("ecc_errors.aggregate.uncorrected={}", aggregate_unc));
      }
      if (why.empty()) continue;
      Finding f = node_finding("ecc-errors", worst, name,
                               fmt::format("{} of {}: {}", gpu_name(gpu), name, fmt::join(why, "; ")));
      for (auto& e : evidence) f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x", std::move(e)));
      const std::string bus = gpu.pci_bus_id ? *gpu.pci_bus_id : std::to_string(gpu.index);
      f.remedy = {
          fmt::format("gpuctl drain {} --ignore-daemonsets --reason 'ECC on {}'", name, bus),
          worst == Severity::critical
              ? fmt::format("ssh {} sudo nvidia-bug-report.sh; RMA the GPU", name)
              : fmt::format("ssh {} sudo nvidia-smi -r -i {}   (applies pending remaps/retirements)", name, bus),
          fmt::format("gpuctl uncordon {} --verify", name)};
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
