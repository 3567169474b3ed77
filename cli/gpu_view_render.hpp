#pragma once
// The text rendering of the live GPU view: a row per node (Kubernetes' numbers next to what the
// node said), a row per GPU, and the nodes that did not answer, grouped by reason.
#include <string>

#include "gpuctl/ops/fleet/gpus.hpp"

namespace gpuctl::cli {

struct GpuViewRender {
  bool headers = true;
  bool color = false;
  bool bars = false;  // utilization and memory bars (on a terminal)
};

std::string render_gpu_view(const ops::GpuView& view, const GpuViewRender& options);

// "[#####.....] 50%" with bars, "50%" without; "-" when not reported.
std::string percent_cell(const gpu::Reported<int>& percent, bool bars);

}  // namespace gpuctl::cli
