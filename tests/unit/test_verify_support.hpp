#pragma once
// What the --verify and --quarantine tests share: GPU nodes reachable at an address, shaped as the
// API server returns them, and probe transcripts built from real captures (a healthy pair of RTX
// 2070s, a node whose driver is not loaded) as the probe script frames them.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakes/fake_ssh_runner.hpp"
#include "fakes/fake_transport.hpp"
#include "fakes/fixtures.hpp"
#include "fakes/probe_transcript.hpp"

namespace gpuctl::testing::verify {

using json = nlohmann::json;

inline std::string control(const std::string& line) { return cat(probe_marker(), line, "\n"); }

// A whole probe run: an empty kernel log (journal form), no NVSwitch, then these GPU steps.
inline std::string transcript(const std::string& gpu_steps) {
  return cat(probe_start(), control("kernel-source journal"), probe_step("kernel", "", "", 0), control("nvswitches 0"),
             gpu_steps, probe_done());
}

// Two RTX 2070s answering nvidia-smi (a real XML capture).
inline std::string healthy_probe() {
  const std::string list =
      "GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\n"
      "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\n";
  return transcript(cat(probe_step("all", fixture("nvidia-smi-xml/telegraf__2x-rtx-2070__590.44.01__v13.xml"), "", 0),
                        probe_step("list", list, "", 0)));
}

// nvidia-smi cannot reach the driver (the real message, exit 9).
inline std::string driver_not_loaded_probe() {
  return transcript(
      probe_step("all", fixture("nvidia-smi-errors/issue__nvidia-smi-failed-communicate-driver.txt"), "", 9));
}

// The summary driver-broken gives a Ready node whose driver is not loaded.
inline std::string driver_not_loaded_reason(const std::string& node) {
  return cat("driver-broken: nvidia-smi fails on ", node,
             " (driver_not_loaded), which Kubernetes still sees Ready: the NVIDIA kernel driver is not loaded or not "
             "answering");
}

// A Ready GPU node with two GPUs at this InternalIP; cordoned with `reason` when asked.
inline json gpu_node(const std::string& name, const std::string& ip, bool cordoned = false,
                     const std::string& reason = "", const std::string& resource_version = "7") {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", name},
              {"resourceVersion", resource_version},
              {"labels", {{"nvidia.com/gpu.product", "NVIDIA-GeForce-RTX-2070"}}}}},
            {"spec", json::object()},
            {"status",
             {{"capacity", {{"nvidia.com/gpu", "2"}}},
              {"allocatable", {{"nvidia.com/gpu", "2"}}},
              {"addresses", json::array({{{"type", "InternalIP"}, {"address", ip}}})},
              {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (cordoned) n["spec"]["unschedulable"] = true;
  if (!reason.empty()) {
    n["metadata"]["annotations"] = {{"gpuctl.io/cordon-reason", reason},
                                    {"gpuctl.io/cordoned-by", "bob"},
                                    {"gpuctl.io/cordoned-at", "2026-12-01T00:00:00Z"}};
  }
  return n;
}

// The PATCH requests sent to one node, their bodies parsed.
inline std::vector<json> patches_of(const FakeTransport& fake, const std::string& node) {
  std::vector<json> out;
  for (const auto& r : fake.requests()) {
    if (r.method == "PATCH" && FakeTransport::split(r.url).first == "/api/v1/nodes/" + node) {
      out.push_back(json::parse(r.body));
    }
  }
  return out;
}

}  // namespace gpuctl::testing::verify
