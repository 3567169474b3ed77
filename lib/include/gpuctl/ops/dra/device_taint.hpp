#pragma once
// Quarantining one GPU of a DRA node instead of the whole node: `gpuctl taint --device
// NODE/DEVICE KEY[=VALUE]:EFFECT` writes a DeviceTaintRule (resource.k8s.io, v1beta2 in
// Kubernetes 1.36, v1alpha3 in 1.33-1.35) whose selector names exactly that device (driver,
// pool, device), and `KEY-` / `KEY[=VALUE]:EFFECT-` delete the rules that taint exactly that
// device with that key, whoever made them. The scheduler then allocates the device to no claim
// that does not tolerate the taint (NoSchedule), and NoExecute also evicts the pods of claims
// holding it. What is sent is planned by pure functions over the rules listed now, so a client
// dry run prints exactly that; updates carry the rule's resourceVersion and a 409 reads and plans
// again (retry_on_conflict).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/dry_run.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

inline constexpr std::string_view kDeviceTaintRuleResource = "devicetaintrules";
// What gpuctl writes on the rules it makes: the device as the user named it, and who made it.
inline constexpr std::string_view kDeviceAnnotation = "gpuctl.io/device";  // "NODE/DEVICE"
inline constexpr std::string_view kDeviceTaintManagedBy = "gpuctl";

// NODE/DEVICE as typed on the command line ("gpu-7/gpu-3").
struct DeviceRef {
  std::string node;
  std::string device;
  std::string text() const { return node + "/" + device; }
};
// Pure: the node must be a node name (DNS subdomain) and the device a ResourceSlice device name
// (DNS label). Errc::invalid_argument naming the argument and the rule it breaks.
Result<DeviceRef> parse_device_ref(std::string_view text);

// Pure: the (driver, pool, device) `ref` names among the ResourceSlices of its node. `driver`
// ("" for any) narrows when the name is published by several drivers; none, or several without
// --driver, is an Errc::invalid_argument that names what the node does publish.
Result<DraDeviceId> resolve_device(const std::vector<nlohmann::json>& node_slices, const DeviceRef& ref,
                                   std::string_view driver);

// Reads the node's ResourceSlices (fieldSelector spec.nodeName=NODE) and resolves `ref`.
Result<DraDeviceId> find_device(kube::Client& client, const DeviceRef& ref, std::string_view driver);

// The version of resource.k8s.io that serves DeviceTaintRules ("v1beta2" in 1.36); where none
// does, Errc::not_served with the one line that says what an admin turns on.
Result<std::string> device_taint_rule_version(kube::Client& client);

// Pure: gpuctl-<node>-<device>-<8 hex of sha256(driver/pool/device/key)>, cut to a valid DNS
// subdomain of at most 253 characters. One rule per device and key: adding the key again
// updates it (another effect escalates NoSchedule to NoExecute in place).
std::string device_taint_rule_name(const DeviceRef& ref, const DraDeviceId& id, std::string_view key);

// Pure: the DeviceTaintRule gpuctl creates: apiVersion resource.k8s.io/<version>, the name
// above, label app.kubernetes.io/managed-by=gpuctl, annotation gpuctl.io/device=NODE/DEVICE,
// spec.deviceSelector {driver, pool, device} and spec.taint {key, value, effect} (timeAdded is
// the server's).
nlohmann::json build_device_taint_rule(std::string_view version, const DeviceRef& ref, const DraDeviceId& id,
                                       const kube::Taint& taint);

// Pure: does the rule's selector name exactly this device (driver, pool and device set and
// equal, nothing else)? And does it select the device at all (every field it sets matches; a rule
// with a device class or CEL selectors is not judged here and counts as not selecting it)?
bool selects_exactly(const nlohmann::json& rule, const DraDeviceId& id);
bool selects(const nlohmann::json& rule, const DraDeviceId& id);

// One write of a plan.
enum class DeviceTaintAction { create, update, remove };
std::string_view to_string(DeviceTaintAction action);

struct DeviceTaintWrite {
  DeviceTaintAction action = DeviceTaintAction::create;
  std::string rule;     // the rule's name
  std::string summary;  // "added k=v:NoSchedule", "changed k=v:NoSchedule to k=v:NoExecute", "removed k:NoSchedule"
  // create: the whole rule; update: a merge patch carrying metadata.resourceVersion; remove:
  // DeleteOptions with a resourceVersion precondition.
  nlohmann::json body;
};

