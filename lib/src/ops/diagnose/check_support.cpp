// Helpers the diagnose checks share (check_support.hpp).
#include "check_support.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"

namespace gpuctl::ops::diagnose::support {

using json = nlohmann::json;
using kube::field;
using kube::string_field;

Finding node_finding(std::string_view check, Severity severity, const std::string& node, std::string summary) {
  Finding f;
  f.check = std::string(check);
  f.severity = severity;
  f.object = {"Node", "", node};
  f.node = node;
  f.summary = std::move(summary);
  return f;
}

Finding object_finding(std::string_view check, Severity severity, std::string kind, const json& object,
                       std::string summary) {
  Finding f;
  f.check = std::string(check);
  f.severity = severity;
  f.object = {std::move(kind), kube::namespace_of(object), kube::name_of(object)};
  f.node = string_field(field(object, "spec"), "nodeName");
  f.summary = std::move(summary);
  return f;
}

std::string first_few(const std::vector<std::string>& names, std::size_t shown) {
  std::vector<std::string> head(names.begin(),
                                names.begin() + static_cast<std::ptrdiff_t>(std::min(shown, names.size())));
  std::string text = fmt::format("{}", fmt::join(head, ", "));
  if (names.size() > shown) text += fmt::format(" and {} more", names.size() - shown);
  return text;
}

std::int64_t gpu_request(const json& pod) {
  std::int64_t total = 0;
  for (const auto& [resource, q] : kube::pod_requests(pod)) {
    if (is_nvidia_resource(resource) && q.value() > 0) total += q.value();
  }
  return total;
}

bool is_gpu_pod(const json& pod) {
  if (gpu_request(pod) > 0) return true;
  const json& claims = field(field(pod, "spec"), "resourceClaims");
  if (claims.is_array() && !claims.empty()) return true;
  return !string_field(field(field(pod, "status"), "extendedResourceClaimStatus"), "resourceClaimName").empty();
}

std::string pod_ref(const json& pod) { return kube::namespace_of(pod) + "/" + kube::name_of(pod); }

std::map<std::string, std::vector<std::string>> gpu_pods_by_node(const Snapshot& snapshot) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& pod : snapshot.list(Source::pods)) {
    std::string node = string_field(field(pod, "spec"), "nodeName");
    if (node.empty() || kube::pod_is_terminal(pod) || !is_gpu_pod(pod)) continue;
    out[node].push_back(pod_ref(pod));
  }
  return out;
}

std::string owning_job(const json& pod) {
  for (const auto& owner : kube::array_field(field(pod, "metadata"), "ownerReferences")) {
    if (string_field(owner, "kind") == "Job") return string_field(owner, "name");
  }
  return "";
}

std::map<std::string, const json*, std::less<>> nodes_by_name(const Snapshot& snapshot) {
  std::map<std::string, const json*, std::less<>> out;
  for (const auto& node : snapshot.list(Source::nodes)) out.emplace(kube::name_of(node), &node);
  return out;
}

std::string event_time(const json& event) {
  std::string t = string_field(field(event, "series"), "lastObservedTime");
  for (const char* key : {"lastTimestamp", "eventTime", "firstTimestamp"}) {
    if (t.empty()) t = string_field(event, key);
  }
  if (t.empty()) t = string_field(field(event, "metadata"), "creationTimestamp");
  return t;
}

std::int64_t event_count(const json& event) {
  if (auto n = kube::integer_field(field(event, "series"), "count"); n && *n > 0) return *n;
  if (auto n = kube::integer_field(event, "count"); n && *n > 0) return *n;
  return 1;
}

namespace {

std::string object_key(std::string_view kind, std::string_view namespace_name, std::string_view name) {
  return fmt::format("{}/{}/{}", kind, namespace_name, name);
}

}  // namespace

EventIndex::EventIndex(const Snapshot& snapshot) {
  for (const auto& event : snapshot.list(Source::events)) {
    const json& involved = field(event, "involvedObject");
    by_object_[object_key(string_field(involved, "kind"), string_field(involved, "namespace"),
                          string_field(involved, "name"))]
        .push_back(&event);
  }
}

const std::vector<const json*>& EventIndex::about(std::string_view kind, std::string_view namespace_name,
                                                  std::string_view name) const {
  static const std::vector<const json*> none;
  auto it = by_object_.find(object_key(kind, namespace_name, name));
  return it == by_object_.end() ? none : it->second;
}

