#pragma once
// `gpuctl restore`: a backup archive (or kubectl's own export of nodes or other objects) brought
// back onto the cluster. Every object is planned first against what the cluster holds now
// (create, update with the fields that change, unchanged, or skip and why), which is all a
// client dry run prints; applying is server-side apply with the field manager gpuctl, so a field
// another manager owns is a conflict naming it, never silently overwritten. Node state is only
// added back: labels and annotations set, missing taints added, a cordon restored; a taint or
// cordon that exists now is never removed.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/ops/common/dry_run.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// What restore reads: an archive's checked objects with its manifest, or the objects of a
// kubectl export (`kubectl get nodes -o yaml`: a v1 List; multi-document YAML) with no manifest.
struct RestoreSource {
  std::string source;       // the file, for messages
  nlohmann::json manifest;  // null for a kubectl export
  std::vector<BackupObject> objects;
  // Objects of an export gpuctl does not restore ("Pod default/x"), named in the report.
  std::vector<std::string> ignored;
};
Result<RestoreSource> read_restore_source(std::string_view bytes, std::string_view source);

// The archive's cluster must be the target (its API server URL), unless to_other_cluster.
Result<void> check_target_cluster(const nlohmann::json& manifest, std::string_view target_server,
                                  bool to_other_cluster);

struct RestoreScope {
  std::vector<const BackupKind*> only;  // --only; empty: every kind
  std::string namespace_name;           // -n: that Namespace, its objects and the volumes they claim
  nlohmann::json label_selector;        // -l parsed (kube::parse_label_selector), on the archived labels; null: none
  bool nodes_only = false;              // --nodes
};
// Whether the archived object is in scope (pure).
bool in_scope(const BackupObject& object, const RestoreScope& scope);

enum class RestoreAction { create, update, unchanged, skip };
enum class RestoreResult { applied, planned, unchanged, skipped, conflict, failed };
std::string_view to_string(RestoreAction action);
std::string_view to_string(RestoreResult result);

struct FieldChange {
  std::string field;    // "metadata.labels[nvidia.com/gpu.product]", "spec.hard[requests.nvidia.com/gpu]"
  nlohmann::json from;  // null: absent now
  nlohmann::json to;
};

struct ManagerConflict {
  std::string manager;  // the field manager that owns the field: "kubectl-edit", "gpu-operator"
  std::string field;
};

// One object's plan: what it needs, and what is sent for it.
struct RestorePlan {
  RestoreAction action = RestoreAction::unchanged;
  std::string reason;  // for skip
  std::vector<FieldChange> changes;
  nlohmann::json apply;  // the server-side apply body (create and update), or null
  // A merge patch carrying the live object's resourceVersion, for what server-side apply cannot
  // say: a node's taints with the missing ones added (an atomic list: applying it would take it
  // over from whoever wrote it last), a PV freed from its deleted claim. Null when none.
  nlohmann::json guarded_patch;
};

// What planning needs to know of the cluster besides the live object itself.
struct PlanContext {
  // PVC (namespace, name) -> uid of the claims that exist now.
  std::function<std::optional<std::string>(const std::string& ns, const std::string& name)> live_claim_uid;
  // Whether the restore also brings back this claim.
  std::function<bool(const std::string& ns, const std::string& name)> restores_claim;
};

// Pure: the plan of one archived object against its live counterpart (nullopt: absent).
RestorePlan plan_restore(const BackupObject& archived, const std::optional<nlohmann::json>& live,
                         const PlanContext& context = {});

// The fields of `want` that `have` lacks or holds with another value; maps compare key by key,
// lists as wholes (element by element, each a subset). Pure.
std::vector<FieldChange> changed_fields(const nlohmann::json& want, const nlohmann::json& have);

struct RestoreItem {
  const BackupKind* kind = nullptr;
  std::string namespace_name;
  std::string name;
  RestoreAction action = RestoreAction::unchanged;
  RestoreResult result = RestoreResult::unchanged;
  std::string reason;
  std::vector<FieldChange> changes;
  std::vector<ManagerConflict> conflicts;
  std::string error;
};

struct VerifyCheck {
  std::string check;   // pvc-bound, no-failed-mount, quota-enforced, node-state, job-created, exists
  std::string object;  // "PersistentVolumeClaim team-a/data"
  bool passed = false;
  std::string detail;
};

struct RestoreOptions {
  DryRun dry_run = DryRun::none;
  bool force_conflicts = false;
  RestoreScope scope;
  bool verify = false;
  std::chrono::seconds verify_timeout{60};  // how long --verify waits for claims to bind, quotas to count
  bool to_other_cluster = false;
  int max_parallel = 8;
  std::function<void(std::string_view)> on_progress;
  std::function<void(const RestoreItem&)> on_item;  // each object as it is done
};

struct RestoreReport {
  DryRun dry_run = DryRun::none;
  std::string source;
  std::vector<RestoreItem> items;
  std::vector<std::string> missing_nodes;
  std::vector<std::string> ignored;
  std::optional<std::vector<VerifyCheck>> verify;
  bool interrupted = false;
  std::vector<std::string> not_started;  // after Ctrl-C: "Job team-a/train", in restore order
};

// Plans every object in scope, kind by kind in the table's order, and applies (or, in a dry
// run, only plans) each; one object's failure never stops the others.
Result<RestoreReport> restore(kube::Client& client, const RestoreSource& source, const RestoreOptions& options);

// --verify: what the seed asks to check after a restore, against the cluster now.
std::vector<VerifyCheck> verify_restore(kube::Client& client, const RestoreSource& source, const RestoreReport& report,
                                        const RestoreOptions& options, std::chrono::system_clock::time_point started);

// Counts per result, and whether everything was applied, unchanged or skipped and verified.
bool restore_succeeded(const RestoreReport& report);
nlohmann::json to_json(const RestoreReport& report);

}  // namespace gpuctl::ops
