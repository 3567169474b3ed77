// driver-too-old-for-cuda: GPU pods whose container needs a newer CUDA than their node's driver
// gives. The node's driver is what the probe read over ssh, else GPU Feature Discovery's labels
// (nvidia.com/cuda.driver-version.full); a node with neither is not judged.
#include <fmt/format.h>

#include "check_support.hpp"
#include "gpuctl/gpu/cuda_compat.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;
using gpu::cuda_needed_by;
using gpu::CudaVersion;
using gpu::DriverVersion;
using gpu::minimum_driver;
using gpu::older;
using gpu::parse_driver_version;

// The CUDA the node's driver supports, as GFD labels it ("11.6"), "" when unlabelled.
std::string node_cuda(const json& node) {
  auto major = kube::label_of(node, "nvidia.com/cuda.runtime-version.major");
  auto minor = kube::label_of(node, "nvidia.com/cuda.runtime-version.minor");
  if (!major || !minor) {
    major = kube::label_of(node, "nvidia.com/cuda.runtime.major");
    minor = kube::label_of(node, "nvidia.com/cuda.runtime.minor");
  }
  return major && minor ? *major + "." + *minor : "";
}

}  // namespace

std::vector<Finding> check_driver_too_old_for_cuda(const Snapshot& snapshot) {
  std::vector<Finding> out;
  auto nodes = nodes_by_name(snapshot);
  for (const auto& pod : snapshot.list(Source::pods)) {
    std::string node_name = string_field(field(pod, "spec"), "nodeName");
    if (node_name.empty() || kube::pod_is_terminal(pod) || !is_gpu_pod(pod)) continue;
    auto found = nodes.find(node_name);
    if (found == nodes.end()) continue;
    const json* node = found->second;
    auto driver = node_driver(snapshot, *node);
    if (!driver) continue;
    for (const auto& container : kube::array_field(field(pod, "spec"), "containers")) {
      auto need = cuda_needed_by(container);
      if (!need) continue;
      auto minimum = minimum_driver({need->cuda.major, need->cuda.minor, 0});
      if (!minimum || !older(*driver, *minimum)) continue;
      std::string supports = node_cuda(*node);
      Finding f = object_finding(
          "driver-too-old-for-cuda", Severity::error, "Pod", pod,
          fmt::format("{} container {} needs CUDA {} but {}'s driver {} {}: CUDA {}.{} needs driver >= {} (unless "
                      "the image ships the cuda-compat forward-compatibility package, data-center GPUs only)",
                      pod_ref(pod), string_field(container, "name"), need->cuda.text(), node_name, driver->text,
                      supports.empty() ? "is older" : "supports CUDA " + supports + " at most", need->cuda.major,
                      need->cuda.minor, minimum->text));
      f.evidence.push_back(
          {fmt::format("pod {} container {}", pod_ref(pod), string_field(container, "name")), need->source, ""});
      f.evidence.push_back({driver_source(snapshot, node_name), driver->text, ""});
      f.remedy = {supports.empty() ? std::string("use an image built for the node's CUDA version")
                                   : fmt::format("use an image built for CUDA {} or older", supports),
                  fmt::format("upgrade {}'s driver to >= {}: gpuctl drain {} --ignore-daemonsets first", node_name,
                              minimum->text, node_name)};
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
