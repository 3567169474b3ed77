#pragma once
// Objects for the diagnose unit tests: a real GPU node (tests/fixtures/k8s-nodes, rke2 with an
// A16 vGPU, kubelet v1.31.6) and pods, jobs and events shaped as the API server returns them.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::testing::dx {

using nlohmann::json;
namespace d = gpuctl::ops::diagnose;
using d::Severity;
using d::Source;
using gpuctl::testing::fixture;

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The snapshot's clock: findings' ages are counted from here.
inline constexpr const char* kNow = "2026-12-06T12:00:00Z";

inline json fixture_gpu_node() {
  return json::parse(fixture("k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json"))["items"][0];
}

// The fixture node renamed, with `gpus` GPUs of capacity and allocatable.
inline json gpu_node(const std::string& name, int gpus) {
  json n = fixture_gpu_node();
  n["metadata"]["name"] = name;
  n["status"]["capacity"]["nvidia.com/gpu"] = std::to_string(gpus);
  n["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(gpus);
  return n;
}

inline json pod(const std::string& ns, const std::string& name, const std::string& node, int gpus,
                const std::string& phase = "Running") {
  json resources = gpus > 0 ? json{{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}} : json::object();
  json p = {{"metadata", {{"name", name}, {"namespace", ns}, {"creationTimestamp", "2026-12-06T11:00:00Z"}}},
            {"spec", {{"containers", json::array({{{"name", "main"}, {"resources", resources}}})}}},
            {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

// A pending pod the scheduler judged, with its PodScheduled condition as the scheduler writes it.
inline json unschedulable_pod(const std::string& ns, const std::string& name, int gpus, const std::string& message) {
  json p = pod(ns, name, "", gpus, "Pending");
  p["status"]["conditions"] = json::array({{{"type", "PodScheduled"},
                                            {"status", "False"},
                                            {"reason", "Unschedulable"},
                                            {"message", message},
                                            {"lastTransitionTime", "2026-12-06T11:50:00Z"}}});
  return p;
}

inline json owned(json object, const std::string& kind, const std::string& owner) {
  object["metadata"]["ownerReferences"] = json::array({{{"kind", kind}, {"name", owner}, {"controller", true}}});
  return object;
}

// A core/v1 Event as the kubelet (component "kubelet", host the node) or scheduler writes it.
inline json event(const std::string& kind, const std::string& ns, const std::string& name, const std::string& reason,
                  const std::string& message, const std::string& component = "kubelet", const std::string& host = "",
                  int count = 1) {
  json e = {{"metadata", {{"name", name + ".1"}, {"namespace", ns}}},
            {"involvedObject", {{"kind", kind}, {"namespace", ns}, {"name", name}}},
            {"reason", reason},
            {"message", message},
            {"type", "Warning"},
            {"count", count},
            {"source", {{"component", component}}},
            {"lastTimestamp", "2026-12-06T11:58:00Z"}};
  if (!host.empty()) e["source"]["host"] = host;
  return e;
}

inline d::Snapshot snapshot(std::map<d::Source, std::vector<json>> lists) {
  d::Snapshot s;
  s.now = *gpuctl::util::parse_rfc3339(kNow);
  s.lists = std::move(lists);
  return s;
}

// A list response as the API server sends it, for FakeTransport answers.
inline std::string list_of(json items) {
  return json{{"metadata", {{"resourceVersion", "9"}}}, {"items", std::move(items)}}.dump();
}

// A Ready H100 node with `capacity` GPUs of which `allocatable` are healthy (the CLI tests' node).
inline json h100_node(const std::string& name, int capacity, int allocatable) {
  return {{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", std::to_string(capacity)}}},
            {"allocatable", {{"nvidia.com/gpu", std::to_string(allocatable)}}},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

// The first line of a fixture file, as an event message or log line carries it.
inline std::string fixture_line(const std::string& path, std::size_t index = 0) {
  std::string text = fixture(path);
  std::size_t start = 0;
  for (std::size_t i = 0; i < index; ++i) start = text.find('\n', start) + 1;
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace gpuctl::testing::dx
