#include "gpu_view_render.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/output/printable.hpp"
#include "gpuctl/output/table.hpp"

namespace gpuctl::cli {

using output::Cell;
using output::Style;

namespace {

constexpr int kBarWidth = 10;

std::string bar(double fraction) {
  int filled = static_cast<int>(fraction * kBarWidth + 0.5);
  filled = std::clamp(filled, 0, kBarWidth);
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(kBarWidth - filled), '.') + "]";
}

template <class T>
std::string or_dash(const gpu::Reported<T>& v, const char* unit = "") {
  if (!v) return "-";
  return fmt::format("{}{}", *v, unit);
}

std::string memory_cell(const gpu::MemoryUsage& m, bool bars) {
  if (!m.used_mib || !m.total_mib) return "-";
  std::string text = fmt::format("{}/{} MiB", *m.used_mib, *m.total_mib);
  if (!bars || *m.total_mib <= 0) return text;
  return bar(static_cast<double>(*m.used_mib) / static_cast<double>(*m.total_mib)) + " " + text;
}

std::string power_cell(const gpu::Power& p) {
  if (!p.draw_w) return "-";
  if (!p.limit_w) return fmt::format("{:.0f} W", *p.draw_w);
  return fmt::format("{:.0f}/{:.0f} W", *p.draw_w, *p.limit_w);
}

Cell ecc_cell(const gpu::Ecc& e) {
  if (!e.volatile_counts.uncorrected) return Cell("-");
  auto n = *e.volatile_counts.uncorrected;
  return Cell(std::to_string(n), n > 0 ? Style::bad : Style::plain);
}

// The node's GPU pods with how many GPUs each holds: the DRA devices its claims hold, then the
// extended resources of the pods no claim there serves (a device plugin's, or a pod not yet
// bound to its claim's devices).
std::string pods_cell(const ops::NodeGpuView& v) {
  std::vector<std::pair<std::string, std::int64_t>> held;  // "ns/name" -> GPUs, first seen first
  auto add = [&](const std::string& pod, std::int64_t n) {
    auto it = std::find_if(held.begin(), held.end(), [&](const auto& e) { return e.first == pod; });
    if (it == held.end()) {
      held.emplace_back(pod, n);
    } else {
      it->second += n;
    }
  };
  for (const auto& h : v.dra_devices) {
    for (const auto& pod : h.pods) add(pod, 1);
  }
  const std::size_t by_dra = held.size();
  for (const auto& p : v.pods) {
    std::string pod = p.namespace_name + "/" + p.name;
    if (std::any_of(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(by_dra),
                    [&](const auto& e) { return e.first == pod; }))
      continue;
    std::int64_t total = 0;
    for (const auto& [resource, count] : p.resources) total += count;
    add(pod, total);
  }
  if (held.empty()) return "<none>";
  std::vector<std::string> names;
  for (const auto& [pod, n] : held) names.push_back(fmt::format("{}({})", pod, n));
  if (names.size() > 3) {
    auto more = names.size() - 3;
    names.resize(3);
    names.push_back(fmt::format("+{}", more));
  }
  return fmt::format("{}", fmt::join(names, ","));
}

Style outcome_style(const std::string& outcome) {
  if (outcome == "ok") return Style::good;
  if (outcome == "partial") return Style::warn;
  return Style::bad;
}

}  // namespace

std::string percent_cell(const gpu::Reported<int>& percent, bool bars) {
  if (!percent) return "-";
  if (!bars) return fmt::format("{}%", *percent);
  return fmt::format("{} {}%", bar(*percent / 100.0), *percent);
}

namespace {

// The DRA devices standing for one GPU ("gpu-0", or its MIG devices) and the pods holding them,
// "-" when none; "" pods when free.
std::pair<std::string, std::string> dra_cells(const ops::NodeGpuView& v, const gpu::GpuInfo& g) {
  auto devices = v.dra_devices_of(g.uuid ? *g.uuid : std::string());
  if (devices.empty()) return {"-", "-"};
  std::vector<std::string> names, pods;
  for (const auto* h : devices) {
    names.push_back(h->device.name);
    pods.insert(pods.end(), h->pods.begin(), h->pods.end());
  }
  return {fmt::format("{}", fmt::join(names, ",")), pods.empty() ? "<free>" : fmt::format("{}", fmt::join(pods, ","))};
}

}  // namespace