std::string event_host(const json& event) {
  std::string host = string_field(field(event, "source"), "host");
  return host.empty() ? string_field(event, "reportingInstance") : host;
}

std::pair<std::string, std::string> split_timestamp(std::string_view line) {
  auto space = line.find(' ');
  if (space != std::string_view::npos && space >= 20 && line[4] == '-' && line[10] == 'T') {
    return {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
  }
  return {"", std::string(line)};
}

void for_each_line(std::string_view text, const std::function<void(std::string_view)>& each) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    each(text.substr(start, (end == std::string_view::npos ? text.size() : end) - start));
    start = end == std::string_view::npos ? text.size() : end + 1;
  }
}

Evidence event_evidence(const json& event) {
  std::string component = string_field(field(event, "source"), "component");
  if (component.empty()) component = string_field(event, "reportingComponent");
  std::string source = fmt::format("event {}", string_field(event, "reason"));
  if (!component.empty()) source += " from " + component;
  if (std::string host = event_host(event); !host.empty()) source += " on " + host;
  if (std::int64_t n = event_count(event); n > 1) source += fmt::format(" (x{})", n);
  return {source, string_field(event, "message"), event_time(event)};
}

}  // namespace gpuctl::ops::diagnose::support

#include "gpuctl/ops/drain/drain.hpp"

