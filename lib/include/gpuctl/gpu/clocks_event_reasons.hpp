#pragma once
// NVML's clocks event (formerly "throttle") reason bitmask, as `--query-gpu=clocks_event_reasons.active`
// and DCGM's DCGM_FI_DEV_CLOCKS_EVENT_REASONS give it.
#include <cstdint>
#include <string>
#include <vector>

namespace gpuctl::gpu {

// The names of the reasons set in `mask` (nvmlClocksEventReason*), in bit order, spelled as
// GpuInfo::clocks_event_reasons spells them ("gpu_idle", "hw_slowdown", ...).
std::vector<std::string> clocks_event_reason_names(std::uint64_t mask);

}  // namespace gpuctl::gpu
