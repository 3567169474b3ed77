// The device plugin layer: is the NVIDIA device plugin running on every GPU node, healthy, at one
// version (device-plugin-unhealthy), and what do its logs say went wrong (device-plugin-log-errors)?
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "check_support.hpp"
#include "classify.hpp"
#include "gpuctl/kube/label_selector.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

std::vector<const json*> plugin_daemon_sets(const Snapshot& snapshot) {
  std::optional<json> selector;
  if (!snapshot.settings.device_plugin_selector.empty()) {
    auto parsed = kube::parse_label_selector(snapshot.settings.device_plugin_selector);
    if (parsed) selector = *parsed;
  }
  std::vector<const json*> out;
  for (const auto& ds : snapshot.list(Source::daemon_sets)) {
    if (is_device_plugin(ds, selector ? &*selector : nullptr)) out.push_back(&ds);
  }
  return out;
}

std::string ds_ref(const json& ds) { return kube::namespace_of(ds) + "/" + kube::name_of(ds); }

bool pod_ready(const json& pod) {
  for (const auto& c : kube::array_field(field(pod, "status"), "conditions")) {
    if (string_field(c, "type") == "Ready") return string_field(c, "status") == "True";
  }
  return false;
}

// What is wrong with one plugin pod, "" when it is Ready and steady.
std::string pod_trouble(const json& pod, int restart_threshold) {
  std::string phase = string_field(field(pod, "status"), "phase");
  for (const auto& status : kube::array_field(field(pod, "status"), "containerStatuses")) {
    std::string waiting = string_field(field_at(status, {"state", "waiting"}), "reason");
    std::int64_t restarts = kube::integer_field(status, "restartCount").value_or(0);
    const json& last = field_at(status, {"lastState", "terminated"});
    std::string last_exit = last.is_object()
                                ? fmt::format(", last exit {} ({})", kube::integer_field(last, "exitCode").value_or(0),
                                              string_field(last, "reason"))
                                : "";
    if (!waiting.empty() && waiting != "ContainerCreating") {
      return fmt::format("{} (restarted {} times{})", waiting, restarts, last_exit);
    }
    if (restarts >= restart_threshold) return fmt::format("restarted {} times{}", restarts, last_exit);
  }
  if (phase != "Running") return fmt::format("phase {}", phase.empty() ? "unknown" : phase);
  if (!pod_ready(pod)) return "not Ready";
  return "";
}

std::vector<std::string> images_of(const json& pod) {
  std::vector<std::string> out;
  for (const auto& c : kube::array_field(field(pod, "spec"), "containers")) out.push_back(string_field(c, "image"));
  return out;
}

// Why `ds` has no pod on `node`, in words.
std::string why_no_pod(const json& ds, const json& node) {
  const json& spec = field_at(ds, {"spec", "template", "spec"});
  auto excluded = kube::placement_exclusion(spec, node);
  if (excluded && excluded->kind == kube::NodeExclusion::Kind::taint) {
    return fmt::format("{} does not tolerate the node's taint {}", ds_ref(ds), kube::to_string(*excluded->taint));
  }
  if (excluded && excluded->kind == kube::NodeExclusion::Kind::placement) {
    return fmt::format("{}'s placement ({}) does not match the node", ds_ref(ds), kube::describe_placement(spec));
  }
  return fmt::format("the DaemonSet controller has not created {}'s pod", ds_ref(ds));
}

// GPU nodes on which no plugin DaemonSet runs a pod (clusters may run one per pool), and why
// each DaemonSet has none there.
void missing_pods(const Snapshot& snapshot, const std::vector<const json*>& daemon_sets, std::vector<Finding>& out) {
  const auto dra_nodes = dra_gpu_nodes(snapshot);
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node) || gpus_as_dra_only(node, dra_nodes)) continue;
    std::string name = kube::name_of(node);
    const auto& pods = snapshot.list(Source::plugin_pods);
    bool has_pod = std::any_of(pods.begin(), pods.end(),
                               [&](const json& p) { return string_field(field(p, "spec"), "nodeName") == name; });
    if (has_pod) continue;
    std::vector<std::string> why;
    for (const json* ds : daemon_sets) why.push_back(why_no_pod(*ds, node));
    Finding f = node_finding("device-plugin-unhealthy", Severity::critical, name,
                             fmt::format("{} has no device plugin pod: {}", name, fmt::join(why, "; ")));
    for (const json* ds : daemon_sets) {
      f.evidence.push_back({fmt::format("daemonset {} status", ds_ref(*ds)),
                            fmt::format("desiredNumberScheduled={} numberReady={}",
                                        kube::integer_field(field(*ds, "status"), "desiredNumberScheduled").value_or(0),
                                        kube::integer_field(field(*ds, "status"), "numberReady").value_or(0)),
                            ""});
    }
    const json& first = *daemon_sets.front();
    f.remedy = {fmt::format("kubectl get daemonset -n {} {} -o yaml", kube::namespace_of(first), kube::name_of(first)),
                fmt::format("kubectl describe node {}", name)};
    out.push_back(std::move(f));
  }
}

