#pragma once
// Builders shared by the unit tests of diagnose's node-side checks: probe transcripts from real
// captures, read through read_probe_run as the ssh fan-out hands them over, and snapshots of them.
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/fake_ssh_runner.hpp"
#include "fakes/fixtures.hpp"
#include "fakes/probe_transcript.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::testing::node_side {

using gpuctl::ops::NodeProbe;
using gpuctl::ops::diagnose::Snapshot;
using gpuctl::ops::diagnose::Source;
using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::probe_control;
using gpuctl::testing::probe_done;
using gpuctl::testing::probe_start;
using gpuctl::testing::probe_step;
using gpuctl::testing::dx::h100_node;
using nlohmann::json;

inline const std::string kXml2070 = "nvidia-smi-xml/telegraf__2x-rtx-2070__590.44.01__v13.xml";
inline const std::string kList2070 =
    "GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\n"
    "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\n";

// A node's probe transcript: its kernel log (journal form) and then the given GPU steps.
inline std::string transcript(const std::string& gpu_steps, const std::string& kernel = "",
                              const std::string& extra = probe_control("nvswitches 0")) {
  return cat(probe_start(), probe_control("kernel-source journal"), probe_step("kernel", kernel, "", 0), extra,
             gpu_steps, probe_done());
}
inline std::string healthy_2070(const std::string& xml = fixture(kXml2070), const std::string& kernel = "",
                                const std::string& extra = probe_control("nvswitches 0")) {
  return transcript(cat(probe_step("all", xml, "", 0), probe_step("list", kList2070, "", 0)), kernel, extra);
}

inline NodeProbe probe_of(const std::string& node, const std::string& out, int rc = 0) {
  return gpuctl::ops::read_probe_run({node, "10.0.0.7", ""}, gpuctl::testing::remote_ran(out, rc));
}

inline json ready_node(const std::string& name, int gpus, bool ready = true) {
  json n = h100_node(name, gpus, gpus);
  n["status"]["conditions"][0]["status"] = ready ? "True" : "False";
  return n;
}

inline Snapshot with_probes(std::vector<json> nodes, std::vector<NodeProbe> probes, std::vector<json> pods = {}) {
  Snapshot s = gpuctl::testing::dx::snapshot({{Source::nodes, std::move(nodes)}, {Source::pods, std::move(pods)}});
  for (auto& p : probes) {
    std::string name = p.node;
    s.probes.emplace(std::move(name), std::move(p));
  }
  return s;
}

inline std::string replaced(std::string text, const std::string& from, const std::string& to, bool all = false) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = all ? text.find(from, at + to.size()) : std::string::npos) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// A kernel log line in journalctl's short-iso form, `minutes_ago` before the snapshot's clock.
inline std::string journal_line(int minutes_ago, const std::string& message) {
  auto t = *gpuctl::util::parse_rfc3339(gpuctl::testing::dx::kNow) - std::chrono::minutes(minutes_ago);
  std::string iso = gpuctl::util::format_rfc3339(t);  // 2026-12-06T11:50:00Z
  return cat(iso.substr(0, 19), "+0000 gpu-7 kernel: ", message, "\n");
}

}  // namespace gpuctl::testing::node_side
