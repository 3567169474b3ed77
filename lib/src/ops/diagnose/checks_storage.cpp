// The storage checks: claims that never bind (pvc-unbound, with which of class, size, access mode
// or selector keeps every volume away) and mounts that fail (volume-mount-failed, the kubelet's
// FailedMount messages read back into NFS server, path and cause).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "check_support.hpp"
#include "classify.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

constexpr std::chrono::minutes kBindGrace{1};

std::vector<std::string> strings_of(const json& list) {
  std::vector<std::string> out;
  if (list.is_array()) {
    for (const auto& v : list) {
      if (v.is_string()) out.push_back(v.get<std::string>());
    }
  }
  return out;
}

std::optional<kube::Quantity> quantity_at(const json& object, std::initializer_list<std::string_view> path) {
  const json& v = field_at(object, path);
  if (!v.is_string()) return std::nullopt;
  auto q = kube::Quantity::parse(v.get<std::string>());
  return q ? std::optional(*q) : std::nullopt;
}

// The claim's class: spec.storageClassName, else the cluster's default class (it is set at
// admission, so an old claim without it really has none).
std::string class_of(const Snapshot& snapshot, const json& pvc) {
  const json& name = field_at(pvc, {"spec", "storageClassName"});
  if (name.is_string()) return name.get<std::string>();
  for (const auto& sc : snapshot.list(Source::storage_classes)) {
    if (kube::annotation_of(sc, "storageclass.kubernetes.io/is-default-class") == "true") return kube::name_of(sc);
  }
  return "";
}

const json* storage_class(const Snapshot& snapshot, const std::string& name) {
  for (const auto& sc : snapshot.list(Source::storage_classes)) {
    if (kube::name_of(sc) == name) return &sc;
  }
  return nullptr;
}

bool selector_matches(const json& selector, const json& pv) {
  const json& labels = field(selector, "matchLabels");
  if (!labels.is_object()) return true;
  for (const auto& [k, v] : labels.items()) {
    if (!v.is_string() || kube::label_of(pv, k) != v.get<std::string>()) return false;
  }
  return true;
}

// Why no Available PV binds the claim: counts per mismatch, the numbers that tell.
std::string static_mismatch(const Snapshot& snapshot, const json& pvc, const std::string& cls) {
  auto wanted = quantity_at(pvc, {"spec", "resources", "requests", "storage"});
  auto modes = strings_of(field_at(pvc, {"spec", "accessModes"}));
  const json& selector = field_at(pvc, {"spec", "selector"});
  std::size_t available = 0, other_class = 0, small = 0, modes_missing = 0, unselected = 0;
  std::optional<kube::Quantity> largest;
  for (const auto& pv : snapshot.list(Source::pvs)) {
    if (string_field(field(pv, "status"), "phase") != "Available") continue;
    ++available;
    if (string_field(field(pv, "spec"), "storageClassName") != cls) {
      ++other_class;
      continue;
    }
    auto have = strings_of(field_at(pv, {"spec", "accessModes"}));
    bool has_modes = std::all_of(modes.begin(), modes.end(), [&](const std::string& m) {
      return std::find(have.begin(), have.end(), m) != have.end();
    });
    auto size = quantity_at(pv, {"spec", "capacity", "storage"});
    if (!has_modes) ++modes_missing;
    if (wanted && size && *size < *wanted) {
      ++small;
      if (!largest || *largest < *size) largest = size;  // the nearest miss
    }
    if (!selector_matches(selector, pv)) ++unselected;
  }
  if (available == 0) return "no PersistentVolume is Available and its class has no provisioner";
  std::vector<std::string> parts;
  if (other_class > 0) parts.push_back(fmt::format("{} have another class than \"{}\"", other_class, cls));
  if (small > 0 && wanted) {
    parts.push_back(fmt::format("{} are too small (at most {} < {})", small, largest ? largest->to_string() : "?",
                                wanted->to_string()));
  }
  if (modes_missing > 0) {
    parts.push_back(fmt::format("{} lack access mode {}", modes_missing, fmt::join(modes, ",")));
  }
  if (unselected > 0) parts.push_back(fmt::format("{} fail its selector", unselected));
  return fmt::format("no PersistentVolume matches: of {} Available, {}", available,
                     parts.empty() ? "none is free to bind" : fmt::format("{}", fmt::join(parts, ", ")));
}