std::string render_gpu_view(const ops::GpuView& view, const GpuViewRender& o) {
  output::Table nodes(
      {"NODE", "STATUS", "VIA", "PRODUCT", "DRIVER", "CUDA", "GPUS", "K8S-ALLOCATABLE", "K8S-USED", "GPU-PODS"});
  // Where GPUs are DRA devices, each GPU's device and the pods holding it, exactly.
  bool dra = std::any_of(view.nodes.begin(), view.nodes.end(), [](const auto& v) { return !v.dra_devices.empty(); });
  std::vector<std::string> gpu_headers = {"NODE", "GPU",   "NAME",       "UTIL",  "MEMORY",
                                          "TEMP", "POWER", "ECC-UNCORR", "PROCS", "BUS-ID"};
  if (dra) gpu_headers.insert(gpu_headers.end(), {"DRA-DEVICE", "POD"});
  output::Table gpus(gpu_headers);
  for (const auto& v : view.nodes) {
    const auto* r = v.probe.report ? &*v.probe.report : nullptr;
    std::string answered = r ? fmt::format("{}", r->gpus.size()) : "-";
    if (r && !r->failed_gpus.empty()) answered += fmt::format(" (+{} failed)", r->failed_gpus.size());
    nodes.add_row({Cell(v.kube.name), Cell(v.probe.outcome, outcome_style(v.probe.outcome)), Cell(v.probe.via),
                   Cell(v.kube.product.empty() ? "<none>" : v.kube.product), Cell(r ? or_dash(r->driver_version) : "-"),
                   Cell(r ? or_dash(r->cuda_version) : "-"), Cell(answered),
                   Cell(std::to_string(v.kube.offered().allocatable)), Cell(std::to_string(v.kube.offered().used)),
                   Cell(pods_cell(v))});
    if (!r) continue;
    for (const auto& g : r->gpus) {
      std::vector<Cell> row = {Cell(v.kube.name),
                               Cell(g.index >= 0 ? std::to_string(g.index) : "?"),
                               Cell(or_dash(g.product_name)),
                               Cell(percent_cell(g.utilization.gpu_percent, o.bars)),
                               Cell(memory_cell(g.memory, o.bars)),
                               Cell(or_dash(g.temperature.gpu_c, "C")),
                               Cell(power_cell(g.power)),
                               ecc_cell(g.ecc),
                               Cell(std::to_string(g.processes.size())),
                               Cell(or_dash(g.pci_bus_id))};
      if (dra) {
        auto [device, pods] = dra_cells(v, g);
        row.emplace_back(device);
        row.emplace_back(pods);
      }
      gpus.add_row(std::move(row));
    }
    for (const auto& f : r->failed_gpus) {
      std::vector<Cell> row = {Cell(v.kube.name),
                               Cell(f.index >= 0 ? std::to_string(f.index) : "?"),
                               Cell(std::string(gpu::to_string(f.failure.kind)), Style::bad),
                               Cell("-"),
                               Cell("-"),
                               Cell("-"),
                               Cell("-"),
                               Cell("-"),
                               Cell("-"),
                               Cell(or_dash(f.pci_bus_id))};
      if (dra) row.insert(row.end(), {Cell("-"), Cell("-")});
      gpus.add_row(std::move(row));
    }
  }
  std::string text = nodes.render({o.headers, o.color});
  if (!gpus.empty()) text += "\n" + gpus.render({o.headers, o.color});
  if (!view.failures.empty()) {
    std::size_t count = 0;
    for (const auto& g : view.failures) count += g.nodes.size();
    text += fmt::format("\n{} of {} node(s) did not fully answer:\n", count, view.nodes.size());
    for (const auto& g : view.failures) {
      text += fmt::format("  {} ({}): {}\n    {}\n", output::styled(g.outcome, outcome_style(g.outcome), o.color),
                          g.nodes.size(), output::printable(g.message),
                          output::printable(fmt::format("{}", fmt::join(g.nodes, ","))));
    }
  }
  return text;
}

}  // namespace gpuctl::cli
