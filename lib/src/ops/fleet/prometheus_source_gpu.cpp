// One GPU's dcgm-exporter series into the GPU model nvidia-smi's XML fills, field for field where
// DCGM has the same quantity (units: DCGM's framebuffer fields are MiB, clocks MHz, power W,
// temperatures C, as nvidia-smi's).
#include <cmath>

#include <fmt/format.h>

#include "gpuctl/gpu/clocks_event_reasons.hpp"
#include "gpuctl/gpu/reported.hpp"
#include "prometheus_source_internal.hpp"

namespace gpuctl::ops::prometheus_detail {

bool is_dcgm_blank(double value) { return !std::isfinite(value) || value >= kDcgmBlankFloor; }

namespace {

using gpu::Absence;
using gpu::Reported;

const GpuSeries::Value* find(const GpuSeries& s, std::string_view metric) {
  auto it = s.metrics.find(std::string(metric));
  return it == s.metrics.end() ? nullptr : &it->second;
}

// A field with no series is missing (the exporter was not told to export it); a blank value is
// not_available, as nvidia-smi's "N/A".
template <class T>
Reported<T> number(const GpuSeries& s, std::string_view metric) {
  const GpuSeries::Value* v = find(s, metric);
  if (v == nullptr) return {};
  if (is_dcgm_blank(v->value) || v->value < 0) return Reported<T>::absent(Absence::not_available);
  if constexpr (std::is_floating_point_v<T>) {
    return v->value;
  } else {
    return static_cast<T>(std::llround(v->value));
  }
}

Reported<bool> flag(const GpuSeries& s, std::string_view metric) {
  Reported<std::int64_t> n = number<std::int64_t>(s, metric);
  if (!n) return Reported<bool>::absent(n.absence());
  return *n > 0;
}

Reported<std::string> text(const std::string& value) {
  return value.empty() ? Reported<std::string>{} : Reported<std::string>(value);
}

void fill_memory(const GpuSeries& s, gpu::GpuInfo& g) {
  g.memory.used_mib = number<std::int64_t>(s, "DCGM_FI_DEV_FB_USED");
  g.memory.free_mib = number<std::int64_t>(s, "DCGM_FI_DEV_FB_FREE");
  g.memory.reserved_mib = number<std::int64_t>(s, "DCGM_FI_DEV_FB_RESERVED");
  g.memory.total_mib = number<std::int64_t>(s, "DCGM_FI_DEV_FB_TOTAL");
  // nvidia-smi's total is used + free + reserved (R510+; used + free before reserved existed),
  // which is what DCGM_FI_DEV_FB_TOTAL holds when exported: the default counters leave it out.
  if (!g.memory.total_mib && g.memory.used_mib && g.memory.free_mib) {
    g.memory.total_mib = *g.memory.used_mib + *g.memory.free_mib + g.memory.reserved_mib.value_or(0);
  }
}

void fill_state(const GpuSeries& s, gpu::GpuInfo& g) {
  g.utilization.gpu_percent = number<int>(s, "DCGM_FI_DEV_GPU_UTIL");
  g.utilization.memory_percent = number<int>(s, "DCGM_FI_DEV_MEM_COPY_UTIL");
  g.utilization.encoder_percent = number<int>(s, "DCGM_FI_DEV_ENC_UTIL");
  g.utilization.decoder_percent = number<int>(s, "DCGM_FI_DEV_DEC_UTIL");
  g.temperature.gpu_c = number<int>(s, "DCGM_FI_DEV_GPU_TEMP");
  g.temperature.memory_c = number<int>(s, "DCGM_FI_DEV_MEMORY_TEMP");
  g.temperature.slowdown_threshold_c = number<int>(s, "DCGM_FI_DEV_SLOWDOWN_TEMP");
  g.temperature.shutdown_threshold_c = number<int>(s, "DCGM_FI_DEV_SHUTDOWN_TEMP");
  g.power.draw_w = number<double>(s, "DCGM_FI_DEV_POWER_USAGE");
  g.power.limit_w = number<double>(s, "DCGM_FI_DEV_POWER_MGMT_LIMIT");
  if (Reported<int> pstate = number<int>(s, "DCGM_FI_DEV_PSTATE")) {
    g.performance_state = fmt::format("P{}", *pstate);
  }
  Reported<int> sm = number<int>(s, "DCGM_FI_DEV_SM_CLOCK");
  Reported<int> mem = number<int>(s, "DCGM_FI_DEV_MEM_CLOCK");
  if (find(s, "DCGM_FI_DEV_SM_CLOCK") != nullptr || find(s, "DCGM_FI_DEV_MEM_CLOCK") != nullptr) {
    gpu::Clocks clocks;
    clocks.sm_mhz = sm;
    clocks.memory_mhz = mem;
    g.clocks = clocks;
  }
  for (std::string_view metric : {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}) {
    if (find(s, metric) == nullptr) continue;
    Reported<std::int64_t> mask = number<std::int64_t>(s, metric);
    g.clocks_event_reasons =
        mask ? Reported<std::vector<std::string>>(gpu::clocks_event_reason_names(static_cast<std::uint64_t>(*mask)))
             : Reported<std::vector<std::string>>::absent(mask.absence());
    break;
  }
}

void fill_errors(const GpuSeries& s, gpu::GpuInfo& g) {
  g.ecc.volatile_counts.corrected = number<std::int64_t>(s, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL");
  g.ecc.volatile_counts.uncorrected = number<std::int64_t>(s, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL");
  g.ecc.aggregate_counts.corrected = number<std::int64_t>(s, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL");
  g.ecc.aggregate_counts.uncorrected = number<std::int64_t>(s, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL");
  g.retired_pages.single_bit_count = number<std::int64_t>(s, "DCGM_FI_DEV_RETIRED_SBE");
  g.retired_pages.double_bit_count = number<std::int64_t>(s, "DCGM_FI_DEV_RETIRED_DBE");
  g.retired_pages.pending = flag(s, "DCGM_FI_DEV_RETIRED_PENDING");
  g.remapped_rows.correctable = number<std::int64_t>(s, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS");
  g.remapped_rows.uncorrectable = number<std::int64_t>(s, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS");
  g.remapped_rows.failure = flag(s, "DCGM_FI_DEV_ROW_REMAP_FAILURE");
  g.remapped_rows.pending = flag(s, "DCGM_FI_DEV_ROW_REMAP_PENDING");
  // NVLink error counters have no field of their own in the model (nvidia-smi reports them per
  // link with `nvlink -e`, which the probe does not run): a nonzero one is a warning on the GPU.
  static constexpr std::pair<std::string_view, std::string_view> kNvlinkCounters[] = {
      {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "CRC flit"},
      {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "CRC data"},
      {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "replay"},
      {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "recovery"},
  };
  for (const auto& [metric, what] : kNvlinkCounters) {
    Reported<std::int64_t> n = number<std::int64_t>(s, metric);
    if (n && *n > 0) g.warnings.push_back(fmt::format("NVLink {} errors: {} (dcgm-exporter {})", what, *n, metric));
  }
  // DCGM's health watches: 0 pass, 10 warn, 20 fail (dcgmHealthWatchResult_t).
  for (const auto& h : s.health) {
    if (h.value < 10 || is_dcgm_blank(h.value)) continue;
    g.warnings.push_back(fmt::format("DCGM health {}: {}{}", h.watch.empty() ? "ALL" : h.watch,
                                     h.value >= 20 ? "FAIL" : "WARN",
                                     h.error_code.empty() ? "" : fmt::format(" ({})", h.error_code)));
  }
}

}  // namespace

gpu::GpuInfo gpu_info_from(const GpuSeries& s) {
  gpu::GpuInfo g;
  g.index = s.index.value_or(-1);
  g.uuid = text(s.uuid);
  g.product_name = text(s.model);
  g.pci_bus_id = text(s.pci_bus_id);
  g.driver_version = text(s.driver_version);
  fill_memory(s, g);
  fill_state(s, g);
  fill_errors(s, g);
  return g;
}

std::optional<gpu::KernelLogEvent> xid_event_from(const GpuSeries& s, std::int64_t sampled_at_unix_s) {
  const GpuSeries::Value* v = find(s, "DCGM_FI_DEV_XID_ERRORS");
  if (v == nullptr || is_dcgm_blank(v->value) || v->value < 1) return std::nullopt;
  gpu::KernelLogEvent event;
  event.kind = gpu::KernelLogEventKind::xid;
  event.code = static_cast<int>(std::llround(v->value));
  if (auto pci = gpu::canonical_pci_bus_id(s.pci_bus_id)) event.pci_bus_id = *pci;
  // DCGM keeps only the last Xid and not when it happened: the sample's time stands for it.
  event.unix_time_s = sampled_at_unix_s;
  event.message = fmt::format("last Xid of GPU {} reported by dcgm-exporter (DCGM_FI_DEV_XID_ERRORS)",
                              s.uuid.empty() ? fmt::format("{}", s.index.value_or(-1)) : s.uuid);
  event.line = fmt::format("DCGM_FI_DEV_XID_ERRORS{{gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\"}} {}",
                           s.index ? std::to_string(*s.index) : "", s.uuid, s.pci_bus_id, *event.code);
  return event;
}

}  // namespace gpuctl::ops::prometheus_detail