std::vector<std::string> consumers_of(const Snapshot& snapshot, const std::string& ns, const std::string& claim) {
  std::vector<std::string> out;
  for (const auto& pod : snapshot.list(Source::pods)) {
    if (kube::namespace_of(pod) != ns || kube::pod_is_terminal(pod)) continue;
    for (const auto& v : kube::array_field(field(pod, "spec"), "volumes")) {
      if (string_field(field(v, "persistentVolumeClaim"), "claimName") == claim) out.push_back(pod_ref(pod));
    }
  }
  return out;
}

std::optional<Finding> unbound_finding(const Snapshot& snapshot, const EventIndex& events, const json& pvc) {
  std::string phase = string_field(field(pvc, "status"), "phase");
  std::string ns = kube::namespace_of(pvc), name = kube::name_of(pvc);
  auto consumers = consumers_of(snapshot, ns, name);
  std::string cause;
  if (phase == "Lost") {
    cause = fmt::format("its volume {} is gone (phase Lost): the data is not reachable",
                        string_field(field(pvc, "spec"), "volumeName"));
  } else {
    auto created = util::parse_rfc3339(string_field(field(pvc, "metadata"), "creationTimestamp"));
    if (created && snapshot.now - *created < kBindGrace) return std::nullopt;
    std::string cls = class_of(snapshot, pvc);
    const json* sc = cls.empty() ? nullptr : storage_class(snapshot, cls);
    std::string provisioner = sc ? string_field(*sc, "provisioner") : "";
    if (sc && string_field(*sc, "volumeBindingMode") == "WaitForFirstConsumer") return std::nullopt;
    if (!provisioner.empty() && provisioner != "kubernetes.io/no-provisioner") {
      cause = fmt::format("the provisioner {} of class {} has not created its volume", provisioner, cls);
    } else if (!cls.empty() && sc == nullptr && storage_class(snapshot, cls) == nullptr &&
               !snapshot.list(Source::storage_classes).empty()) {
      cause = fmt::format("its storage class \"{}\" does not exist", cls);
    } else {
      cause = static_mismatch(snapshot, pvc, cls);
    }
  }
  Finding f = object_finding("pvc-unbound", Severity::error, "PersistentVolumeClaim", pvc,
                             fmt::format("claim {}/{} is {}: {}", ns, name, phase, cause));
  if (!consumers.empty())
    f.summary += fmt::format("; {} pod(s) wait on it: {}", consumers.size(), first_few(consumers));
  for (const json* e : events.about("PersistentVolumeClaim", ns, name)) {
    if (string_field(*e, "type") == "Warning" && f.evidence.size() < 2) f.evidence.push_back(event_evidence(*e));
  }
  f.evidence.push_back({fmt::format("pvc {}/{} status", ns, name), "phase=" + phase, ""});
  f.remedy = {fmt::format("kubectl describe pvc -n {} {}", ns, name), "kubectl get pv"};
  return f;
}

