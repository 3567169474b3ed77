#pragma once
// Probe transcripts as gpu/probe.hpp's script writes them, for tests that feed parse_probe_output
// or a FakeSshRunner: a start line, framed steps, a done line.
#include <sstream>
#include <string>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/probe.hpp"

namespace gpuctl::testing {

inline std::string probe_marker() { return cat(gpu::kProbeMarker, " "); }
inline std::string probe_start() { return cat(probe_marker(), "start\n"); }
inline std::string probe_done() { return cat(probe_marker(), "done\n"); }
// A control line between steps: "kernel-source journal", "clock 1790000000 123.4", "nvswitches 6".
inline std::string probe_control(const std::string& line) { return cat(probe_marker(), line, "\n"); }

// One step framed exactly as the script frames it: stdout lines as "o ", plus the extra line the
// script's `echo` adds; stderr as "e " lines; then the end line with the exit code.
inline std::string probe_step(const std::string& name, const std::string& out, const std::string& err, int rc) {
  const std::string m = probe_marker();
  std::string s = cat(m, "begin ", name, "\n");
  std::istringstream o(cat(out, "\n"));
  for (std::string line; std::getline(o, line);) s += cat("o ", line, "\n");
  if (!err.empty()) {
    std::istringstream e(cat(err, "\n"));
    for (std::string line; std::getline(e, line);) s += cat("e ", line, "\n");
  }
  return cat(s, m, "end ", name, " rc=", std::to_string(rc), "\n");
}

}  // namespace gpuctl::testing
