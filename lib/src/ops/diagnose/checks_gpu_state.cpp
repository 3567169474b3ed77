// The node-side checks of a GPU's state during the probe: gpu-throttled, gpu-memory-high,
// gpu-idle-allocated, pcie-link-degraded, nvlink-down and fabric-manager-down.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "check_support.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

// Clock event reasons that mean the hardware is protecting itself (not idling, not an app
// clock setting, not the power cap a busy GPU normally sits at).
constexpr std::string_view kProtectiveReasons[] = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                                                   "sw_thermal_slowdown"};
// Degrees from the slowdown point at which a GPU counts as at its margin.
constexpr int kSlowdownMarginC = 5;

// Degrees left before the GPU slows down: absolute thresholds, or T.Limit's (Ada and newer).
std::optional<int> degrees_to_slowdown(const gpu::Temperature& t) {
  if (t.gpu_c && t.slowdown_threshold_c) return *t.slowdown_threshold_c - *t.gpu_c;
  if (t.tlimit_margin_c && t.slowdown_tlimit_offset_c) return *t.tlimit_margin_c + *t.slowdown_tlimit_offset_c;
  return std::nullopt;
}

// Computing when probed. A process alone does not count: an idle notebook holds its GPU with one.
bool busy(const gpu::GpuInfo& g) { return g.utilization.gpu_percent.value_or(0) > 0; }
// Working hard enough that its PCIe link should have trained up: a GPU holding a process at 0%
// still runs gen 1 (the real captures show it), so a process alone does not count.
constexpr int kLoadedPercent = 30;
bool loaded(const gpu::GpuInfo& g) { return g.utilization.gpu_percent.value_or(0) >= kLoadedPercent; }

// The non-terminal GPU pods per node and the GPUs they hold.
struct NodePods {
  std::vector<std::string> pods;
  std::int64_t gpus = 0;
};
std::map<std::string, NodePods> gpu_pods_on_nodes(const Snapshot& snapshot) {
  std::map<std::string, NodePods> out;
  for (const auto& pod : snapshot.list(Source::pods)) {
    std::string node = string_field(field(pod, "spec"), "nodeName");
    if (node.empty() || kube::pod_is_terminal(pod) || !is_gpu_pod(pod)) continue;
    out[node].pods.push_back(pod_ref(pod));
    out[node].gpus += gpu_request(pod);
  }
  return out;
}

}  // namespace

