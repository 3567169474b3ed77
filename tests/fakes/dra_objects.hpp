#pragma once
// DRA objects as the API server returns them (resource.k8s.io/v1), shaped as NVIDIA's DRA driver
// (kubernetes-sigs/dra-driver-nvidia-gpu, cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go)
// publishes them and the scheduler allocates them, for the unit tests of every DRA reader.
#include <string>

#include <nlohmann/json.hpp>

namespace gpuctl::testing::dra {

using nlohmann::json;

inline json gpu_device(const std::string& name, const std::string& uuid,
                       const std::string& product = "NVIDIA A100-SXM4-80GB", json taints = json::array()) {
  json d = {{"name", name},
            {"attributes",
             {{"type", {{"string", "gpu"}}},
              {"uuid", {{"string", uuid}}},
              {"productName", {{"string", product}}},
              {"brand", {{"string", "Nvidia"}}},
              {"architecture", {{"string", "Ampere"}}},
              {"cudaComputeCapability", {{"version", "8.0.0"}}},
              {"driverVersion", {{"version", "580.126.20"}}},
              {"cudaDriverVersion", {{"version", "13.0.0"}}},
              {"resource.kubernetes.io/pciBusID", {{"string", "0000:65:00.0"}}}}},
            {"capacity", {{"memory", {{"value", "80Gi"}}}}}};
  if (!taints.empty()) d["taints"] = taints;
  return d;
}

inline json mig_device(const std::string& name, const std::string& uuid, const std::string& parent_uuid,
                       const std::string& profile = "1g.10gb", const std::string& product = "NVIDIA A100-SXM4-80GB") {
  return {{"name", name},
          {"attributes",
           {{"type", {{"string", "mig"}}},
            {"uuid", {{"string", uuid}}},
            {"parentUUID", {{"string", parent_uuid}}},
            {"profile", {{"string", profile}}},
            {"productName", {{"string", product}}},
            {"driverVersion", {{"version", "580.126.20"}}}}},
          {"capacity", {{"memory", {{"value", "9856Mi"}}}, {"multiprocessors", {{"value", "14"}}}}}};
}

inline json device_taint(const std::string& key, const std::string& value, const std::string& effect) {
  return {{"key", key}, {"value", value}, {"effect", effect}, {"timeAdded", "2026-12-01T02:24:46Z"}};
}

inline json slice(const std::string& node, json devices, int generation = 1, int slice_count = 1,
                  const std::string& driver = "gpu.nvidia.com", const std::string& suffix = "a") {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata",
           {{"name", node + "-" + driver + "-" + suffix},
            {"ownerReferences",
             json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"controller", true}}})}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", slice_count}}},
            {"devices", devices}}}};
}

// An allocated claim: each device of `devices` taken from `node`'s pool, reserved for `pod`.
inline json claim(const std::string& ns, const std::string& name, const std::string& node, json devices,
                  const std::string& pod = "", bool extended_resource = false, int count = 1,
                  const std::string& device_class = "gpu.nvidia.com") {
  json results = json::array();
  for (const auto& d : devices) {
    results.push_back({{"request", "gpus"}, {"driver", "gpu.nvidia.com"}, {"pool", node}, {"device", d}});
  }
  json request = {{"name", "gpus"},
                  {"exactly", {{"deviceClassName", device_class}, {"allocationMode", "ExactCount"}, {"count", count}}}};
  json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"creationTimestamp", "2026-12-01T10:00:00Z"}}},
            {"spec", {{"devices", {{"requests", json::array({request})}}}}},
            {"status", json::object()}};
  if (extended_resource) c["metadata"]["annotations"] = {{"resource.kubernetes.io/extended-resource-claim", "true"}};
  if (!pod.empty()) {
    c["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", pod}}});
    c["status"]["reservedFor"] = json::array({{{"resource", "pods"}, {"name", pod}, {"uid", "u-" + pod}}});
  }
  if (!results.empty()) c["status"]["allocation"] = {{"devices", {{"results", results}}}};
  return c;
}

inline json device_class(const std::string& name, const std::string& type, const std::string& extended = "") {
  json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "DeviceClass"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"selectors", json::array({{{"cel",
                                           {{"expression",
                                             "device.driver == 'gpu.nvidia.com' && "
                                             "device.attributes['gpu.nvidia.com'].type == '" +
                                                 type + "'"}}}}})}}}};
  if (!extended.empty()) c["spec"]["extendedResourceName"] = extended;
  return c;
}

inline json taint_rule(const std::string& name, const std::string& pool, const std::string& device,
                       const std::string& key, const std::string& effect) {
  return {{"apiVersion", "resource.k8s.io/v1beta2"},
          {"kind", "DeviceTaintRule"},
          {"metadata", {{"name", name}, {"creationTimestamp", "2026-12-01T11:00:00Z"}}},
          {"spec",
           {{"deviceSelector", {{"driver", "gpu.nvidia.com"}, {"pool", pool}, {"device", device}}},
            {"taint", {{"key", key}, {"effect", effect}}}}}};
}

}  // namespace gpuctl::testing::dra