// What one spec needs against the rules there now. No writes: `unchanged` says why.
struct DeviceTaintPlan {
  std::vector<DeviceTaintWrite> writes;
  std::string unchanged;           // "already tainted k=v:NoSchedule by rule X", "no rule taints it with k"
  std::string unchanged_rule;      // the rule already as asked ("" when none)
  std::vector<std::string> notes;  // rules that still taint the device with the key and are not ours to change
};

// Pure: the plan of one spec for the device. Adding finds the rule that taints exactly this
// device with the key (gpuctl's by name first, else anyone's): none is a create, another value
// or effect an update, the same an unchanged. Removing deletes every rule that taints exactly
// this device with the key (and the effect, when given). A rule that selects the device more
// broadly (its whole pool) and has the key is a note, never changed. Errc::invalid_argument when
// gpuctl's name is taken by a rule that selects something else.
Result<DeviceTaintPlan> plan_device_taint(const std::vector<nlohmann::json>& rules, std::string_view version,
                                          const DeviceRef& ref, const DraDeviceId& id, const TaintSpec& spec);

// ---- The pre-flight: who holds the device ---------------------------------------------------

// Pure: whether the claim's allocation of the device tolerates the taint (the tolerations its
// allocation result copied from the request; else the request's own).
bool allocation_tolerates(const nlohmann::json& claim, const DraDeviceId& id, const kube::Taint& taint);

// What the device's holder means for a taint added to it (pure): NoSchedule keeps the claim
// (a warning naming it and its pods); NoExecute evicts its pods unless the claim tolerates the
// taint: a warning with `evict_allowed` (--yes), else a refusal. `holder_claim` is the claim
// object (for its tolerations), null when none holds the device. `claims_unreadable` (the
// claims could not be listed) makes NoExecute without --yes a refusal: nobody can say who holds it.
TaintImpact device_taint_impact(const DeviceRef& ref, const DraDeviceId& id, const kube::Taint& taint,
                                const DraClaim* holder, const nlohmann::json& holder_claim,
                                const std::string& claims_unreadable, bool evict_allowed);

// Reads who holds the device (collect_dra's claims; the holder's claim object for its
// tolerations) and judges the taints the plans add.
Result<TaintImpact> device_taint_preflight(kube::Client& client, const DeviceRef& ref, const DraDeviceId& id,
                                           const std::vector<kube::Taint>& added, bool evict_allowed);

// ---- Applying -------------------------------------------------------------------------------

enum class DeviceTaintOutcome { created, updated, deleted, unchanged, failed };
std::string_view to_string(DeviceTaintOutcome outcome);

struct DeviceTaintChange {
  std::string spec;  // as typed
  std::string rule;  // the rule written or deleted; "" when none
  DeviceTaintOutcome outcome = DeviceTaintOutcome::failed;
  std::string summary;
  std::string method;   // POST, PATCH, DELETE: what was (in a dry run: would be) sent
  std::string path;     // where
  nlohmann::json body;  // what
  int conflicts = 0;
  std::optional<Error> error;
};

struct DeviceTaintRequest {
  DeviceRef ref;
  DraDeviceId id;
  std::string version;  // device_taint_rule_version
  std::vector<std::string> spec_texts;
  std::vector<TaintSpec> specs;
  DryRun dry_run = DryRun::none;
  int max_conflict_retries = 10;
};

struct DeviceTaintResult {
  std::vector<DeviceTaintChange> changes;  // one per write, or one unchanged/failed per spec
  std::vector<std::string> notes;
};

// Lists the rules, then plans and writes each spec in turn; a 409 lists and plans that spec
// again. A failed spec never stops the others. A client dry run sends nothing. The error is the
// first listing's (nothing was planned).
Result<DeviceTaintResult> apply_device_taints(kube::Client& client, const DeviceTaintRequest& request);

// gpuctl's -o json|yaml schema: kind DeviceTaintChangeList, the device {node, name, driver,
// pool}, dryRun, items [{spec, rule, result, summary, request {method, path, body}, conflicts,
// error}], notes.
nlohmann::json to_json(const DeviceTaintRequest& request, const DeviceTaintResult& result);

}  // namespace gpuctl::ops
