// The node-side checks of what a node has: gpu-count-mismatch (nvidia-smi versus the device
// plugin versus GFD's labels), driver-version-skew (a node off its pool's driver) and
// persistence-mode-off.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "check_support.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

std::optional<std::int64_t> gpu_capacity(const json& node) {
  kube::ResourceList capacity = kube::parse_resource_list(field(field(node, "status"), "capacity"));
  auto it = capacity.find(std::string(kGpuResource));
  if (it == capacity.end()) return std::nullopt;
  return it->second.value();
}

std::optional<std::int64_t> labelled_count(const json& node) {
  auto text = kube::label_of(node, "nvidia.com/gpu.count");
  if (!text) return std::nullopt;
  try {
    return std::stoll(*text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool any_mig(const gpu::NodeGpuReport& report) {
  return std::any_of(report.gpus.begin(), report.gpus.end(),
                     [](const gpu::GpuInfo& g) { return g.mig.current_enabled && *g.mig.current_enabled; });
}

// The pool a node belongs to for driver comparisons: its GPU product, as GFD labels it ("NVIDIA-
// A10G"), so that a node known by its probe and one known by its labels meet in one pool.
std::string pool_of(const json& node, const NodeProbe* probe) {
  std::string product = gpu_product_of(node).first;
  if (probe != nullptr && probe->report && !probe->report->gpus.empty() && probe->report->gpus[0].product_name) {
    product = *probe->report->gpus[0].product_name;
  }
  std::replace(product.begin(), product.end(), ' ', '-');
  return product;
}

struct PoolDrivers {
  std::map<std::string, std::vector<std::string>> nodes_by_version;  // version text -> nodes
  std::map<std::string, gpu::DriverVersion> versions;
};

// The version most nodes run; among equals the newest.
std::string reference_version(const PoolDrivers& pool) {
  std::string best;
  for (const auto& [text, nodes] : pool.nodes_by_version) {
    if (best.empty()) {
      best = text;
      continue;
    }
    std::size_t n = nodes.size();
    std::size_t m = pool.nodes_by_version.at(best).size();
    if (n > m || (n == m && gpu::older(pool.versions.at(best), pool.versions.at(text)))) best = text;
  }
  return best;
}

std::string versions_line(const PoolDrivers& pool) {
  std::vector<std::string> parts;
  for (const auto& [text, nodes] : pool.nodes_by_version) {
    parts.push_back(fmt::format("{} on {} node{}", text, nodes.size(), nodes.size() == 1 ? "" : "s"));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::vector<Finding> check_gpu_count_mismatch(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const gpu::NodeGpuReport& report = *probe->report;
    if (report.status == gpu::ProbeStatus::failed || any_mig(report)) continue;  // driver-broken / MIG devices
    const std::string name = kube::name_of(*node);
    const auto seen = static_cast<std::int64_t>(report.gpus.size() + report.failed_gpus.size());
    const auto capacity = gpu_capacity(*node);
    const auto labelled = labelled_count(*node);
    std::int64_t expected = std::max(capacity.value_or(0), labelled.value_or(0));
    if (seen >= expected && (!capacity || !labelled || *capacity == *labelled)) continue;
    std::vector<std::string> parts = {fmt::format("{} sees {}", gpu_reader(*probe), seen)};
    if (capacity) parts.push_back(fmt::format("the device plugin registered {} (capacity)", *capacity));
    if (labelled) parts.push_back(fmt::format("GFD's nvidia.com/gpu.count says {}", *labelled));
    std::string cause =
        seen < expected ? fmt::format("{} GPU(s) missing: fallen off the bus or not detected at boot", expected - seen)
                        : std::string("the labels are stale (GFD not re-run since the GPUs changed)");
    Finding f = node_finding("gpu-count-mismatch", Severity::error, name,
                             fmt::format("{}: {}; {}", name, fmt::join(parts, ", "), cause));
    f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x", fmt::format("{} GPU(s) reported", seen)));
    if (capacity)
      f.evidence.push_back(
          {fmt::format("node {} status.capacity", name), fmt::format("nvidia.com/gpu={}", *capacity), ""});
    if (labelled)
      f.evidence.push_back({fmt::format("node {} label", name), fmt::format("nvidia.com/gpu.count={}", *labelled), ""});
    f.remedy = {fmt::format("ssh {} 'nvidia-smi -L; lspci | grep -i nvidia'", name),
                fmt::format("gpuctl drain {} --ignore-daemonsets --reason 'GPU missing'", name),
                fmt::format("ssh {} sudo reboot", name)};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_driver_version_skew(const Snapshot& snapshot) {
  std::map<std::string, PoolDrivers> pools;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node)) continue;
    const std::string name = kube::name_of(node);
    auto driver = node_driver(snapshot, node);
    std::string pool = pool_of(node, probe_of(snapshot, name));
    if (!driver || pool.empty()) continue;
    PoolDrivers& p = pools[pool];
    p.nodes_by_version[driver->text].push_back(name);
    p.versions.emplace(driver->text, *driver);
  }
  std::vector<Finding> out;
  for (const auto& [pool, drivers] : pools) {
    if (drivers.nodes_by_version.size() < 2) continue;
    const std::string reference = reference_version(drivers);
    for (const auto& [version, nodes] : drivers.nodes_by_version) {
      if (version == reference) continue;
      const bool behind = gpu::older(drivers.versions.at(version), drivers.versions.at(reference));
      for (const auto& name : nodes) {
        Finding f =
            node_finding("driver-version-skew", Severity::warning, name,
                         fmt::format("{} runs driver {}, {} the {} pool's {} ({})", name, version,
                                     behind ? "older than" : "newer than", pool, reference, versions_line(drivers)));
        f.evidence.push_back({driver_source(snapshot, name), version, ""});
        f.remedy = {
            fmt::format("gpuctl drain {} --rolling --exec 'install driver {}' --uncordon --verify", name, reference),
            fmt::format("gpuctl nodes -l nvidia.com/gpu.product --live   (the pool's drivers)")};
        out.push_back(std::move(f));
      }
    }
  }
  return out;
}

std::vector<Finding> check_persistence_mode_off(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& [node, probe] : probed_nodes(snapshot)) {
    const std::string name = kube::name_of(*node);
    std::vector<std::string> off;
    for (const auto& gpu : probe->report->gpus) {
      if (gpu.persistence_mode_enabled && !*gpu.persistence_mode_enabled) off.push_back(gpu_name(gpu));
    }
    if (off.empty()) continue;
    Finding f = node_finding("persistence-mode-off", Severity::info, name,
                             fmt::format("{}: persistence mode is off on {} of {} GPUs ({}): the driver tears down "
                                         "between jobs, so each start is slower and GPU state is lost",
                                         name, off.size(), probe->report->gpus.size(), first_few(off)));
    f.evidence.push_back(probe_evidence(*probe, "nvidia-smi -q -x", "persistence_mode=Disabled"));
    f.remedy = {fmt::format("ssh {} sudo systemctl enable --now nvidia-persistenced", name),
                fmt::format("ssh {} sudo nvidia-smi -pm 1   (until the next reboot)", name)};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
