// Planning one object of a restore against the cluster as it is now, as pure functions: what
// changes (field by field, for the dry run's diff), what is sent (a server-side apply body) and
// what is skipped and why.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/ops/restore/restore.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFieldManager = "gpuctl";

std::string child_path(const std::string& path, const std::string& key) {
  if (key.find_first_of("./") != std::string::npos) return fmt::format("{}[{}]", path, key);
  return path.empty() ? key : path + "." + key;
}

// Does `have` hold everything `want` says? Maps key by key, lists element by element.
bool holds(const json& want, const json& have) {
  if (want.is_object()) {
    if (!have.is_object()) return false;
    return std::ranges::all_of(want.items(), [&](const auto& kv) {
      return holds(kv.value(), have.contains(kv.key()) ? have[kv.key()] : json());
    });
  }
  if (want.is_array()) {
    if (!have.is_array() || have.size() != want.size()) return false;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!holds(want[i], have[i])) return false;
    }
    return true;
  }
  return want.is_null() || want == have;
}

void collect_changes(const json& want, const json& have, const std::string& path, std::vector<FieldChange>& out) {
  if (want.is_object() && (have.is_object() || have.is_null())) {
    for (const auto& [k, v] : want.items()) {
      collect_changes(v, have.is_object() && have.contains(k) ? have[k] : json(), child_path(path, k), out);
    }
    return;
  }
  if (!holds(want, have)) out.push_back({path, have, want});
}

// The (manager "gpuctl", operation Apply) entry's fields under metadata.labels,
// metadata.annotations and spec: what a restore applied before and must keep applying, or the
// server would remove it as no longer wanted.
struct OwnedByRestore {
  std::set<std::string> labels, annotations;
  bool unschedulable = false;
};

std::set<std::string> owned_keys(const json& fields) {
  std::set<std::string> keys;
  if (!fields.is_object()) return keys;
  for (const auto& [k, v] : fields.items()) {
    if (k.starts_with("f:")) keys.insert(k.substr(2));
  }
  return keys;
}

OwnedByRestore owned_by_restore(const json& node) {
  OwnedByRestore owned;
  for (const auto& entry : kube::array_field(kube::field(node, "metadata"), "managedFields")) {
    if (kube::string_field(entry, "manager") != kFieldManager || kube::string_field(entry, "operation") != "Apply")
      continue;
    const json& fields = kube::field(entry, "fieldsV1");
    owned.labels = owned_keys(kube::field_at(fields, {"f:metadata", "f:labels"}));
    owned.annotations = owned_keys(kube::field_at(fields, {"f:metadata", "f:annotations"}));
    const json& spec = kube::field(fields, "f:spec");
    owned.unschedulable = spec.is_object() && spec.contains("f:unschedulable");
  }
  return owned;
}

// What a node's apply sets in one map: the archived entries that change, and every key a
// restore owns already (at its archived value, else its live one). gpuctl then owns exactly
// what restores put back.
json map_to_apply(const json& archived, const json& live, const std::set<std::string>& owned) {
  json out = json::object();
  if (archived.is_object()) {
    for (const auto& [k, v] : archived.items()) {
      const bool same = live.is_object() && live.contains(k) && live[k] == v;
      if (!same || owned.contains(k)) out[k] = v;
    }
  }
  for (const auto& k : owned) {
    if (!out.contains(k) && live.is_object() && live.contains(k)) out[k] = live[k];
  }
  return out;
}

void map_changes(const json& archived, const json& live, const std::string& path, std::vector<FieldChange>& out) {
  if (!archived.is_object()) return;
  for (const auto& [k, v] : archived.items()) {
    json now = live.is_object() && live.contains(k) ? live[k] : json();
    if (now != v) out.push_back({child_path(path, k), now, v});
  }
}

