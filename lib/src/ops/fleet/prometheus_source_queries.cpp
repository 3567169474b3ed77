// The PromQL gpuctl sends for `--via prometheus`: one instant query per metric family and one for
// each node's newest sample time, whatever the number of nodes.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/ops/fleet/prometheus_source.hpp"

namespace gpuctl::ops {

const std::vector<DcgmFamily>& dcgm_families() {
  // The fields of NVIDIA's dcgm-exporter (etc/default-counters.csv and the DCGM field ids it can
  // be told to export) that say what nvidia-smi's XML says. DCGM_FI_DEV_CLOCKS_EVENT_REASONS is
  // DCGM 3.2+'s name of DCGM_FI_DEV_CLOCK_THROTTLE_REASONS; DCGM_EXP_GPU_HEALTH_STATUS is the
  // exporter's own health collector (off by default).
  static const std::vector<DcgmFamily> families = {
      {"utilization",
       {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"}},
      {"memory", {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL"}},
      {"temperature",
       {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_SHUTDOWN_TEMP"}},
      {"power", {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_PSTATE"}},
      {"clocks", {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK"}},
      {"clock-events", {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}},
      {"xid", {"DCGM_FI_DEV_XID_ERRORS"}},
      {"ecc",
       {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"}},
      {"retired-pages", {"DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_RETIRED_PENDING"}},
      {"row-remap",
       {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_PENDING"}},
      {"nvlink",
       {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"}},
      {"health", {"DCGM_EXP_GPU_HEALTH_STATUS"}},
  };
  return families;
}

PrometheusWindow prometheus_window(const PrometheusOptions& options) {
  using std::chrono::seconds;
  PrometheusWindow window;
  // Long enough that a node whose exporter stopped a while ago still answers, as stale, with
  // its last numbers (Prometheus marks a series stale the scrape after its target goes, and an
  // instant selector then sees nothing: last_over_time over a range still does).
  window.lookback = std::max(seconds(600), 4 * options.stale_after);
  // The subquery grid of the freshness query: the age it reports is exact to within one step.
  window.step = std::clamp(options.stale_after / 8, seconds(1), seconds(60));
  return window;
}

namespace {

std::string promql_duration(std::chrono::seconds d) { return fmt::format("{}s", d.count()); }

}  // namespace

std::string dcgm_family_query(const DcgmFamily& family, const PrometheusWindow& window,
                              const DcgmLabelMapping& labels) {
  // One query per family: each metric named by a label of its own, because last_over_time drops
  // __name__ (and `or` of two unnamed series with equal labels would keep only one). A node whose
  // exporter answers gives its current series only: series it no longer exports (a GPU replaced,
  // the exporter's labels changed) would otherwise linger in the window as a second GPU. A node
  // whose exporter stopped (every series marked stale) gives its last values, read as stale.
  std::string on;
  for (const auto& label : labels.node) on += (on.empty() ? "" : ", ") + label;
  std::string query;
  for (const auto& metric : family.metrics) {
    if (!query.empty()) query += " or ";
    query += fmt::format(R"(label_replace({0} or (last_over_time({0}[{1}]) unless on({2}) {0}), "{3}", "{0}", "", ""))",
                         metric, promql_duration(window.lookback), on, kMetricLabel);
  }
  return query;
}

std::string dcgm_freshness_query(const DcgmLabelMapping& labels, const PrometheusWindow& window) {
  // timestamp() of a plain selector is the sample's own time; over a subquery its maximum is the
  // newest sample even after Prometheus marked the series stale. Grouped by every node label the
  // mapping may use, so the fold applies the same first-present rule as to the values.
  std::string inner;
  for (const auto& family : dcgm_families()) {
    if (family.name == "health") continue;  // written by the exporter on its own schedule
    for (const auto& metric : family.metrics) {
      if (!inner.empty()) inner += " or ";
      inner += fmt::format("timestamp({})", metric);
    }
  }
  std::string by;
  for (const auto& label : labels.node) by += (by.empty() ? "" : ", ") + label;
  // The live series' own times first; the subquery adds those Prometheus has marked stale, and
  // alone it would miss an exporter younger than one step.
  return fmt::format("max by ({}) (({}) or max_over_time(({})[{}:{}]))", by, inner, inner,
                     promql_duration(window.lookback), promql_duration(window.step));
}

}  // namespace gpuctl::ops