namespace gpuctl::ops::diagnose::support {

bool is_device_plugin(const nlohmann::json& ds, const nlohmann::json* selector) {
  if (selector == nullptr) return looks_like_device_plugin(ds);
  const json& labels = field(field(ds, "metadata"), "labels");
  return labels.is_object() && selector_matches(*selector, labels);
}

std::string selector_string(const nlohmann::json& ds) {
  const json& match = kube::field_at(ds, {"spec", "selector", "matchLabels"});
  std::vector<std::string> parts;
  if (match.is_object()) {
    for (const auto& [k, v] : match.items()) {
      if (v.is_string()) parts.push_back(k + "=" + v.get<std::string>());
    }
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

bool owned_by(const nlohmann::json& pod, std::string_view kind, std::string_view name) {
  for (const auto& owner : kube::array_field(field(pod, "metadata"), "ownerReferences")) {
    if (string_field(owner, "kind") == kind && string_field(owner, "name") == name) return true;
  }
  return false;
}

}  // namespace gpuctl::ops::diagnose::support

namespace gpuctl::ops::diagnose::support {

const NodeProbe* probe_of(const Snapshot& snapshot, std::string_view node) {
  auto it = snapshot.probes.find(node);
  return it == snapshot.probes.end() ? nullptr : &it->second;
}

std::optional<kube::NodeCondition> node_condition(const nlohmann::json& node, std::string_view type) {
  for (auto& c : kube::node_conditions(node)) {
    if (c.type == type) return std::move(c);
  }
  return std::nullopt;
}

std::optional<bool> node_ready(const nlohmann::json& node) {
  auto ready = node_condition(node, "Ready");
  return ready ? std::optional<bool>(ready->status == "True") : std::nullopt;
}

std::string gpu_name(const gpu::GpuInfo& gpu) {
  std::string name = gpu.index >= 0 ? fmt::format("GPU {}", gpu.index) : std::string("a GPU");
  if (gpu.pci_bus_id) name += fmt::format(" ({})", *gpu.pci_bus_id);
  return name;
}

Evidence probe_evidence(const NodeProbe& probe, std::string_view what, std::string text, std::string time) {
  std::string source = probe.via == "pod"          ? fmt::format("probe pod on {}: {}", probe.node, what)
                       : probe.via == "prometheus" ? fmt::format("Prometheus {}: dcgm-exporter", probe.node)
                                                   : fmt::format("ssh {}: {}", probe.node, what);
  return {std::move(source), std::move(text), std::move(time)};
}

std::string remedy_without_ssh(const std::string& remedy, const std::string& node) {
  const std::string ssh = "ssh " + node + " ";
  if (!remedy.starts_with(ssh)) return remedy;
  std::string command = remedy.substr(ssh.size());
  // ssh hands its words to the node's shell; chroot runs one program, so a quoted script (a; b)
  // gets a shell of its own. A pipe after the command still runs locally, as it does after ssh.
  if (command.starts_with('\'')) command = "sh -c " + command;
  return fmt::format("kubectl debug node/{} -it --profile=sysadmin --image=busybox:1.36 -- chroot /host {}", node,
                     command);
}

std::string_view gpu_reader(const NodeProbe& probe) {
  return probe.via == "prometheus" ? "the DCGM exporter" : "nvidia-smi";
}

std::vector<std::pair<const nlohmann::json*, const NodeProbe*>> probed_nodes(const Snapshot& snapshot) {
  std::vector<std::pair<const nlohmann::json*, const NodeProbe*>> out;
  for (const auto& node : snapshot.list(Source::nodes)) {
    const NodeProbe* probe = probe_of(snapshot, kube::name_of(node));
    if (probe != nullptr && probe->report) out.emplace_back(&node, probe);
  }
  return out;
}

namespace {

std::optional<gpu::DriverVersion> labelled_driver(const nlohmann::json& node) {
  for (const char* key : {"nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.driver.full"}) {
    if (auto text = kube::label_of(node, key)) return gpu::parse_driver_version(*text);
  }
  auto major = kube::label_of(node, "nvidia.com/cuda.driver.major");
  auto minor = kube::label_of(node, "nvidia.com/cuda.driver.minor");
  if (!major || !minor) return std::nullopt;
  std::string rev = kube::label_of(node, "nvidia.com/cuda.driver.rev").value_or("");
  return gpu::parse_driver_version(rev.empty() ? *major + "." + *minor : *major + "." + *minor + "." + rev);
}

const gpu::NodeGpuReport* answered_report(const Snapshot& snapshot, std::string_view node) {
  const NodeProbe* probe = probe_of(snapshot, node);
  return probe != nullptr && probe->report && probe->report->driver_version ? &*probe->report : nullptr;
}

}  // namespace

std::optional<gpu::DriverVersion> node_driver(const Snapshot& snapshot, const nlohmann::json& node) {
  if (const gpu::NodeGpuReport* report = answered_report(snapshot, kube::name_of(node))) {
    if (auto v = gpu::parse_driver_version(*report->driver_version)) return v;
  }
  return labelled_driver(node);
}

std::string driver_source(const Snapshot& snapshot, const std::string& node) {
  if (answered_report(snapshot, node) != nullptr) {
    return probe_evidence(*probe_of(snapshot, node), "nvidia-smi driver_version", "").source;
  }
  return fmt::format("node {} label nvidia.com/cuda.driver-version.full", node);
}

}  // namespace gpuctl::ops::diagnose::support

namespace gpuctl::ops::diagnose::support {

const DraInventory* dra_of(const Snapshot& snapshot) {
  return snapshot.dra && snapshot.dra->served ? &*snapshot.dra : nullptr;
}

std::string dra_unread(const DraInventory& inventory, std::string_view plural) {
  // collect_dra names the refused lists in its warning ("DRA objects not read (resourceclaims,
  // devicetaintrules forbidden): ..."): the plural as a whole word, never part of a longer name.
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.'; };
  for (const auto& w : inventory.warnings) {
    for (auto at = w.find(plural); at != std::string::npos; at = w.find(plural, at + 1)) {
      bool starts = at == 0 || !word_char(w[at - 1]);
      bool ends = at + plural.size() == w.size() || !word_char(w[at + plural.size()]);
      if (starts && ends) return w;
    }
  }
  return "";
}

}  // namespace gpuctl::ops::diagnose::support

namespace gpuctl::ops::diagnose::support {

std::set<std::string, std::less<>> dra_gpu_nodes(const Snapshot& snapshot) {
  std::set<std::string, std::less<>> out;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return out;
  for (const auto& d : inventory->devices) {
    if (d.driver == kNvidiaDraDriver && !d.node.empty()) out.insert(d.node);
  }
  return out;
}

bool gpus_as_dra_only(const nlohmann::json& node, const std::set<std::string, std::less<>>& dra_nodes) {
  if (!dra_nodes.contains(kube::name_of(node))) return false;
  const json& capacity = kube::field_at(node, {"status", "capacity"});
  if (!capacity.is_object()) return true;
  for (const auto& [resource, q] : capacity.items()) {
    if (is_nvidia_resource(resource)) return false;
  }
  return true;
}

}  // namespace gpuctl::ops::diagnose::support
