#pragma once
// GPU quota per namespace: the view behind `gpuctl quota` (ResourceQuota hard/used/free for the
// enforced `requests.nvidia.com/*` keys, LimitRange maxima, pods and jobs held back by quota),
// the check that flags quota keys Kubernetes accepts but never enforces, and the pure builders
// and plans behind `gpuctl quota set|delete|fix`.
//
// The rule everything here follows (docs/kubernetes-api.md §1.6): for extended resources only
// quota keys with the prefix `requests.` are tracked and enforced. `nvidia.com/gpu: 8` and
// `limits.nvidia.com/gpu: 8` pass validation and are then silently ignored forever.
//
// GPUs as DRA devices are counted by ResourceClaim instead: `<class>.deviceclass.resource.k8s.io/devices`
// (the devices claims of a DeviceClass may ask for; enforced as written) and
// `count/resourceclaims.resource.k8s.io`. The view shows them for NVIDIA's classes (names ending
// in nvidia.com) beside the extended resources, and `quota set --devices/--claims` writes them.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/common/dry_run.hpp"

namespace gpuctl::kube {
class Client;
struct WriteOptions;
}  // namespace gpuctl::kube

namespace gpuctl::ops {

// The objects gpuctl owns in a namespace; it never writes or deletes objects of other names.
inline constexpr std::string_view kGpuQuotaName = "gpuctl-gpu-quota";
inline constexpr std::string_view kGpuLimitRangeName = "gpuctl-gpu-limits";
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "gpuctl";

// ---- Quota keys ---------------------------------------------------------------------------

inline constexpr std::string_view kDeviceClassQuotaSuffix = ".deviceclass.resource.k8s.io/devices";
inline constexpr std::string_view kResourceClaimsQuotaKey = "count/resourceclaims.resource.k8s.io";
// "gpu.nvidia.com" -> "gpu.nvidia.com.deviceclass.resource.k8s.io/devices".
std::string device_class_quota_key(std::string_view device_class);

// What a ResourceQuota spec.hard key means for an nvidia.com/* resource.
struct GpuQuotaKey {
  std::string key;               // as written: "requests.nvidia.com/gpu", "nvidia.com/gpu", "limits.nvidia.com/gpu"
  std::string resource;          // the resource it names: "nvidia.com/gpu"; the key itself for DRA keys
  bool enforced = false;         // only the requests. form is (DRA keys always are)
  std::string device_class;      // for <class>.deviceclass.resource.k8s.io/devices: the class
  bool resource_claims = false;  // count/resourceclaims.resource.k8s.io
};
// nullopt for keys that are not about an nvidia.com/* resource (cpu, pods, count/jobs.batch, ...)
// nor about DRA GPUs (the device class key of a class whose name ends in nvidia.com, the
// resource claim count).
std::optional<GpuQuotaKey> classify_gpu_quota_key(std::string_view key);

// One quota key Kubernetes will never enforce, with the fix.
struct QuotaFinding {
  std::string namespace_name;
  std::string quota;
  std::string key;          // "nvidia.com/gpu"
  std::string value;        // the hard value as written, "1"
  std::string replacement;  // "requests.nvidia.com/gpu"
  // "quota team-a/gpus: key nvidia.com/gpu is never enforced by Kubernetes; use
  // requests.nvidia.com/gpu (gpuctl quota fix team-a)"
  std::string message;
};

// The policy, as data: every non-`requests.` key for an nvidia.com/* resource in spec.hard.
std::vector<QuotaFinding> check_quota_keys(const nlohmann::json& quota);

// ---- The view -----------------------------------------------------------------------------

struct QuotaResourceUsage {
  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"; for DRA the key itself
  // ("gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "count/resourceclaims.resource.k8s.io")
  std::string resource;
  std::string device_class;  // the DeviceClass of a device class key, "" otherwise
  std::string key;           // the spec.hard key
  bool enforced = true;      // false: an ineffective key (see check_quota_keys)
  std::int64_t hard = 0;
  // status.used for the key; nullopt when the controller has not counted it yet (or never will,
  // for an ineffective key).
  std::optional<std::int64_t> used;
  std::optional<std::int64_t> free() const {
    if (!used) return std::nullopt;
    return hard > *used ? hard - *used : 0;
  }
};

// One ResourceQuota of a namespace that has nvidia.com/* keys.
struct GpuQuota {
  std::string name;
  bool managed_by_gpuctl = false;
  bool scoped = false;  // has spec.scopes or spec.scopeSelector: counts only some pods
  // requests.nvidia.com/gpu first, then the other extended resources, the device class keys, the
  // resource claim count
  std::vector<QuotaResourceUsage> resources;
};

// A LimitRange `max` for an nvidia.com/* resource.
struct GpuLimit {
  std::string limit_range;
  std::string type;  // "Pod" or "Container"
  std::string resource;
  std::int64_t max = 0;
};

// A pod or a controller (Job, ReplicaSet, ...) whose pods admission refused, from its events.
struct HeldBack {
  std::string kind;  // the event's involvedObject.kind: "Job", "ReplicaSet", "Pod"
  std::string name;
  AdmissionDenial denial;
  std::string reason;     // describe(denial)
  std::string last_seen;  // RFC 3339, "" when the event has no time
  std::int64_t count = 1;
};

struct NamespaceQuotaView {
  std::string namespace_name;
  std::vector<GpuQuota> quotas;  // empty: "no quota"
  // Requests of the namespace's non-terminal pods per nvidia.com/* resource (kube::pod_requests).
  std::map<std::string, std::int64_t> requested;
  std::vector<GpuLimit> limits;
  std::vector<HeldBack> held_back;
  std::vector<QuotaFinding> findings;

