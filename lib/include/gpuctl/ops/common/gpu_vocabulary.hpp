#pragma once
// The words every GPU capability shares: which resources are GPUs, which labels name a node's GPU
// product, what makes a node a GPU node, and the annotations gpuctl's cordon records use.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gpuctl::ops {

// The extended resource every count refers to; MIG and shared variants are listed apart.
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kNvidiaResourcePrefix = "nvidia.com/";

// Annotations gpuctl writes on cordon (`--reason`) and clears on uncordon.
inline constexpr std::string_view kCordonReasonAnnotation = "gpuctl.io/cordon-reason";
inline constexpr std::string_view kCordonByAnnotation = "gpuctl.io/cordoned-by";
inline constexpr std::string_view kCordonAtAnnotation = "gpuctl.io/cordoned-at";

// nvidia.com/gpu, nvidia.com/mig-1g.5gb, nvidia.com/gpu.shared, ...
inline bool is_nvidia_resource(std::string_view name) { return name.starts_with(kNvidiaResourcePrefix); }

// Label keys that name a node's GPU product, in the order they are consulted. Clusters use
// different schemes: GPU Feature Discovery, GKE, EKS, CoreWeave, SkyPilot, hand-made ones.
const std::vector<std::string_view>& gpu_product_label_keys();

// The node's GPU product and the label key it was read from; both empty when no key is set.
std::pair<std::string, std::string> gpu_product_of(const nlohmann::json& node);

// A node is a GPU node when it advertises any nvidia.com/* resource in capacity, or carries a
// GPU product label.
bool is_gpu_node(const nlohmann::json& node);

// Is this DaemonSet NVIDIA's device plugin, by the names and labels its static manifest
// (nvidia-device-plugin-daemonset, name=nvidia-device-plugin-ds), Helm chart
// (app.kubernetes.io/name=nvidia-device-plugin) and the GPU Operator
// (app=nvidia-device-plugin-daemonset) use? The chart's MPS control daemon is not.
bool looks_like_device_plugin(const nlohmann::json& daemon_set);

}  // namespace gpuctl::ops
