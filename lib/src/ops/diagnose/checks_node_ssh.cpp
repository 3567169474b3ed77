// The node-side checks of reaching a node and its driver: node-unreachable (ssh failures joined
// with what Kubernetes says), driver-broken (nvidia-smi failing, per kind, with its remedy) and
// nvidia-smi-warnings (infoROM and the like next to good data).
#include <fmt/format.h>

#include "check_support.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;
using gpu::NvsmiErrorKind;

// What an ssh failure means once Kubernetes' view is known.
std::string unreachable_meaning(const json& node, const NodeProbe& probe) {
  auto network = node_condition(node, "NetworkUnavailable");
  if (network && network->status == "True") {
    return "and its network is not set up (NetworkUnavailable=True): fix the node's network (CNI, routes) first";
  }
  std::optional<bool> ready = node_ready(node);
  const bool no_answer = probe.outcome == "unreachable" || probe.outcome == "timed_out";
  if (ready == false && no_answer) return "and Kubernetes has lost it too (NotReady): the node is down or cut off";
  if (probe.outcome == "auth_failed" || probe.outcome == "host_key_mismatch") {
    return "while the node itself may be fine: an ssh configuration problem (user, key, known_hosts)";
  }
  if (probe.outcome == "no_address") return "because gpuctl found no address for it (see --ssh-host-from)";
  if (probe.outcome == "ssh_missing") return "because this machine has no usable ssh client";
  if (ready == true) {
    return "while Kubernetes sees it Ready: the management network or ssh (sshd, firewall, bastion) is broken, "
           "not the node";
  }
  return "";
}

struct DriverFailure {
  NvsmiErrorKind kind;
  std::string_view meaning;
  std::vector<std::string_view> remedies;  // "{node}" is the node's name
};

// Each kind of nvidia-smi failure: what it means and what an admin does about it.
const std::vector<DriverFailure>& driver_failures() {
  static const std::vector<DriverFailure> table = {
      {NvsmiErrorKind::driver_not_loaded,
       "the NVIDIA kernel driver is not loaded or not answering",
       {"gpuctl cordon {node} --reason 'nvidia driver not loaded'",
        "ssh {node} 'lsmod | grep nvidia; sudo dmesg | grep -i nvrm | tail'",
        "reinstall or load the driver (sudo modprobe nvidia), else reboot the node"}},
      {NvsmiErrorKind::driver_library_mismatch,
       "the loaded kernel module and the user-space NVML library are different versions (a driver upgrade without a "
       "reboot)",
       {"gpuctl drain {node} --ignore-daemonsets --reason 'driver/library version mismatch'",
        "ssh {node} sudo reboot   (or unload and reload the nvidia modules)", "gpuctl uncordon {node} --verify"}},
      {NvsmiErrorKind::gpu_lost,
       "a GPU is lost (fell off the bus): only a reboot brings it back, and a repeat means hardware",
       {"gpuctl drain {node} --ignore-daemonsets --reason 'GPU lost'", "ssh {node} sudo reboot",
        "if it happens again: ssh {node} sudo nvidia-bug-report.sh, and RMA the GPU"}},
      {NvsmiErrorKind::no_devices,
       "the driver is loaded but finds no GPU (fallen off the bus, not passed through, or disabled)",
       {"gpuctl cordon {node} --reason 'nvidia-smi: no devices'", "ssh {node} 'lspci | grep -i nvidia'",
        "ssh {node} sudo reboot"}},
      {NvsmiErrorKind::insufficient_permissions,
       "NVML refuses the probing user (device node permissions, SELinux)",
       {"ssh {node} ls -l /dev/nvidia*", "run gpuctl's ssh as root, or fix the device permissions"}},
      {NvsmiErrorKind::nvml_unknown_error,
       "NVML failed to initialise with an unknown error (often a GPU lost to the driver)",
       {"gpuctl cordon {node} --reason 'NVML unknown error'", "ssh {node} sudo dmesg | grep -i xid",
        "ssh {node} sudo reboot"}},
      {NvsmiErrorKind::nvidia_smi_missing,
       "nvidia-smi is not on the node's PATH: the driver is not installed on the host, or it lives in the GPU "
       "Operator's driver container (/run/nvidia/driver)",
       {"ssh {node} ls /run/nvidia/driver/usr/bin/nvidia-smi", "install the NVIDIA driver on {node}"}},
      {NvsmiErrorKind::truncated,
       "nvidia-smi did not finish before the deadline: a hung driver, usually a GPU that fell off the bus",
       {"gpuctl cordon {node} --reason 'nvidia-smi hangs'", "ssh {node} sudo dmesg | grep -i -e xid -e nvrm",
        "ssh {node} sudo reboot"}},
  };
  return table;
}