  // The smallest Pod (else Container) max for `resource`; nullopt when no LimitRange sets one.
  std::optional<GpuLimit> max_per_pod(std::string_view resource) const;
};

struct GpuQuotaList {
  std::vector<NamespaceQuotaView> items;  // sorted by namespace
  // What could not be read (e.g. events forbidden); the rest of the view is still right.
  std::vector<std::string> warnings;
  // Quotas, LimitRanges, pods, events and jobs left out because a field had the wrong type
  // ("resourcequota team-a/x skipped: ..."): named on stderr, exit 1.
  std::vector<std::string> skipped;
  std::vector<QuotaFinding> findings() const;  // of every item, in order
};

// The nvidia.com/* requests of non-terminal pods per namespace (kube::pod_requests), folded in
// pod by pod as list pages arrive: a fleet's pods are never held at once (holding them took
// 1.2 GB at 50,000 pods, issue 14).
struct NamespaceGpuRequests {
  std::map<std::string, std::map<std::string, std::int64_t>> by_namespace;  // only requests above 0
  std::vector<std::string> skipped;  // pods with a field of the wrong type ("pod ns/name skipped: ...")
  std::size_t seen = 0;              // pods added so far, to name one without a name

  void add(const nlohmann::json& pod);
};

struct QuotaViewInput {
  std::vector<nlohmann::json> quotas;
  std::vector<nlohmann::json> limit_ranges;
  NamespaceGpuRequests pod_requests;
  std::vector<nlohmann::json> events;
  std::vector<nlohmann::json> jobs;  // to drop held-back entries of jobs that are gone, finished or running
  bool jobs_listed = true;           // false: `jobs` could not be read; Job entries are kept unfiltered
  // When set, these namespaces are always shown (-n NS), even with no GPU quota or usage.
  std::vector<std::string> always_show;
};

// Pure: the view from listed objects. A namespace is shown when it has a quota with nvidia.com/*
// keys, a GPU LimitRange, GPU requests of non-terminal pods, or held-back pods, or is in
// always_show. Held back: Warning events whose message parse_admission_denial() reads as a quota
// or LimitRange refusal, one entry per involved object (the latest event), leaving out Jobs that
// no longer exist (other uid), have finished, or run as many pods as their parallelism.
GpuQuotaList build_quota_view(const QuotaViewInput& input);

struct QuotaViewOptions {
  std::string namespace_name;  // ignored when all_namespaces
  bool all_namespaces = false;
};

// Lists quotas, limit ranges, non-terminal pods, Warning events and jobs (of the namespace, or
// of all), then build_quota_view(). Events and jobs are best effort: when they cannot be read,
// a warning says so and held_back stays empty.
Result<GpuQuotaList> collect_quota_view(kube::Client& client, const QuotaViewOptions& options);

// The stable schema: {"apiVersion": "gpuctl.io/v1alpha1", "kind": "GPUQuotaList", "items": [...],
// "findings": [...], "warnings": [...]}.
nlohmann::json to_json(const GpuQuotaList& list);

// ---- set: the objects gpuctl owns ---------------------------------------------------------

struct QuotaSpec {
  std::string namespace_name;
  std::int64_t gpus = 0;                    // requests.nvidia.com/gpu
  std::optional<std::int64_t> max_per_pod;  // the LimitRange; nullopt: none wanted
  // Other resources ("nvidia.com/mig-1g.10gb", K): requests.<resource>: K each, sorted by name.
  std::vector<std::pair<std::string, std::int64_t>> resources;
  // DRA (class, K): <class>.deviceclass.resource.k8s.io/devices: K each, sorted by class.
  std::vector<std::pair<std::string, std::int64_t>> devices;
  std::optional<std::int64_t> claims;  // count/resourceclaims.resource.k8s.io
};

// Validates (no I/O) the pieces `gpuctl quota set` is given as text; Errc::invalid_argument with
// the flag and the fix. `resources` are "NAME=K" with NAME a qualified extended resource name
// written without the requests./limits. prefix; `devices` are "CLASS=K" with CLASS a DeviceClass
// name; `claims` the count of ResourceClaims.
Result<QuotaSpec> parse_quota_spec(std::string_view namespace_name, std::string_view gpus,
                                   std::optional<std::string_view> max_per_pod,
                                   const std::vector<std::string>& resources,
                                   const std::vector<std::string>& devices = {},
                                   std::optional<std::string_view> claims = std::nullopt);
// "" when `name` is a valid namespace name (an RFC 1123 label), else what is wrong.
std::string namespace_name_problem(std::string_view name);

// The ResourceQuota gpuctl-gpu-quota: labelled managed-by=gpuctl, spec.hard requests.* keys, and
// the DRA keys the spec names.
nlohmann::json build_gpu_quota(const QuotaSpec& spec);
// The LimitRange gpuctl-gpu-limits (spec.max_per_pod must be set): type Container and type Pod
// max nvidia.com/gpu = M. Type Container also defaults nvidia.com/gpu to 0 (default and
// defaultRequest): LimitRanger refuses any container or pod without a limit for a resource that
// has a max ("No limit is specified"), which would otherwise refuse every CPU-only pod.
nlohmann::json build_gpu_limit_range(const QuotaSpec& spec);

enum class ApplyAction { create, update, unchanged };
std::string_view to_string(ApplyAction action);  // "created", "configured", "unchanged"

// What one write will do to one object.
struct ObjectPlan {
  std::string kind;  // "ResourceQuota", "LimitRange"
  std::string namespace_name;
  std::string name;
  ApplyAction action = ApplyAction::unchanged;
  // create: the desired object; update: the existing object with the desired spec, labels added,
  // and its resourceVersion (a replace that loses no concurrent update); unchanged: existing.
  nlohmann::json object;
  std::string summary;  // "requests.nvidia.com/gpu 4 -> 2"; "" for create/unchanged
};

// Pure: compare `desired` (from a build_* function) with `existing` (nullopt: not found). An
// existing object of the same name that gpuctl did not create is refused (Errc::invalid_argument).
// Only spec and gpuctl's label are compared, quantities by value ("1" equals "1000m").
Result<ObjectPlan> plan_managed_object(const nlohmann::json& desired, const std::optional<nlohmann::json>& existing);

// A new hard value below current use: the sentences that warn about it.
// used: by resource ("nvidia.com/gpu"), status.used of the existing quota or the namespace's pod
// requests when not counted; DRA keys by the key itself, from status.used only (claims are not
// pods: without the controller's count there is nothing to warn about).
std::vector<std::string> below_use_warnings(const QuotaSpec& spec, const std::map<std::string, std::int64_t>& used);

struct ApplyResult {
  ObjectPlan plan;
  nlohmann::json result;  // the server's answer (or the planned object for a client dry run)
  int conflicts = 0;
};

struct SetResult {
  std::vector<ApplyResult> objects;   // the quota, then the limit range when asked for
  std::vector<std::string> warnings;  // below_use_warnings
};

// `gpuctl quota set`: read, plan, create or replace (retrying 409 Conflict after a fresh read).
// DryRun::client: plan only, send nothing; DryRun::server: send with dryRun=All.
Result<SetResult> set_quota(kube::Client& client, const QuotaSpec& spec, DryRun dry_run);

// ---- fix ----------------------------------------------------------------------------------

struct FixPlan {
  std::string namespace_name;
  std::string quota;
  std::vector<QuotaFinding> findings;
  // The quota as read, keys rewritten to requests.<resource>, resourceVersion kept, status and
  // managedFields dropped. When the requests. key exists too (or several ineffective keys name
  // one resource), the smallest value is kept: the strictest limit the author wrote.
  nlohmann::json object;
  std::vector<std::string> changes;  // "nvidia.com/gpu=1 -> requests.nvidia.com/gpu=1"
};
// nullopt when the quota has no ineffective keys.
std::optional<FixPlan> plan_quota_fix(const nlohmann::json& quota);

struct FixItem {
  FixPlan plan;
  nlohmann::json result;
  std::optional<Error> error;
  int conflicts = 0;
};
struct FixResult {
  std::vector<FixItem> items;
  std::size_t failed() const;
};
// `gpuctl quota fix [NS]`: every quota with ineffective keys in the namespace ("" = all), each
// replaced with its resourceVersion (on 409: read again, plan again). One failure does not stop
// the others.
Result<FixResult> fix_quotas(kube::Client& client, std::string_view namespace_name, DryRun dry_run);

// ---- delete -------------------------------------------------------------------------------

struct DeleteItem {
  std::string kind;
  std::string name;
  bool deleted = false;  // false: not found
};
struct DeleteResult {
  std::string namespace_name;
  std::vector<DeleteItem> items;
};
// Deletes gpuctl-gpu-quota and gpuctl-gpu-limits (uid precondition; only with gpuctl's label).
// Neither there: an error saying so that names the quotas gpuctl did not create.
Result<DeleteResult> delete_quota(kube::Client& client, std::string_view namespace_name, DryRun dry_run);

}  // namespace gpuctl::ops
