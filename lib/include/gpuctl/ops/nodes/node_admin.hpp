#pragma once
// Node administration: taints, labels and cordon records. Every change is planned by a pure
// function over the node object (so a dry run prints exactly what would be sent), then written
// as a JSON merge patch that carries the node's resourceVersion as a precondition: taints are an
// atomic list, so a concurrent writer makes the server answer 409 Conflict, and we read the
// node again, plan again and retry instead of losing the other writer's change.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/dry_run.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// ---- Validation by Kubernetes' own rules (apimachinery validation) ---------------------------

// A qualified name: an optional DNS-subdomain prefix (<= 253) and "/", then a name of <= 63
// characters [A-Za-z0-9] at both ends and [-_.A-Za-z0-9] inside. Empty on success, else why not.
std::string qualified_name_problem(std::string_view key);
// A label value: empty, or <= 63 characters of the same alphabet as a name.
std::string label_value_problem(std::string_view value);
// A node name: a DNS subdomain (lower case alphanumerics, '-' and '.', <= 253).
std::string node_name_problem(std::string_view name);

// ---- Taint and label specs, in kubectl's syntax -----------------------------------------------

struct TaintSpec {
  kube::Taint taint;  // effect empty in a removal by key ("KEY-"), which removes every effect
  bool remove = false;
};
// What is tainted decides the effects the API takes: a node's are NoSchedule, PreferNoSchedule
// and NoExecute; a DRA device's (a DeviceTaint) are None, NoSchedule and NoExecute.
enum class TaintTarget { node, device };
// "KEY[=VALUE]:EFFECT" adds, "KEY[=VALUE]:EFFECT-" and "KEY-" remove. Errc::invalid_argument
// with a message that names the spec and the rule it breaks.
Result<TaintSpec> parse_taint_spec(std::string_view text, TaintTarget target = TaintTarget::node);
bool looks_like_taint_spec(std::string_view text);  // contains ':' or ends in '-' (kubectl's split)

struct LabelSpec {
  std::string key;
  std::string value;
  bool remove = false;
};
// "key=value" adds or changes, "key-" removes.
Result<LabelSpec> parse_label_spec(std::string_view text);
bool looks_like_label_spec(std::string_view text);  // contains '=' or ends in '-'

// ---- Planned edits ----------------------------------------------------------------------------

// What a planner decides for one node: the merge patch to send (it carries
// metadata.resourceVersion), or nothing when the node is already as asked.
struct NodeEdit {
  bool changed = false;
  std::string summary;   // "added dedicated=ml:NoSchedule", "already cordoned", ...
  nlohmann::json patch;  // null when !changed
};
using NodePlanner = std::function<Result<NodeEdit>(const nlohmann::json& node)>;

// Pure planners. Each returns invalid_argument for a request the node's state refuses (an
// existing taint key with another value or effect without overwrite, a label that exists).
Result<NodeEdit> plan_taints(const nlohmann::json& node, const std::vector<TaintSpec>& specs, bool overwrite,
                             std::string_view time_added);
Result<NodeEdit> plan_labels(const nlohmann::json& node, const std::vector<LabelSpec>& specs, bool overwrite);

struct CordonRequest {
  bool cordon = true;  // false: uncordon, which also clears gpuctl's cordon record
  std::string reason;  // recorded only when non-empty
  std::string by;      // who, as the API server knows the caller
  std::string at;      // RFC 3339
  // Cordon: on a node already cordoned, write this record over the one there (a failed --verify
  // says why the node stays out). Without it an earlier record is kept, as `gpuctl cordon` does.
  bool replace_record = false;
};
Result<NodeEdit> plan_cordon(const nlohmann::json& node, const CordonRequest& request);

// A cordon reason gpuctl writes from what it found (a finding's summary, which quotes node
// output): one line of valid UTF-8, control characters and runs of blanks made one space, at most
// kCordonReasonMaxBytes (cut at a character, ending in "...").
inline constexpr std::size_t kCordonReasonMaxBytes = 256;
std::string bounded_reason(std::string_view text);

// ---- Verifying a node before it goes back into service (--verify) -----------------------------

enum class VerifyResult {
  passed,      // reached, and nothing critical found
  failed,      // reached, and found unfit: stays (or is made) cordoned, the finding as its reason
  unverified,  // could not be checked (ssh, no nvidia-smi, interrupted): left as it is
};
std::string_view to_string(VerifyResult result);

// The verdict on one node; diagnose's node-side checks make it (ops/diagnose/quarantine.hpp).
struct NodeVerification {
  std::string node;
  VerifyResult result = VerifyResult::unverified;
  std::string reason;                 // bounded_reason: the finding, or why it could not be checked; "" when passed
  std::vector<std::string> findings;  // "check: summary" of every critical finding, worst first
  std::string probe;                  // the probe's outcome (NodeProbe::outcome)
};
// Verifies the nodes (all at once), in their order; what --verify plugs in.
using NodeVerifier = std::function<std::vector<NodeVerification>(const std::vector<nlohmann::json>& nodes)>;