std::vector<Finding> check_gpu_throttled(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    for (const auto& gpu : probe->report->gpus) {
      std::vector<std::string> active;
      if (gpu.clocks_event_reasons) {
        for (const auto& r : *gpu.clocks_event_reasons) {
          if (std::find(std::begin(kProtectiveReasons), std::end(kProtectiveReasons), r) !=
              std::end(kProtectiveReasons))
            active.push_back(r);
        }
      }
      auto left = degrees_to_slowdown(gpu.temperature);
      const bool hot = left && *left <= kSlowdownMarginC;
      if (active.empty() && !hot) continue;
      std::vector<std::string> why;
      if (!active.empty()) why.push_back(fmt::format("clocks held down by {}", fmt::join(active, ", ")));
      if (hot) why.push_back(fmt::format("{} C from its slowdown temperature", std::max(*left, 0)));
      Finding f = node_finding("gpu-throttled", Severity::warning, name,
                               fmt::format("{} of {} is throttled: {}", gpu_name(gpu), name, fmt::join(why, "; ")));
      if (!active.empty())
        f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x clocks_event_reasons",
                                            fmt::format("{}", fmt::join(active, ", "))));
      if (gpu.temperature.gpu_c)
        f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x temperature",
                                            fmt::format("gpu_temp={} C", *gpu.temperature.gpu_c)));
      f.remedy = {fmt::format("ssh {} nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER", name),
                  "check the node's cooling (fans, inlet temperature) and power supply; hw_power_brake means the "
                  "board's power brake signal fired"};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_gpu_memory_high(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const int threshold = snapshot.settings.gpu_memory_threshold_percent;
  auto pods = gpu_pods_on_nodes(snapshot);
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    for (const auto& gpu : probe->report->gpus) {
      if (!gpu.memory.used_mib || !gpu.memory.total_mib || *gpu.memory.total_mib <= 0) continue;
      const std::int64_t percent = *gpu.memory.used_mib * 100 / *gpu.memory.total_mib;
      if (percent < threshold) continue;
      const auto& holders = pods[name].pods;
      Finding f = node_finding(
          "gpu-memory-high", Severity::warning, name,
          fmt::format("{} of {}: {}% of its memory in use ({} of {} MiB, threshold {}%){}", gpu_name(gpu), name,
                      percent, *gpu.memory.used_mib, *gpu.memory.total_mib, threshold,
                      holders.empty() ? std::string("; no pod holds a GPU there (a process outside Kubernetes?)")
                                      : "; GPU pods on the node: " + first_few(holders)));
      f.evidence.push_back(
          probe_evidence(*probe, "nvidia-smi -q -x fb_memory_usage",
                         fmt::format("used={} MiB total={} MiB", *gpu.memory.used_mib, *gpu.memory.total_mib)));
      f.remedy = {fmt::format("gpuctl gpus {}", name), "look for a leak or a batch size too large in the pods named"};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_gpu_idle_allocated(const Snapshot& snapshot) {
  std::vector<Finding> out;
  auto pods = gpu_pods_on_nodes(snapshot);
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    const NodePods& held = pods[name];
    if (held.gpus <= 0 || probe->report->gpus.empty()) continue;
    const auto busy_gpus = static_cast<std::int64_t>(std::count_if(
        probe->report->gpus.begin(), probe->report->gpus.end(), [](const gpu::GpuInfo& g) { return busy(g); }));
    if (busy_gpus >= held.gpus) continue;
    Finding f =
        node_finding("gpu-idle-allocated", Severity::info, name,
                     fmt::format("{}: pods hold {} GPU(s) but only {} were busy during the probe: capacity paid "
                                 "for and unused ({})",
                                 name, held.gpus, busy_gpus, first_few(held.pods)));
    f.evidence.push_back(
        probe_evidence(*probe, "nvidia-smi -q -x utilization",
                       fmt::format("{} of {} GPUs at 0% with no process", probe->report->gpus.size() - busy_gpus,
                                   probe->report->gpus.size())));
    f.remedy = {fmt::format("gpuctl gpus {}", name),
                "ask the pods' owners; a job waiting on data or a stuck one looks like this"};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_pcie_link_degraded(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    const auto& gpus = probe->report->gpus;
    // The board decides a GPU's width as much as the GPU does: NVML says x16 is possible where the
    // slot gives x8 by design (AWS's A10G and T4, two GPUs sharing a slot). So a GPU is degraded
    // when it runs narrower than its widest sibling; a lone GPU cannot be judged on width.
    int widest = 0;
    for (const auto& g : gpus) widest = std::max(widest, g.pcie.width_current.value_or(0));
    for (const auto& gpu : gpus) {
      const auto& p = gpu.pcie;
      const bool narrow = p.width_current && p.width_max && *p.width_current < *p.width_max && gpus.size() > 1 &&
                          *p.width_current < widest;
      // An idle GPU trains its link down to save power; slower under load is the fault.
      const bool slow = p.gen_current && p.gen_max && *p.gen_current < *p.gen_max && loaded(gpu);
      if (!narrow && !slow) continue;
      std::vector<std::string> why;
      if (narrow) why.push_back(fmt::format("x{} of x{}", *p.width_current, *p.width_max));
      if (slow) {
        why.push_back(fmt::format("gen {} of {} at {}% load", *p.gen_current, *p.gen_max,
                                  gpu.utilization.gpu_percent.value_or(0)));
      }
      Finding f = node_finding("pcie-link-degraded", Severity::warning, name,
                               fmt::format("{} of {}: PCIe link degraded ({}): host transfers are slower",
                                           gpu_name(gpu), name, fmt::join(why, ", ")));
      f.evidence.push_back(
          probe_evidence(*probe, "nvidia-smi -q -x pci_gpu_link_info", fmt::format("{}", fmt::join(why, ", "))));
      f.remedy = {fmt::format("ssh {} sudo lspci -vv -s {} | grep -i lnk", name, gpu.pci_bus_id ? *gpu.pci_bus_id : ""),
                  "reseat the GPU or its riser at the next maintenance"};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_nvlink_down(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const auto& links = probe->report->facts.nvlinks;
    if (!links) continue;
    const bool has_nvlink = std::any_of(links->begin(), links->end(), [](const gpu::NvlinkGpuStatus& g) {
      return !g.active_links.empty() || !g.inactive_links.empty();
    });
    if (!has_nvlink) continue;
    const std::string name = kube::name_of(*node);
    for (const auto& g : *links) {
      if (g.inactive_links.empty()) continue;
      std::vector<std::string> down;
      for (int l : g.inactive_links) down.push_back(std::to_string(l));
      Finding f = node_finding("nvlink-down", Severity::error, name,
                               fmt::format("GPU {} of {}: {} of {} NVLinks inactive (links {}): peer-to-peer traffic "
                                           "falls back to PCIe or fails",
                                           g.index, name, g.inactive_links.size(),
                                           g.inactive_links.size() + g.active_links.size(), fmt::join(down, ", ")));
      f.evidence.push_back(probe_evidence(*probe, "nvidia-smi nvlink -s",
                                          fmt::format("GPU {}: Link {}: <inactive>", g.index, down.front())));
      f.remedy = {
          fmt::format("gpuctl drain {} --ignore-daemonsets --reason 'NVLink down'", name),
          fmt::format("ssh {} sudo nvidia-smi -r   (then nvidia-smi nvlink -s); a link that stays down is hardware",
                      name)};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_fabric_manager_down(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    const auto& facts = probe->report->facts;
    std::vector<std::string> evidence;
    if (facts.nvswitches.value_or(0) > 0 && facts.fabric_manager_running == false) {
      evidence.push_back(fmt::format("{} NVSwitch device(s), no nv-fabricmanager process", *facts.nvswitches));
    }
    for (const auto& gpu : probe->report->gpus) {
      if (!gpu.fabric.state || *gpu.fabric.state == "Completed") continue;
      evidence.push_back(fmt::format("{}: fabric state {}, status {}", gpu_name(gpu), *gpu.fabric.state,
                                     gpu.fabric.status ? *gpu.fabric.status : std::string("N/A")));
    }
    for (const auto& gpu : probe->report->gpus) {
      if (gpu.fabric.state && *gpu.fabric.state == "Completed" && gpu.fabric.status && *gpu.fabric.status != "Success")
        evidence.push_back(fmt::format("{}: fabric status {}", gpu_name(gpu), *gpu.fabric.status));
    }
    if (evidence.empty()) continue;
    Finding f = node_finding("fabric-manager-down", Severity::critical, name,
                             fmt::format("{}: the NVLink fabric is not set up ({}): CUDA fails there with \"system not "
                                         "yet initialized\"",
                                         name, evidence.front()));
    for (auto& e : evidence)
      f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x fabric / pgrep", std::move(e)));
    f.remedy = {
        fmt::format("gpuctl cordon {} --reason 'fabric manager down'", name),
        fmt::format("ssh {} sudo systemctl restart nvidia-fabricmanager; journalctl -u nvidia-fabricmanager", name),
        "the fabric manager's version must match the driver's exactly"};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
