// The checks that read a GPU node's own status: conditions (node, network, pressure) and what the
// device plugin registered (capacity and allocatable of nvidia.com/* resources).
#include <map>
#include <optional>

#include <fmt/format.h>

#include "check_support.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using json = nlohmann::json;
using kube::field;
using kube::string_field;

using Condition = kube::NodeCondition;
using support::first_few;
using support::gpu_pods_by_node;
using support::node_finding;

Evidence condition_evidence(const std::string& node, const Condition& c) {
  std::string text = fmt::format("{}={}", c.type, c.status);
  if (!c.reason.empty()) text += " reason=" + c.reason;
  if (!c.message.empty()) text += ": " + c.message;
  return {fmt::format("node {} condition {}", node, c.type), text, c.last_transition_time};
}

// " for 2h13m" since the condition last changed, "" when its time is unknown.
std::string held_for(const Snapshot& snapshot, const Condition& c) {
  auto since = util::parse_rfc3339(c.last_transition_time);
  if (!since || *since > snapshot.now) return "";
  return " for " + util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(snapshot.now - *since));
}

}  // namespace

std::vector<Finding> check_node_not_ready(const Snapshot& snapshot) {
  std::vector<Finding> out;
  std::optional<std::map<std::string, std::vector<std::string>>> stranded;  // read at the first node down
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node)) continue;
    std::string name = kube::name_of(node);
    auto ready = support::node_condition(node, "Ready");
    if (ready && ready->status == "True") continue;
    // No Ready condition at all: the kubelet never reported, which the API shows as Unknown.
    Condition c = ready.value_or(Condition{"Ready", "Unknown", "", "the node has no Ready condition", ""});
    std::string state = c.status == "False" ? "NotReady" : "Unknown";
    std::string summary = fmt::format("{} is {}{}", name, state, held_for(snapshot, c));
    if (!c.reason.empty()) summary += fmt::format(" ({})", c.reason);
    if (!stranded) stranded = gpu_pods_by_node(snapshot);
    const auto& pods = (*stranded)[name];
    if (!pods.empty()) summary += fmt::format("; {} GPU pod(s) stranded there: {}", pods.size(), first_few(pods));
    Finding f = node_finding("node-not-ready", Severity::critical, name, std::move(summary));
    f.evidence.push_back(condition_evidence(name, c));
    f.remedy = {fmt::format("kubectl describe node {}", name),
                fmt::format("ssh {} journalctl -u kubelet --since -1h", name),
                fmt::format("gpuctl cordon {} --reason 'node {}'", name, state)};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_node_network_unavailable(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node)) continue;
    auto c = support::node_condition(node, "NetworkUnavailable");
    if (!c || c->status != "True") continue;
    std::string name = kube::name_of(node);
    Finding f = node_finding(
        "node-network-unavailable", Severity::error, name,
        fmt::format("{} has no working pod network{} ({}); pods placed there hang in ContainerCreating", name,
                    held_for(snapshot, *c), c->reason.empty() ? "NetworkUnavailable=True" : c->reason));
    f.evidence.push_back(condition_evidence(name, *c));
    f.remedy = {fmt::format("kubectl get pods -n kube-system -o wide --field-selector spec.nodeName={}", name),
                fmt::format("kubectl describe node {}", name)};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_node_pressure(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node)) continue;
    std::string name = kube::name_of(node);
    std::vector<Condition> under;
    for (const char* type : {"MemoryPressure", "DiskPressure", "PIDPressure"}) {
      if (auto c = support::node_condition(node, type); c && c->status == "True") under.push_back(*c);
    }
    if (under.empty()) continue;
    std::vector<std::string> kinds;
    for (const auto& c : under) kinds.push_back(c.type + held_for(snapshot, c));
    Finding f = node_finding(
        "node-pressure", Severity::warning, name,
        fmt::format("{} is under {}: the kubelet evicts pods and admits no new ones", name, fmt::join(kinds, ", ")));
    for (const auto& c : under) f.evidence.push_back(condition_evidence(name, c));
    f.remedy = {fmt::format("kubectl describe node {}", name),
                fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={}", name)};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_device_plugin_missing(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const auto dra_nodes = support::dra_gpu_nodes(snapshot);
  for (const auto& node : snapshot.list(Source::nodes)) {
    auto [product, label] = gpu_product_of(node);
    auto present = kube::label_of(node, "nvidia.com/gpu.present");
    bool looks_gpu = !product.empty() || present == "true";
    // GPUs the DRA driver publishes need no device plugin: GFD's labels stay on such nodes.
    if (!looks_gpu || support::gpus_as_dra_only(node, dra_nodes)) continue;
    const json& capacity = field(field(node, "status"), "capacity");
    bool advertises = false;
    if (capacity.is_object()) {
      for (const auto& [resource, q] : capacity.items()) advertises = advertises || is_nvidia_resource(resource);
    }
    if (advertises) continue;
    std::string name = kube::name_of(node);
    std::string why = !product.empty() ? fmt::format("{}={}", label, product) : "nvidia.com/gpu.present=true";
    Finding f = node_finding("device-plugin-missing", Severity::critical, name,
                             fmt::format("{} is labelled as a GPU node ({}) but advertises no nvidia.com/* resource: "
                                         "the device plugin never registered, and GPU pods cannot land there",
                                         name, why));
    f.evidence.push_back({fmt::format("node {} label", name), why, ""});
    f.evidence.push_back(
        {fmt::format("node {} status.capacity", name), capacity.is_object() ? capacity.dump() : "{}", ""});
    f.remedy = {fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={} | grep -i nvidia", name),
                fmt::format("kubectl describe node {}", name)};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_gpu_unhealthy_devices(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& node : snapshot.list(Source::nodes)) {
    const json& status = field(node, "status");
    kube::ResourceList capacity = kube::parse_resource_list(field(status, "capacity"));
    kube::ResourceList allocatable = kube::parse_resource_list(field(status, "allocatable"));
    std::string name = kube::name_of(node);
    for (const auto& [resource, cap] : capacity) {
      if (!is_nvidia_resource(resource)) continue;
      auto it = allocatable.find(resource);
      std::int64_t alloc = it == allocatable.end() ? 0 : it->second.value();
      if (alloc >= cap.value()) continue;
      Finding f = node_finding("gpu-unhealthy-devices", Severity::error, name,
                               fmt::format("{}: {} of {} {} unhealthy (capacity {}, allocatable {})", name,
                                           cap.value() - alloc, cap.value(), resource, cap.value(), alloc));
      f.evidence.push_back({fmt::format("node {} status", name),
                            fmt::format("capacity[{}]={} allocatable[{}]={}", resource, cap.value(), resource, alloc),
                            ""});
      f.remedy = {fmt::format("gpuctl gpus {}", name), fmt::format("gpuctl cordon {} --reason 'unhealthy GPU'", name)};
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
