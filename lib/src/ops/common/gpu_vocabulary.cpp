#include "gpuctl/ops/common/gpu_vocabulary.hpp"

#include <nlohmann/json.hpp>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::ops {

const std::vector<std::string_view>& gpu_product_label_keys() {
  static const std::vector<std::string_view> keys = {
      "nvidia.com/gpu.product",            // GPU Feature Discovery / GPU Operator
      "cloud.google.com/gke-accelerator",  // GKE
      "k8s.amazonaws.com/accelerator",     // EKS
      "gpu.nvidia.com/class",              // CoreWeave
      "skypilot.co/accelerator",           // SkyPilot
      "accelerator",                       // the convention many admins write by hand
  };
  return keys;
}

std::pair<std::string, std::string> gpu_product_of(const nlohmann::json& node) {
  for (auto key : gpu_product_label_keys()) {
    if (auto value = kube::label_of(node, key); value && !value->empty()) return {*value, std::string(key)};
  }
  return {};
}

bool is_gpu_node(const nlohmann::json& node) {
  const nlohmann::json& capacity = kube::field_at(node, {"status", "capacity"});
  if (capacity.is_object()) {
    for (const auto& [name, value] : capacity.items()) {
      if (is_nvidia_resource(name)) return true;
    }
  }
  return !gpu_product_of(node).first.empty();
}

bool looks_like_device_plugin(const nlohmann::json& ds) {
  const std::string name = kube::name_of(ds);
  if (name.find("mps-control-daemon") != std::string::npos) return false;
  return name.find("nvidia-device-plugin") != std::string::npos ||
         kube::label_of(ds, "app.kubernetes.io/name") == "nvidia-device-plugin" ||
         kube::label_of(ds, "app") == "nvidia-device-plugin-daemonset" ||
         kube::label_of(ds, "name") == "nvidia-device-plugin-ds";
}

}  // namespace gpuctl::ops
