// The kinds a backup holds, as data, and what each keeps of an object: the fields that recreate
// it, never the ones the server sets (status, uid, resourceVersion, ...) or that tie it to the
// objects it was bound to before (a Job's generated selector, a PV's claim uid).
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

// In restore order: what others refer to comes before them; nodes last, on what exists.
const std::vector<BackupKind> kKinds = {
    {"namespaces", "", "v1", "Namespace", false, false},
    {"priorityclasses", "scheduling.k8s.io", "v1", "PriorityClass", false, false},
    {"runtimeclasses", "node.k8s.io", "v1", "RuntimeClass", false, false},
    {"storageclasses", "storage.k8s.io", "v1", "StorageClass", false, false},
    {"deviceclasses", "resource.k8s.io", "", "DeviceClass", false, true},
    {"persistentvolumes", "", "v1", "PersistentVolume", false, false},
    {"persistentvolumeclaims", "", "v1", "PersistentVolumeClaim", true, false},
    {"resourcequotas", "", "v1", "ResourceQuota", true, false},
    {"limitranges", "", "v1", "LimitRange", true, false},
    {"configmaps", "", "v1", "ConfigMap", true, false},
    {"secrets", "", "v1", "Secret", true, false},
    {"devicetaintrules", "resource.k8s.io", "", "DeviceTaintRule", false, true},
    {"resourceclaimtemplates", "resource.k8s.io", "", "ResourceClaimTemplate", true, true},
    {"resourceclaims", "resource.k8s.io", "", "ResourceClaim", true, true},
    {"clusterpolicies", "nvidia.com", "", "ClusterPolicy", false, true},
    {"resourceflavors", "kueue.x-k8s.io", "", "ResourceFlavor", false, true},
    {"cohorts", "kueue.x-k8s.io", "", "Cohort", false, true},
    {"clusterqueues", "kueue.x-k8s.io", "", "ClusterQueue", false, true},
    {"localqueues", "kueue.x-k8s.io", "", "LocalQueue", true, true},
    {"queues", "scheduling.run.ai", "", "Queue", false, true},
    {"daemonsets", "apps", "v1", "DaemonSet", true, false},
    {"jobs", "batch", "v1", "Job", true, false},
    {"nodes", "", "v1", "Node", false, false},
};

// kubectl's short names for the kinds admins type after --only.
struct ShortName {
  std::string_view name;
  std::string_view resource;
};
constexpr ShortName kShortNames[] = {
    {"ns", "namespaces"},
    {"pc", "priorityclasses"},
    {"sc", "storageclasses"},
    {"pv", "persistentvolumes"},
    {"pvc", "persistentvolumeclaims"},
    {"quota", "resourcequotas"},
    {"limits", "limitranges"},
    {"cm", "configmaps"},
    {"ds", "daemonsets"},
    {"no", "nodes"},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Node keys their owners rewrite all the time (GPU Feature Discovery's run time, the TTL
// controller's hint): restoring an old value would only fight them.
constexpr std::string_view kVolatileNodeKeys[] = {"nvidia.com/gfd.timestamp", "node.alpha.kubernetes.io/ttl"};

// Taints the node lifecycle controller derives from conditions and cordons
// (node.kubernetes.io/not-ready, /unschedulable, ...) and the cloud's start-up taint: the
// system's, set again by it; a restored copy would outlive the state it stood for.
bool is_system_taint(std::string_view key) {
  return key.starts_with("node.kubernetes.io/") || key == "node.cloudprovider.kubernetes.io/uninitialized";
}

bool has_prefix(std::string_view key, const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return true;
  return std::ranges::any_of(prefixes, [&](const std::string& p) { return key.starts_with(p); });
}

void erase_keys(json& object, std::initializer_list<const char*> keys) {
  if (!object.is_object()) return;
  for (const char* k : keys) object.erase(k);
}

// Drops the map entry `key` of object[field] and the map itself when it ends empty.
void erase_entry(json& object, const char* field, std::string_view key) {
  if (!object.is_object() || !object.contains(field) || !object[field].is_object()) return;
  object[field].erase(std::string(key));
  if (object[field].empty()) object.erase(field);
}

json filtered_map(const json& map, const std::vector<std::string>& prefixes) {
  json out = json::object();
  if (!map.is_object()) return out;
  for (const auto& [k, v] : map.items()) {
    if (has_prefix(k, prefixes) && std::ranges::find(kVolatileNodeKeys, k) == std::end(kVolatileNodeKeys)) out[k] = v;
  }
  return out;
}

// What the server sets on every object, and what a controller adds that it adds again.
void strip_metadata(json& metadata) {
  erase_keys(metadata, {"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "managedFields", "selfLink", "finalizers"});
  erase_entry(metadata, "annotations", "deprecated.daemonset.template.generation");
}

json strip_node(const json& node, const std::vector<std::string>& prefixes) {
  json out = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kube::name_of(node)}}}};
  json labels = filtered_map(kube::field_at(node, {"metadata", "labels"}), prefixes);
  json annotations = filtered_map(kube::field_at(node, {"metadata", "annotations"}), prefixes);
  if (!labels.empty()) out["metadata"]["labels"] = std::move(labels);
  if (!annotations.empty()) out["metadata"]["annotations"] = std::move(annotations);
  json taints = json::array();
  for (const auto& t : kube::array_field(kube::field(node, "spec"), "taints")) {
    const std::string key = kube::string_field(t, "key");
    if (!has_prefix(key, prefixes) || is_system_taint(key)) continue;
    json kept = t;
    kept.erase("timeAdded");  // set by the server for NoExecute taints
    taints.push_back(std::move(kept));
  }
  if (!taints.empty()) out["spec"]["taints"] = std::move(taints);
  if (kube::node_unschedulable(node)) out["spec"]["unschedulable"] = true;
  return out;
}

