#pragma once
// Shared between the probe's report builder (probe_report.cpp) and its node facts (probe_facts.cpp).
#include "gpuctl/gpu/probe.hpp"

namespace gpuctl::gpu::detail {

// The kernel log, clock, NVSwitch, Fabric Manager and NVLink parts of a transcript. Pure.
NodeFacts read_node_facts(const ProbeTranscript& t);

}  // namespace gpuctl::gpu::detail