// The taints now with each archived one that is missing (by key and effect) added; none removed
// or changed. A NoExecute taint is not added back: it would evict every pod that does not
// tolerate it, which is gpuctl taint --yes's decision, not a restore's. `notes` says what was
// left as it is.
json merged_taints(const json& archived, const json& live, std::vector<FieldChange>& changes,
                   std::vector<std::string>& notes) {
  json merged = live.is_array() ? live : json::array();
  for (const auto& t : archived.is_array() ? archived : json::array()) {
    const std::string key = kube::string_field(t, "key"), effect = kube::string_field(t, "effect");
    const std::string value = kube::string_field(t, "value");
    auto same = std::ranges::find_if(merged, [&](const json& m) {
      return kube::string_field(m, "key") == key && kube::string_field(m, "effect") == effect;
    });
    if (same != merged.end()) {
      if (kube::string_field(*same, "value") != value) {
        notes.push_back(fmt::format("taint {}:{} is there with value \"{}\" (archived \"{}\"); left as it is", key,
                                    effect, kube::string_field(*same, "value"), value));
      }
      continue;
    }
    if (effect == "NoExecute") {
      notes.push_back(
          fmt::format("NoExecute taint {}={} not added back: it would evict the pods that do not "
                      "tolerate it (gpuctl taint NODE {}={}:NoExecute --yes)",
                      key, value, key, value));
      continue;
    }
    changes.push_back({fmt::format("spec.taints[{}:{}]", key, effect), json(), value});
    merged.push_back(t);
  }
  return merged;
}

RestorePlan plan_node(const BackupObject& archived, const json& live) {
  RestorePlan plan;
  const json& want_meta = kube::field(archived.object, "metadata");
  const json& live_meta = kube::field(live, "metadata");
  const OwnedByRestore owned = owned_by_restore(live);
  map_changes(kube::field(want_meta, "labels"), kube::field(live_meta, "labels"), "metadata.labels", plan.changes);
  map_changes(kube::field(want_meta, "annotations"), kube::field(live_meta, "annotations"), "metadata.annotations",
              plan.changes);
  json body = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", archived.name}}}};
  json labels = map_to_apply(kube::field(want_meta, "labels"), kube::field(live_meta, "labels"), owned.labels);
  json annotations =
      map_to_apply(kube::field(want_meta, "annotations"), kube::field(live_meta, "annotations"), owned.annotations);
  if (!labels.empty()) body["metadata"]["labels"] = std::move(labels);
  if (!annotations.empty()) body["metadata"]["annotations"] = std::move(annotations);
  const bool cordoned_now = kube::node_unschedulable(live);
  if (kube::node_unschedulable(archived.object) && !cordoned_now)
    plan.changes.push_back({"spec.unschedulable", json(), true});
  if (kube::node_unschedulable(archived.object) || (owned.unschedulable && cordoned_now))
    body["spec"]["unschedulable"] = true;
  const bool applies = !plan.changes.empty();
  std::vector<std::string> notes;
  const std::size_t before = plan.changes.size();
  json taints = merged_taints(kube::field_at(archived.object, {"spec", "taints"}),
                              kube::field_at(live, {"spec", "taints"}), plan.changes, notes);
  if (plan.changes.size() > before) {
    plan.guarded_patch = {{"metadata", {{"resourceVersion", kube::string_field(live_meta, "resourceVersion")}}},
                          {"spec", {{"taints", std::move(taints)}}}};
  }
  plan.reason = fmt::format("{}", fmt::join(notes, "; "));
  plan.action = plan.changes.empty() ? RestoreAction::unchanged : RestoreAction::update;
  if (applies) plan.apply = std::move(body);
  return plan;
}

// A PV whose claim was deleted is Released, still naming the old claim's uid: the recreated
// claim (a new uid) could never bind it. Freeing it is the one write that is not an apply.
void plan_volume_release(const BackupObject& archived, const json& live, const PlanContext& context,
                         RestorePlan& plan) {
  if (kube::string_field(kube::field(live, "status"), "phase") != "Released") return;
  const json& claim = kube::field_at(live, {"spec", "claimRef"});
  const std::string uid = kube::string_field(claim, "uid");
  const std::string ns = kube::string_field(claim, "namespace"), name = kube::string_field(claim, "name");
  const json& archived_claim = kube::field_at(archived.object, {"spec", "claimRef"});
  if (uid.empty() || kube::string_field(archived_claim, "namespace") != ns ||
      kube::string_field(archived_claim, "name") != name)
    return;
  if (!context.restores_claim || !context.restores_claim(ns, name)) return;
  if (context.live_claim_uid && context.live_claim_uid(ns, name) == uid) return;
  plan.changes.push_back({"spec.claimRef.uid", uid, json()});
  plan.guarded_patch = {
      {"metadata", {{"resourceVersion", kube::string_field(kube::field(live, "metadata"), "resourceVersion")}}},
      {"spec", {{"claimRef", {{"uid", nullptr}, {"resourceVersion", nullptr}}}}}};
}