void rollout_and_versions(const json& ds, const std::vector<const json*>& pods, std::vector<Finding>& out) {
  const json& status = field(ds, "status");
  std::int64_t desired = kube::integer_field(status, "desiredNumberScheduled").value_or(0);
  std::int64_t updated = kube::integer_field(status, "updatedNumberScheduled").value_or(desired);
  std::int64_t unavailable = kube::integer_field(status, "numberUnavailable").value_or(0);
  if (updated < desired && unavailable > 0) {
    Finding f =
        object_finding("device-plugin-unhealthy", Severity::warning, "DaemonSet", ds,
                       fmt::format("device plugin rollout of {} is stuck: {} of {} pods updated, {} unavailable",
                                   ds_ref(ds), updated, desired, unavailable));
    f.evidence.push_back({fmt::format("daemonset {} status", ds_ref(ds)), status.dump(), ""});
    f.remedy = {fmt::format("kubectl rollout status daemonset -n {} {}", kube::namespace_of(ds), kube::name_of(ds))};
    out.push_back(std::move(f));
  }
  std::map<std::string, std::vector<std::string>> nodes_by_image;
  for (const json* p : pods) {
    auto images = images_of(*p);
    if (!images.empty()) nodes_by_image[images.front()].push_back(string_field(field(*p, "spec"), "nodeName"));
  }
  if (nodes_by_image.size() < 2) return;
  std::vector<std::string> parts;
  for (const auto& [image, nodes] : nodes_by_image) {
    parts.push_back(fmt::format("{} on {} node(s) ({})", image, nodes.size(), first_few(nodes, 2)));
  }
  Finding f = object_finding("device-plugin-unhealthy", Severity::warning, "DaemonSet", ds,
                             fmt::format("the device plugin {} runs {} versions: {}", ds_ref(ds), nodes_by_image.size(),
                                         fmt::join(parts, "; ")));
  f.remedy = {fmt::format("kubectl rollout restart daemonset -n {} {}", kube::namespace_of(ds), kube::name_of(ds))};
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> check_device_plugin_unhealthy(const Snapshot& snapshot) {
  std::vector<Finding> out;
  auto daemon_sets = plugin_daemon_sets(snapshot);
  // Nodes whose GPUs are DRA devices only expect no device plugin.
  const auto dra_nodes = dra_gpu_nodes(snapshot);
  bool gpu_nodes = std::any_of(snapshot.list(Source::nodes).begin(), snapshot.list(Source::nodes).end(),
                               [&](const json& n) { return is_gpu_node(n) && !gpus_as_dra_only(n, dra_nodes); });
  if (daemon_sets.empty()) {
    if (!gpu_nodes) return out;
    Finding f;
    f.check = "device-plugin-unhealthy";
    f.severity = Severity::error;
    f.object = {"DaemonSet", "", "nvidia-device-plugin"};
    f.summary =
        "no NVIDIA device plugin DaemonSet found (by the names and labels of NVIDIA's manifest, Helm chart and GPU "
        "Operator); if yours has another name, pass --device-plugin-selector";
    f.remedy = {"kubectl get daemonsets -A | grep -i -e nvidia -e gpu"};
    out.push_back(std::move(f));
    return out;
  }
  missing_pods(snapshot, daemon_sets, out);
  for (const json* ds : daemon_sets) {
    std::vector<const json*> pods;
    for (const auto& pod : snapshot.list(Source::plugin_pods)) {
      if (kube::namespace_of(pod) == kube::namespace_of(*ds) && owned_by(pod, "DaemonSet", kube::name_of(*ds)))
        pods.push_back(&pod);
    }
    for (const json* pod : pods) {
      std::string trouble = pod_trouble(*pod, snapshot.settings.restart_threshold);
      if (trouble.empty()) continue;
      Finding f = object_finding("device-plugin-unhealthy", Severity::critical, "Pod", *pod,
                                 fmt::format("device plugin pod {} on {} is {}: the node's GPUs are not (re)registered",
                                             pod_ref(*pod), string_field(field(*pod, "spec"), "nodeName"), trouble));
      f.evidence.push_back({fmt::format("pod {} status", pod_ref(*pod)), trouble, ""});
      f.remedy = {fmt::format("kubectl logs -n {} {} --previous", kube::namespace_of(*pod), kube::name_of(*pod)),
                  fmt::format("kubectl describe pod -n {} {}", kube::namespace_of(*pod), kube::name_of(*pod))};
      out.push_back(std::move(f));
    }
    rollout_and_versions(*ds, pods, out);
  }
  return out;
}

std::vector<Finding> check_device_plugin_log_errors(const Snapshot& snapshot) {
  // One finding per pod and cause, whether the current or the previous container logged it.
  struct Seen {
    const json* log;
    MessageClass what;
    std::vector<Evidence> lines;
  };
  std::map<std::pair<std::string, std::string>, Seen> found;
  for (const auto& log : snapshot.list(Source::plugin_logs)) {
    std::string text = string_field(log, "text");
    std::string pod = string_field(log, "namespace") + "/" + string_field(log, "pod");
    std::string source = fmt::format("{}log of {}", kube::bool_field(log, "previous") ? "previous " : "", pod);
    for_each_line(text, [&](std::string_view line) {
      auto [time, body] = split_timestamp(line);
      auto what = classify_plugin_log_line(body);
      if (!what) return;
      auto [it, added] = found.try_emplace({pod, std::string(what->id)}, Seen{&log, *what, {}});
      if (it->second.lines.size() < 3) it->second.lines.push_back({source, body, time});
    });
  }
  std::vector<Finding> out;
  for (auto& [key, seen] : found) {
    const json& log = *seen.log;
    std::string node = string_field(log, "node");
    Finding f = node_finding(
        "device-plugin-log-errors", Severity::error, node,
        fmt::format("device plugin on {}: {}; {}", node.empty() ? "?" : node, seen.what.cause, seen.what.hint));
    f.object = {"Pod", string_field(log, "namespace"), string_field(log, "pod")};
    f.evidence = std::move(seen.lines);
    f.remedy = {fmt::format("kubectl logs -n {} {} -c {}{}", string_field(log, "namespace"), string_field(log, "pod"),
                            string_field(log, "container"), kube::bool_field(log, "previous") ? " --previous" : "")};
    if (!node.empty()) f.remedy.push_back(fmt::format("gpuctl gpus {}", node));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
