#pragma once
// Builders of the API objects the node-administration tests replay: nodes, pods, lists, Status
// bodies and discovery documents, shaped as the API server returns them.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakes/fake_transport.hpp"

namespace gpuctl::testing::nodeadmin {

using json = nlohmann::json;

// A Ready node with this resourceVersion, taints and spec.unschedulable.
inline json node(const std::string& name, const std::string& resource_version = "1", json taints = json::array(),
                 bool unschedulable = false) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", name},
              {"uid", "uid-" + name},
              {"resourceVersion", resource_version},
              {"creationTimestamp", "2026-12-01T00:00:00Z"},
              {"labels", {{"kubernetes.io/hostname", name}, {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}}}},
            {"spec", json::object()},
            {"status",
             {{"capacity", {{"cpu", "64"}, {"nvidia.com/gpu", "8"}}},
              {"allocatable", {{"cpu", "64"}, {"nvidia.com/gpu", "8"}}},
              {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (!taints.empty()) n["spec"]["taints"] = std::move(taints);
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

// A list body ({"kind":..., "metadata":{"resourceVersion":...}, "items":[...]}).
inline std::string list_of(const std::vector<json>& items, const std::string& resource_version = "1",
                           const std::string& kind = "List") {
  return json{
      {"apiVersion", "v1"}, {"kind", kind}, {"metadata", {{"resourceVersion", resource_version}}}, {"items", items}}
      .dump();
}

// A Kubernetes Status body.
inline std::string status(int code, const std::string& reason, const std::string& message, json details = nullptr) {
  json s = {{"apiVersion", "v1"}, {"kind", "Status"}, {"status", "Failure"},
            {"code", code},       {"reason", reason}, {"message", message}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s.dump();
}

// The answer to POST selfsubjectreviews for this user.
inline std::string whoami(const std::string& user) {
  return json{{"apiVersion", "authentication.k8s.io/v1"},
              {"kind", "SelfSubjectReview"},
              {"status", {{"userInfo", {{"username", user}, {"groups", {"system:authenticated"}}}}}}}
      .dump();
}

// GET /api/v1 of a server that offers pods/eviction (policy/v1 Eviction).
inline std::string discovery_with_eviction() {
  return json{
      {"kind", "APIResourceList"},
      {"groupVersion", "v1"},
      {"resources",
       json::array({{{"name", "pods"}, {"namespaced", true}, {"kind", "Pod"}, {"verbs", {"get", "list", "delete"}}},
                    {{"name", "pods/eviction"},
                     {"namespaced", true},
                     {"kind", "Eviction"},
                     {"group", "policy"},
                     {"version", "v1"},
                     {"verbs", {"create"}}}})}}
      .dump();
}

// Requests that could change the cluster: anything but GET. (A server dry run still counts.)
inline std::size_t mutating_requests(const FakeTransport& fake) {
  std::size_t n = 0;
  for (const auto& r : fake.requests()) {
    if (r.method == "GET") continue;
    // whoami is a create of a review object, not a change to the cluster.
    if (r.url.find("/selfsubjectreviews") != std::string::npos) continue;
    n++;
  }
  return n;
}

// A running pod on node n1, with no controller unless one is given. Converts to json.
class PodBuilder {
 public:
  PodBuilder(const std::string& ns, const std::string& name) {
    pod_ = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + ns + "-" + name}, {"resourceVersion", "1"}}},
        {"spec", {{"nodeName", "n1"}, {"containers", json::array({{{"name", "main"}, {"image", "busybox"}}})}}},
        {"status", {{"phase", "Running"}}}};
  }
  PodBuilder& on_node(const std::string& node) {
    pod_["spec"]["nodeName"] = node;
    return *this;
  }
  PodBuilder& owned_by(const std::string& kind, const std::string& name, const std::string& api_version = "apps/v1") {
    pod_["metadata"]["ownerReferences"] = json::array(
        {{{"apiVersion", api_version}, {"kind", kind}, {"name", name}, {"uid", "uid-" + name}, {"controller", true}}});
    return *this;
  }
  PodBuilder& gpus(int count, const std::string& resource = "nvidia.com/gpu") {
    auto& resources = pod_["spec"]["containers"][0]["resources"];
    resources["requests"][resource] = std::to_string(count);
    resources["limits"][resource] = std::to_string(count);
    return *this;
  }
  PodBuilder& empty_dir(const std::string& volume = "scratch") {
    pod_["spec"]["volumes"].push_back({{"name", volume}, {"emptyDir", json::object()}});
    return *this;
  }
  PodBuilder& mirror() {
    pod_["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "hash";
    return *this;
  }
  PodBuilder& phase(const std::string& phase) {
    pod_["status"]["phase"] = phase;
    return *this;
  }
  PodBuilder& labels(const json& labels) {
    pod_["metadata"]["labels"] = labels;
    return *this;
  }
  PodBuilder& deleting(const std::string& since = "2026-12-01T00:00:00Z") {
    pod_["metadata"]["deletionTimestamp"] = since;
    return *this;
  }
  PodBuilder& tolerations(const json& tolerations) {
    pod_["spec"]["tolerations"] = tolerations;
    return *this;
  }
  operator json() const { return pod_; }  // NOLINT: implicit on purpose, for list_of({...})
  json build() const { return pod_; }

 private:
  json pod_;
};

}  // namespace gpuctl::testing::nodeadmin