// A Job running pods in parallel on one ReadWriteOnce claim: pods on a second node hang.
std::vector<Finding> rwo_shared_by_parallel_jobs(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& job : snapshot.list(Source::jobs)) {
    if (kube::integer_field(field(job, "spec"), "parallelism").value_or(1) < 2) continue;
    const json& pod_spec = field_at(job, {"spec", "template", "spec"});
    json as_pod = {{"spec", pod_spec}};
    if (!is_gpu_pod(as_pod)) continue;
    for (const auto& v : kube::array_field(pod_spec, "volumes")) {
      std::string claim = string_field(field(v, "persistentVolumeClaim"), "claimName");
      for (const auto& pvc : snapshot.list(Source::pvcs)) {
        if (claim.empty() || kube::name_of(pvc) != claim || kube::namespace_of(pvc) != kube::namespace_of(job))
          continue;
        auto modes = strings_of(field_at(pvc, {"spec", "accessModes"}));
        bool shared = std::any_of(modes.begin(), modes.end(),
                                  [](const std::string& m) { return m == "ReadWriteMany" || m == "ReadOnlyMany"; });
        if (shared || modes.empty()) continue;
        Finding f = object_finding(
            "pvc-unbound", Severity::warning, "Job", job,
            fmt::format("job {}/{} runs {} GPU pods at once on claim {}, which is {}: pods placed on a second node "
                        "hang in ContainerCreating",
                        kube::namespace_of(job), kube::name_of(job),
                        kube::integer_field(field(job, "spec"), "parallelism").value_or(1), claim,
                        fmt::join(modes, ",")));
        f.evidence.push_back({fmt::format("pvc {}/{} spec.accessModes", kube::namespace_of(pvc), claim),
                              fmt::format("{}", fmt::join(modes, ",")), ""});
        f.remedy = {"use a ReadWriteMany storage class (NFS, CephFS, a parallel file system) for shared data"};
        out.push_back(std::move(f));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<Finding> check_pvc_unbound(const Snapshot& snapshot) {
  std::vector<Finding> out;
  EventIndex events(snapshot);
  for (const auto& pvc : snapshot.list(Source::pvcs)) {
    std::string phase = string_field(field(pvc, "status"), "phase");
    if (phase != "Pending" && phase != "Lost") continue;
    if (auto f = unbound_finding(snapshot, events, pvc)) out.push_back(std::move(*f));
  }
  auto rwo = rwo_shared_by_parallel_jobs(snapshot);
  out.insert(out.end(), rwo.begin(), rwo.end());
  return out;
}

std::vector<Finding> check_volume_mount_failed(const Snapshot& snapshot) {
  struct Group {
    MessageClass what;
    std::string server_path;
    std::vector<std::string> pods, nodes;
    std::vector<Evidence> evidence;
    const json* first_pod = nullptr;
  };
  std::map<std::string, Group> groups;
  std::map<std::string, const json*> pods;  // by ns/name, built at the first mount event
  for (const auto& event : snapshot.list(Source::events)) {
    std::string reason = string_field(event, "reason");
    if (reason != "FailedMount" && reason != "FailedAttachVolume") continue;
    if (pods.empty()) {
      for (const auto& p : snapshot.list(Source::pods)) pods[pod_ref(p)] = &p;
    }
    const json& involved = field(event, "involvedObject");
    auto found = pods.find(string_field(involved, "namespace") + "/" + string_field(involved, "name"));
    if (found == pods.end()) continue;
    const json* pod = found->second;
    if (!is_gpu_pod(*pod) || kube::pod_is_terminal(*pod)) continue;
    std::string message = string_field(event, "message");
    MessageClass what = classify_mount_failure(message).value_or(
        MessageClass{"mount-failed", "the volume could not be mounted", "read the event's message"});
    std::string server_path = nfs_export_of(message);
    Group& g = groups[std::string(what.id) + " " + server_path];
    g.what = what;
    g.server_path = server_path;
    if (g.first_pod == nullptr) g.first_pod = pod;
    std::string ref = pod_ref(*pod), node = string_field(field(*pod, "spec"), "nodeName");
    if (std::find(g.pods.begin(), g.pods.end(), ref) == g.pods.end()) g.pods.push_back(ref);
    if (!node.empty() && std::find(g.nodes.begin(), g.nodes.end(), node) == g.nodes.end()) g.nodes.push_back(node);
    if (g.evidence.size() < 3) g.evidence.push_back(event_evidence(event));
  }
  std::vector<Finding> out;
  for (auto& [key, g] : groups) {
    std::string what =
        g.server_path.empty() ? std::string(g.what.cause) : fmt::format("{} ({})", g.what.cause, g.server_path);
    Finding f =
        object_finding("volume-mount-failed", Severity::error, "Pod", *g.first_pod,
                       fmt::format("{} GPU pod(s) stuck in ContainerCreating on {}: {}; {}", g.pods.size(),
                                   g.nodes.empty() ? "unscheduled nodes" : first_few(g.nodes), what, g.what.hint));
    f.summary += fmt::format(" (pods {})", first_few(g.pods));
    if (g.nodes.size() != 1) f.node = "";
    f.evidence = std::move(g.evidence);
    f.remedy = {
        fmt::format("kubectl describe pod -n {} {}", kube::namespace_of(*g.first_pod), kube::name_of(*g.first_pod))};
    if (!g.server_path.empty() && !g.nodes.empty()) {
      f.remedy.push_back(
          fmt::format("ssh {} showmount -e {}", g.nodes.front(), g.server_path.substr(0, g.server_path.find(':'))));
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