const DriverFailure* driver_failure(NvsmiErrorKind kind) {
  for (const auto& d : driver_failures()) {
    if (d.kind == kind) return &d;
  }
  return nullptr;
}

std::vector<std::string> remedies_for(const DriverFailure* d, const std::string& node) {
  std::vector<std::string> out;
  if (d == nullptr) {
    out = {fmt::format("ssh {} nvidia-smi", node), fmt::format("gpuctl cordon {} --reason 'nvidia-smi fails'", node)};
    return out;
  }
  for (std::string_view r : d->remedies) out.push_back(fmt::format(fmt::runtime(r), fmt::arg("node", node)));
  return out;
}

// The node failed as a whole: no GPU answered.
Finding node_driver_finding(const json& node, const NodeProbe& probe, Severity severity) {
  const std::string name = kube::name_of(node);
  const gpu::NodeGpuReport& report = *probe.report;
  const DriverFailure* d = driver_failure(report.kind);
  std::string summary = fmt::format("nvidia-smi fails on {} ({}){}: {}", name, gpu::to_string(report.kind),
                                    node_ready(node) == true ? ", which Kubernetes still sees Ready" : "",
                                    d != nullptr ? d->meaning : std::string_view("see the message"));
  Finding f = node_finding("driver-broken", severity, name, std::move(summary));
  for (const auto& step : report.step_failures) {
    f.evidence.push_back(probe_evidence(probe, "nvidia-smi", step.excerpt.empty() ? step.message : step.excerpt));
    if (f.evidence.size() >= 2) break;
  }
  if (f.evidence.empty()) f.evidence.push_back(probe_evidence(probe, "nvidia-smi", report.message));
  f.remedy = remedies_for(d, name);
  return f;
}

}  // namespace

namespace {

// A node whose data did not come through a probe pod or from Prometheus: said in that source's
// words (not ssh's), with where to look next.
Finding unreached_without_ssh(const std::string& name, const NodeProbe& probe) {
  if (probe.via == "pod") {
    Finding f = node_finding("node-unreachable", Severity::error, name,
                             fmt::format("the probe pod on {} did not run the probe ({})", name, probe.outcome));
    f.evidence.push_back(probe_evidence(probe, "probe pod", probe.message));
    f.remedy = {fmt::format("kubectl describe node {}", name), fmt::format("gpuctl gpus {} --via pod -v 2", name)};
    return f;
  }
  const bool stale = probe.outcome == "stale";
  Finding f =
      node_finding("node-unreachable", stale ? Severity::warning : Severity::error, name,
                   stale ? fmt::format("the DCGM exporter's metrics of {} are stale: its GPUs' state now is "
                                       "not known",
                                       name)
                         : fmt::format("Prometheus has no DCGM exporter series for {} ({})", name, probe.outcome));
  f.evidence.push_back(probe_evidence(probe, "Prometheus", probe.message));
  f.remedy = {fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={} | grep -i dcgm", name),
              fmt::format("gpuctl gpus {} --via pod", name)};
  return f;
}

}  // namespace