// A controller recreates what it owns (a CronJob's Jobs); restoring them too would duplicate.
std::string controlling_owner(const json& object) {
  for (const auto& owner : kube::array_field(kube::field(object, "metadata"), "ownerReferences")) {
    if (kube::bool_field(owner, "controller"))
      return fmt::format("{} {}", kube::string_field(owner, "kind"), kube::string_field(owner, "name"));
  }
  return "";
}

}  // namespace

std::vector<FieldChange> changed_fields(const json& want, const json& have) {
  std::vector<FieldChange> out;
  json body = want;
  if (body.is_object()) {
    body.erase("apiVersion");
    body.erase("kind");
    if (body.contains("metadata") && body["metadata"].is_object()) {
      body["metadata"].erase("name");
      body["metadata"].erase("namespace");
    }
  }
  collect_changes(body, have, "", out);
  return out;
}

RestorePlan plan_restore(const BackupObject& archived, const std::optional<json>& live, const PlanContext& context) {
  RestorePlan plan;
  if (archived.kind->resource == "nodes") {
    if (!live) {
      plan.action = RestoreAction::skip;
      plan.reason = "the node no longer exists";
      return plan;
    }
    return plan_node(archived, *live);
  }
  if (std::string owner = controlling_owner(archived.object); !owner.empty()) {
    plan.action = RestoreAction::skip;
    plan.reason = fmt::format("owned by {}: its controller recreates it", owner);
    return plan;
  }
  if (!live) {
    plan.action = RestoreAction::create;
    plan.apply = archived.object;
    return plan;
  }
  plan.changes = changed_fields(archived.object, *live);
  if (archived.kind->resource == "persistentvolumes") plan_volume_release(archived, *live, context, plan);
  if (plan.changes.empty()) return plan;
  plan.action = RestoreAction::update;
  // Only the release changed: the volume's definition is already in place.
  const bool release_only = !plan.guarded_patch.is_null() && plan.changes.size() == 1;
  if (!release_only) plan.apply = archived.object;
  return plan;
}

bool in_scope(const BackupObject& object, const RestoreScope& scope) {
  const bool is_node = object.kind->resource == "nodes";
  if (scope.nodes_only && !is_node) return false;
  if (!scope.only.empty() && std::ranges::find(scope.only, object.kind) == scope.only.end()) return false;
  if (!scope.namespace_name.empty()) {
    const bool in_namespace = object.kind->namespaced ? object.namespace_name == scope.namespace_name
                              : object.kind->resource == "namespaces"
                                  ? object.name == scope.namespace_name
                                  : object.kind->resource == "persistentvolumes" &&
                                        kube::string_field(kube::field_at(object.object, {"spec", "claimRef"}),
                                                           "namespace") == scope.namespace_name;
    if (!in_namespace) return false;
  }
  if (!scope.label_selector.is_null()) {
    const json& labels = kube::field_at(object.object, {"metadata", "labels"});
    if (!selector_matches(scope.label_selector, labels.is_object() ? labels : json::object())) return false;
  }
  return true;
}

std::string_view to_string(RestoreAction action) {
  switch (action) {
    case RestoreAction::create: return "create";
    case RestoreAction::update: return "update";
    case RestoreAction::unchanged: return "unchanged";
    case RestoreAction::skip: return "skip";
  }
  return "unchanged";
}

std::string_view to_string(RestoreResult result) {
  switch (result) {
    case RestoreResult::applied: return "applied";
    case RestoreResult::planned: return "planned";
    case RestoreResult::unchanged: return "unchanged";
    case RestoreResult::skipped: return "skipped";
    case RestoreResult::conflict: return "conflict";
    case RestoreResult::failed: return "failed";
  }
  return "failed";
}

}  // namespace gpuctl::ops
