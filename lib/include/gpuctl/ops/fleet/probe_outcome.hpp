#pragma once
// What a probe printed, turned into a node's outcome: shared by every source that runs the probe
// script (over ssh, in a probe pod), so a node reads the same whichever way its transcript came.
#include <string_view>

#include "gpuctl/ops/fleet/gpus.hpp"

namespace gpuctl::ops {

// One run of the probe script as its runner saw it.
struct ProbeOutput {
  int exit_code = -1;            // the script's exit status (ssh's, or the container's)
  std::string_view stdout_text;  // the framed transcript
  std::string_view stderr_text;  // what the runner printed besides (ssh's stderr; empty for a pod)
  bool truncated = false;        // cut at the output cap
};

// A probe that ran to its end: outcome from the report ("ok", "partial", "inforom_corrupted"
// when every GPU answered but one warned that its infoROM is corrupted, or the nvidia-smi failure
// kind), message (empty when ok), report. Pure.
void read_probe_output(NodeProbe& probe, const ProbeOutput& output);

// A probe stopped at its deadline: the outcome (timed_out) and message stay; when the probe had
// started, the report of what it printed (the kernel log, the GPUs that answered before the hang)
// is added, read as cut off. Pure.
void read_partial_probe_output(NodeProbe& probe, const ProbeOutput& output);

}  // namespace gpuctl::ops