std::vector<Finding> check_node_unreachable(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& node : snapshot.list(Source::nodes)) {
    const std::string name = kube::name_of(node);
    const NodeProbe* probe = probe_of(snapshot, name);
    // Reached (the probe ran, even if it then hung), or stopped by Ctrl-C: not a reach problem.
    // Metrics older than the threshold are said, never taken as the node's state now.
    if (probe == nullptr || probe->outcome == "interrupted") continue;
    if (probe->report && probe->outcome != "stale") continue;
    if (probe->via != "ssh") {
      out.push_back(unreached_without_ssh(name, *probe));
      continue;
    }
    std::string meaning = unreachable_meaning(node, *probe);
    Finding f = node_finding(
        "node-unreachable", Severity::error, name,
        fmt::format("ssh cannot reach {} ({}){}{}", name, probe->outcome, meaning.empty() ? "" : " ", meaning));
    f.evidence.push_back(
        probe_evidence(*probe, fmt::format("ssh {}", probe->address.empty() ? name : probe->address), probe->message));
    f.remedy = {fmt::format("ssh -v {} true", probe->address.empty() ? name : probe->address),
                fmt::format("kubectl describe node {}", name)};
    if (node_ready(node) == false)
      f.remedy.push_back(fmt::format("gpuctl cordon {} --reason 'node unreachable'", name));
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_driver_broken(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const gpu::NodeGpuReport& report = *probe->report;
    // Critical when Kubernetes still sends work there; the node-not-ready check speaks for the rest.
    const Severity severity = node_ready(*node) == false ? Severity::error : Severity::critical;
    if (report.status == gpu::ProbeStatus::failed) {
      Finding f = node_driver_finding(*node, *probe, severity);
      // No GPU and no nvidia-smi on a node that only looks like a GPU node: say so, less loudly.
      if (report.kind == NvsmiErrorKind::nvidia_smi_missing) f.severity = Severity::warning;
      out.push_back(std::move(f));
      continue;
    }
    const std::string name = kube::name_of(*node);
    for (const auto& failed : report.failed_gpus) {
      const DriverFailure* d = driver_failure(failed.failure.kind);
      std::string gpu = failed.index >= 0 ? fmt::format("GPU {}", failed.index) : std::string("a GPU");
      if (failed.pci_bus_id) gpu += fmt::format(" ({})", *failed.pci_bus_id);
      Finding f = node_finding("driver-broken", severity, name,
                               fmt::format("{} of {} fails in nvidia-smi ({}); {} of {} GPUs answer{}", gpu, name,
                                           gpu::to_string(failed.failure.kind), report.gpus.size(),
                                           report.gpus.size() + report.failed_gpus.size(),
                                           d != nullptr ? fmt::format(": {}", d->meaning) : std::string()));
      f.evidence.push_back(probe_evidence(
          *probe, "nvidia-smi", failed.failure.excerpt.empty() ? failed.failure.message : failed.failure.excerpt));
      f.remedy = remedies_for(d, name);
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_nvidia_smi_warnings(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    // From Prometheus the warnings are the DCGM exporter's (NVLink errors, DCGM health), said so.
    const bool dcgm = probe->via == "prometheus";
    for (const auto& gpu : probe->report->gpus) {
      for (const auto& warning : gpu.warnings) {
        const bool inforom = warning.find("infoROM") != std::string::npos;
        Finding f = node_finding(
            "nvidia-smi-warnings", Severity::warning, name,
            fmt::format("{} of {}: {} warns: {}{}", gpu_name(gpu), name, dcgm ? "the DCGM exporter" : "nvidia-smi",
                        warning,
                        inforom ? " (ECC and page-retirement records may be unreliable; the GPU still works)" : ""));
        f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x", warning));
        f.remedy = inforom
                       ? std::vector<std::string>{fmt::format("ssh {} sudo nvidia-smi -q -d ECC,PAGE_RETIREMENT", name),
                                                  "ask the vendor for an infoROM/VBIOS update, else RMA the GPU"}
                       : std::vector<std::string>{fmt::format("ssh {} nvidia-smi -q", name)};
        out.push_back(std::move(f));
      }
    }
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
