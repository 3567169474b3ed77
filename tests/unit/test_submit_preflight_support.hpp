#pragma once
// Small Kubernetes objects for the pre-flight tests.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace gpuctl::testing::preflight {

using json = nlohmann::json;

inline const std::string kH100 = "NVIDIA-H100-80GB-HBM3";
inline const std::string kA100 = "NVIDIA-A100-SXM4-80GB";

inline json gpu_node(const std::string& name, const std::string& product, int gpus) {
  json labels = {{"kubernetes.io/hostname", name}};
  if (!product.empty()) labels["nvidia.com/gpu.product"] = product;
  json resources = {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status", {{"capacity", resources}, {"allocatable", resources}}}};
}

inline json cordoned(json node) {
  node["spec"]["unschedulable"] = true;
  node["spec"]["taints"].push_back({{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}});
  return node;
}

inline json tainted(json node, const std::string& key, const std::string& value, const std::string& effect) {
  json t = {{"key", key}, {"effect", effect}};
  if (!value.empty()) t["value"] = value;
  node["spec"]["taints"].push_back(t);
  return node;
}

inline json h100_selector() { return {{"nvidia.com/gpu.product", kH100}}; }

// A Job team-a/train whose one container "main" has these limits (requests default to them).
inline json job_with_resources(const std::map<std::string, std::string>& limits, json node_selector = nullptr,
                               json tolerations = nullptr) {
  json container = {{"name", "main"}, {"image", "trainer:1"}};
  if (!limits.empty()) container["resources"]["limits"] = limits;
  json spec = {{"restartPolicy", "Never"}, {"containers", json::array({container})}};
  if (!node_selector.is_null()) spec["nodeSelector"] = node_selector;
  if (!tolerations.is_null()) spec["tolerations"] = tolerations;
  json job = {{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", {{"name", "train"}, {"namespace", "team-a"}}}};
  job["spec"]["backoffLimit"] = 2;
  job["spec"]["template"]["metadata"]["labels"] = {{"app", "train"}};
  job["spec"]["template"]["spec"] = std::move(spec);
  return job;
}

inline json job(int gpus, json node_selector = nullptr, json tolerations = nullptr) {
  std::map<std::string, std::string> limits;
  if (gpus > 0) limits["nvidia.com/gpu"] = std::to_string(gpus);
  return job_with_resources(limits, std::move(node_selector), std::move(tolerations));
}

inline json running_pod(const std::string& name, const std::string& node, int gpus, const std::string& ns = "other") {
  json container = {{"name", "c"}};
  if (gpus > 0) container["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  return {{"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"nodeName", node}, {"containers", json::array({container})}}},
          {"status", {{"phase", "Running"}}}};
}

}  // namespace gpuctl::testing::preflight
