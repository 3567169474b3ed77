#include "gpuctl/ops/fleet/probe_outcome.hpp"

#include <fmt/format.h>

#include "gpuctl/gpu/probe.hpp"

namespace gpuctl::ops {

void read_probe_output(NodeProbe& probe, const ProbeOutput& output) {
  probe.exit_code = output.exit_code;
  gpu::NodeGpuReport report =
      gpu::parse_probe_output(output.exit_code, output.stdout_text, output.stderr_text, output.truncated);
  probe.outcome = gpu::node_classification(report);
  probe.message = probe.outcome == "ok" ? std::string() : report.message;
  // Every GPU answered, but nvidia-smi warned (exit 14): the node is not "ok", it answered with a
  // GPU whose infoROM is corrupted (the README's outcome; diagnose's nvidia-smi-warnings check).
  if (probe.outcome == "ok") {
    for (const auto& g : report.gpus) {
      for (const auto& w : g.warnings) {
        if (probe.outcome == "ok" && w.find("infoROM") != std::string::npos) {
          probe.outcome = std::string(gpu::to_string(gpu::NvsmiErrorKind::inforom_corrupted));
          probe.message = fmt::format("GPU {}: {}", g.index, w);
        }
      }
    }
  }
  probe.report = std::move(report);
}

void read_partial_probe_output(NodeProbe& probe, const ProbeOutput& output) {
  probe.exit_code = output.exit_code;
  // The node was reached and something on it hung (nvidia-smi, usually); what the probe printed
  // first (the kernel log) still counts.
  if (gpu::parse_probe_transcript(output.stdout_text).started) {
    probe.report = gpu::parse_probe_output(output.exit_code, output.stdout_text, output.stderr_text, true);
  }
}

}  // namespace gpuctl::ops