// Pods on a node that a new NoSchedule/NoExecute taint would not be tolerated by: NoSchedule
// keeps them running but could not have placed them; NoExecute evicts them.
bool tolerates(const nlohmann::json& pod, const kube::Taint& taint);
// One toleration ({key, operator, value, effect}) against a taint, as the scheduler matches them;
// a pod's and a device request's tolerations have the same shape.
bool toleration_matches(const nlohmann::json& toleration, const kube::Taint& taint);
std::vector<std::string> pods_not_tolerating(const std::vector<nlohmann::json>& pods, const kube::Taint& taint);

// The non-terminal pods bound to each of these nodes: one list per node for a few nodes, one
// cluster-wide list of bound pods for many (a fixed number of requests either way).
Result<std::map<std::string, std::vector<nlohmann::json>>> pods_on_nodes(kube::Client& client,
                                                                         const std::vector<std::string>& nodes);

// The pre-flight of adding taints: for NoSchedule, a warning naming the running pods that do not
// tolerate it (they keep running); for NoExecute, those pods would be evicted: a warning when
// `evict_allowed` (--yes), else a refusal. Pure.
struct TaintImpact {
  std::vector<std::string> warnings;
  std::vector<std::string> refusals;
};
TaintImpact taint_impact(const std::map<std::string, std::vector<nlohmann::json>>& pods_by_node,
                         const std::vector<TaintSpec>& specs, bool evict_allowed);

// ---- Applying edits ---------------------------------------------------------------------------

enum class ChangeOutcome { changed, unchanged, failed };
std::string_view to_string(ChangeOutcome outcome);

struct NodeChange {
  std::string node;
  ChangeOutcome outcome = ChangeOutcome::failed;
  std::string summary;
  nlohmann::json patch;                          // what was (or, in a dry run, would be) sent; null if nothing
  std::string path;                              // where it goes (PATCH), for dry-run output
  std::string content_type;                      // of the patch
  std::optional<Error> error;                    // set when outcome is failed
  nlohmann::json node_after;                     // the node as the server returned it (or as read, if unchanged)
  int conflicts = 0;                             // 409s that made us read and plan again
  std::optional<NodeVerification> verification;  // uncordon --verify: why it was (not) uncordoned
};

struct ApplyOptions {
  DryRun dry_run = DryRun::none;
  int max_conflict_retries = 10;
  std::string field_manager = "gpuctl";
};

// Plans against `node` and writes the patch; on 409 re-reads the node and plans again, up to
// max_conflict_retries times. A client dry run sends nothing.
NodeChange apply_node_edit(kube::Client& client, const nlohmann::json& node, const NodePlanner& planner,
                           const ApplyOptions& options);
// The same, reading the node by name first (a 404 is a failed change naming the node).
NodeChange apply_node_edit(kube::Client& client, std::string_view node_name, const NodePlanner& planner,
                           const ApplyOptions& options);

// The uncordon --verify planner, pure: passed uncordons (plan_cordon); failed cordons with the
// verification's reason over any earlier record; unverified changes nothing.
Result<NodeEdit> plan_verified_uncordon(const nlohmann::json& node, const NodeVerification& verification,
                                        const CordonRequest& record);
// Uncordons the nodes that passed and keeps the others out (plan_verified_uncordon, one write
// each, retried on conflicts); a node that did not pass is a failed change (Errc::process) whose
// message says why and what was done, with its verification attached. A node missing from
// `verifications` counts as unverified. `record` carries by and at for the reasons written.
std::vector<NodeChange> uncordon_verified(kube::Client& client, const std::vector<nlohmann::json>& nodes,
                                          const std::vector<NodeVerification>& verifications,
                                          const CordonRequest& record, const ApplyOptions& options);

// ---- Choosing the nodes -----------------------------------------------------------------------

// Exactly one of: names, a label selector, or every GPU node (as `gpuctl nodes` defines them).
struct NodeSelection {
  std::vector<std::string> names;
  std::string label_selector;
  bool all_gpu_nodes = false;
};
// Pure check of the selection (no I/O): one way of choosing, valid node names.
Result<void> validate_selection(const NodeSelection& selection);

// The nodes a selection means. By names: one GET per name, and a name that does not exist is
// reported in `missing` (the others go on). By selector or GPU nodes: one paginated list.
struct SelectedNodes {
  std::vector<nlohmann::json> nodes;
  std::vector<NodeChange> missing;  // failed changes for names that could not be read
};
Result<SelectedNodes> select_nodes(kube::Client& client, const NodeSelection& selection);

// gpuctl's output schema for a set of changes: apiVersion gpuctl.io/v1alpha1, kind
// NodeChangeList, operation ("taint", "label", "cordon", "uncordon"), dryRun, items; an item
// verified before its uncordon also has verification {result, reason, findings[], probe}.
nlohmann::json to_json(const std::vector<NodeChange>& changes, std::string_view operation, DryRun dry_run);
nlohmann::json to_json(const NodeVerification& verification);

}  // namespace gpuctl::ops