// The labels the Job controller generates from the Job's uid; a recreated Job gets new ones.
void strip_job_labels(json& labels) {
  if (!labels.is_object()) return;
  for (const char* k :
       {"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"})
    labels.erase(k);
}

void strip_job(json& job) {
  json& spec = job["spec"];
  if (!kube::bool_field(spec, "manualSelector")) spec.erase("selector");
  if (job["metadata"].contains("labels")) {
    strip_job_labels(job["metadata"]["labels"]);
    if (job["metadata"]["labels"].empty()) job["metadata"].erase("labels");
  }
  if (spec.contains("template") && spec["template"].contains("metadata")) {
    json& template_metadata = spec["template"]["metadata"];
    if (template_metadata.contains("labels")) {
      strip_job_labels(template_metadata["labels"]);
      if (template_metadata["labels"].empty()) template_metadata.erase("labels");
    }
    template_metadata.erase("creationTimestamp");
  }
  erase_entry(job["metadata"], "annotations", "batch.kubernetes.io/job-tracking");
}

}  // namespace

std::string BackupKind::folder() const {
  return group.empty() ? std::string(resource) : std::string(resource) + "." + std::string(group);
}

std::string BackupObject::path() const {
  std::string out = kind->folder() + "/";
  if (!namespace_name.empty()) out += namespace_name + "/";
  return out + name + ".yaml";
}

std::string BackupObject::label() const {
  return std::string(kind->kind) + " " + (namespace_name.empty() ? "" : namespace_name + "/") + name;
}

const std::vector<BackupKind>& backup_kinds() { return kKinds; }

const BackupKind* find_backup_kind(std::string_view name) {
  const std::string wanted = lower(name);
  for (const auto& s : kShortNames) {
    if (wanted == s.name) return find_backup_kind(s.resource);
  }
  for (const auto& k : kKinds) {
    if (wanted == k.folder() || wanted == k.resource || wanted == lower(k.kind)) return &k;
    // kubectl's singular: "node", "resourcequota"
    if (wanted + "s" == k.resource) return &k;
  }
  return nullptr;
}

std::string claim_left_out_reason(const nlohmann::json& claim) {
  if (kube::annotation_of(claim, kExtendedResourceClaimAnnotation)) {
    return "made by the scheduler for a pod's extended-resource request; it makes it again for the pod, so it is "
           "never backed up or restored";
  }
  for (const auto& owner : kube::array_field(kube::field(claim, "metadata"), "ownerReferences")) {
    if (kube::string_field(owner, "kind") == "Pod") {
      return fmt::format(
          "made for pod {} from its claim template; the pod's controller makes it again, so it is never "
          "backed up or restored",
          kube::string_field(owner, "name"));
    }
  }
  return "";
}

std::string left_out_reason(const nlohmann::json& object) {
  if (!kube::string_field(object, "apiVersion").starts_with("resource.k8s.io/")) return "";
  const std::string kind = kube::string_field(object, "kind");
  if (kind == "ResourceSlice") {
    return "published by its DRA driver for the devices it finds on the node; never backed up or restored";
  }
  return kind == "ResourceClaim" ? claim_left_out_reason(object) : "";
}

const BackupKind* backup_kind_of(const nlohmann::json& object) {
  const std::string api_version = kube::string_field(object, "apiVersion");
  const std::string kind = kube::string_field(object, "kind");
  const auto slash = api_version.find('/');
  const std::string_view group =
      slash == std::string::npos ? std::string_view{} : std::string_view(api_version).substr(0, slash);
  for (const auto& k : kKinds) {
    if (k.kind == kind && k.group == group) return &k;
  }
  return nullptr;
}

nlohmann::json strip_for_backup(const BackupKind& kind, nlohmann::json object,
                                const std::vector<std::string>& node_key_prefixes) {
  if (!object.is_object()) return object;
  if (kind.resource == "nodes") return strip_node(object, node_key_prefixes);
  object.erase("status");
  if (object.contains("metadata")) strip_metadata(object["metadata"]);
  if (kind.resource == "namespaces") {
    object.erase("spec");  // spec.finalizers: the server's
  } else if (kind.resource == "jobs" && object.contains("spec")) {
    strip_job(object);
  } else if (kind.resource == "persistentvolumeclaims") {
    // Without these the PV controller binds the claim again to its volumeName; with them it
    // takes the new claim for one already bound and marks it Lost.
    for (const char* a : {"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller",
                          "volume.kubernetes.io/selected-node"})
      erase_entry(object["metadata"], "annotations", a);
  } else if (kind.resource == "persistentvolumes") {
    // The claim is named, not its uid: the recreated claim has a new one.
    if (object.contains("spec") && object["spec"].contains("claimRef")) {
      erase_keys(object["spec"]["claimRef"], {"uid", "resourceVersion"});
    }
    erase_entry(object["metadata"], "annotations", "pv.kubernetes.io/bound-by-controller");
  } else if (kind.resource == "daemonsets" && object.contains("spec")) {
    object["spec"].erase("templateGeneration");
    if (object["spec"].contains("template") && object["spec"]["template"].contains("metadata"))
      object["spec"]["template"]["metadata"].erase("creationTimestamp");
  }
  return object;
}

}  // namespace gpuctl::ops
