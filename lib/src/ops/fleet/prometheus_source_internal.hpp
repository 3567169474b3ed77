#pragma once
// Private to the prometheus_source*.cpp files:
//   prometheus_source_queries.cpp  the families and the PromQL sent
//   prometheus_source_api.cpp      the HTTP API client
//   prometheus_source_fold.cpp     series joined to nodes and GPUs, outcomes (stale, no_exporter)
//   prometheus_source_gpu.cpp      one GPU's metrics into GpuInfo, its Xid into a kernel-log event
//   prometheus_source.cpp          the NodeSource
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuctl/gpu/gpu_info.hpp"
#include "gpuctl/gpu/xid.hpp"
#include "gpuctl/ops/fleet/prometheus_source.hpp"

namespace gpuctl::ops::prometheus_detail {

// One GPU's series, gathered from every family.
struct GpuSeries {
  std::optional<int> index;  // the gpu label
  std::string uuid;
  std::string model;
  std::string pci_bus_id;
  std::string driver_version;
  std::string cuda_driver_version;  // DCGM_FI_CUDA_DRIVER_VERSION, e.g. "12010"
  struct Value {
    double value = 0;
    bool from_mig_instance = false;  // a series with GPU_I_ID: the whole GPU's own series wins
  };
  std::map<std::string, Value> metrics;  // by metric name
  // DCGM_EXP_GPU_HEALTH_STATUS: one per health watch, with its error code.
  struct Health {
    std::string watch;
    std::string error_code;
    double value = 0;
  };
  std::vector<Health> health;
};

// DCGM's "blank" values (dcgm_structs.h: DCGM_INT32_BLANK 0x7ffffff0, DCGM_INT64_BLANK
// 0x7ffffffffffffff0, DCGM_FP64_BLANK 140737488355328.0 and the values above them) stand for
// "not supported", "not found", "no permission": the exporter prints them as numbers
// (dcgm-exporter's README shows DCGM_FI_DEV_MEMORY_TEMP 9223372036854775794). Every field gpuctl
// reads fits far below the smallest of them.
inline constexpr double kDcgmBlankFloor = 2147483632.0;
bool is_dcgm_blank(double value);

// The GPU model of one GPU's series (fields with no series stay missing, blanks not_available).
gpu::GpuInfo gpu_info_from(const GpuSeries& series);

// The last Xid dcgm-exporter saw on the GPU, as the kernel-log reader would have read it; none when
// the value is 0 (no Xid since the exporter started) or blank.
std::optional<gpu::KernelLogEvent> xid_event_from(const GpuSeries& series, std::int64_t sampled_at_unix_s);

}  // namespace gpuctl::ops::prometheus_detail
