#pragma once
// The Job `gpuctl submit` writes: pure builders from flags (or from a batch/v1 Job manifest, which
// is checked and completed with the same defaults), and the GPU placement derived from the nodes
// themselves (which label names the product, which taints mark the GPU pools).
//
// The defaults, each overridable:
//  - GPU requests equal to limits (the API server refuses a request without a limit, and
//    extended resources cannot be overcommitted anyway);
//  - restartPolicy Never (a failed container becomes a failed pod the Job controller counts,
//    instead of a restart loop on the same GPU);
//  - backoffLimit kDefaultBackoffLimit (the API's 6 retries burn GPU hours on a bug);
//  - podFailurePolicy: pods failed by a disruption (eviction by drain, preemption, taint
//    eviction: the DisruptionTarget condition) are replaced without counting against backoffLimit;
//  - ttlSecondsAfterFinished kDefaultTtlAfterFinished, so finished jobs and their pods go away;
//  - tolerations for the taints that mark the GPU nodes of the requested type, read from the nodes.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/objects.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

inline constexpr std::int64_t kDefaultBackoffLimit = 2;
inline constexpr std::int64_t kDefaultTtlAfterFinishedSeconds = 7 * 24 * 3600;  // a week to read a failure
inline constexpr std::string_view kSubmitContainerName = "main";
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kDefaultColocateTopology = "kubernetes.io/hostname";

// The flags as typed; "" (or an empty list) means "not given".
struct SubmitFlags {
  std::string name;
  std::string image;
  std::vector<std::string> command;  // after --
  std::string gpus;
  std::string gpu_type;
  std::string gpu_resource;  // default nvidia.com/gpu; e.g. nvidia.com/mig-1g.10gb
  std::string cpu, memory, cpu_limit, memory_limit;
  std::vector<std::string> env;      // K=V
  std::vector<std::string> volumes;  // CLAIM:/path[:ro]
  std::string backoff_limit;
  std::string ttl_after_finished;  // a duration, or "none" to keep finished jobs
  std::string active_deadline;     // a duration
  std::string priority_class;
  std::vector<std::string> labels;       // K=V
  std::vector<std::string> annotations;  // K=V
  std::string colocate_with;             // a label selector of pods to share a node (topology) with
  std::string colocate_topology;
  bool count_disruptions = false;  // leave out the podFailurePolicy rule that ignores disruptions
  bool from_manifest = false;      // -f was given
};

struct VolumeSpec {
  std::string claim;
  std::string mount_path;
  bool read_only = false;
  friend bool operator==(const VolumeSpec&, const VolumeSpec&) = default;
};

// The flags, validated and typed (no I/O).
struct SubmitSpec {
  std::string name;
  std::string image;
  std::vector<std::string> command;
  std::optional<std::int64_t> gpus;
  std::string gpu_type;
  std::string gpu_resource = "nvidia.com/gpu";
  std::string cpu, memory, cpu_limit, memory_limit;  // quantities as typed (validated)
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<VolumeSpec> volumes;
  std::optional<std::int64_t> backoff_limit;
  std::optional<std::int64_t> ttl_seconds;  // set from the flag
  bool ttl_disabled = false;                // --ttl-after-finished=none
  std::optional<std::int64_t> active_deadline_seconds;
  std::string priority_class;
  std::map<std::string, std::string> labels, annotations;
  nlohmann::json colocate_selector;  // a metav1.LabelSelector, null when not given
  std::string colocate_topology = std::string(kDefaultColocateTopology);
  bool count_disruptions = false;
  bool from_manifest = false;
};

// Checks every flag; errors are invalid_argument naming the flag and the fix. With
// from_manifest, the flags that describe the container (--image, --gpus, --cpu, --env, --volume,
// COMMAND, ...) are refused: the manifest says those.
Result<SubmitSpec> parse_submit_flags(const SubmitFlags& flags);

// A -f manifest's values, checked as the flags that set them are checked (GPU counts as --gpus,
// CPU and memory as --cpu/--memory, labels as --label, ...); invalid_argument names the field.
Result<void> check_manifest_values(const nlohmann::json& job);
// Everything about a -f manifest that needs no cluster: a batch/v1 Job, every field gpuctl reads
// of the right type, check_manifest_values. complete_job runs it too.
Result<void> check_manifest(const nlohmann::json& manifest, std::string_view source);

// Where GPU jobs of a type may go, read from the nodes.
struct GpuPlacement {
  std::string resource = "nvidia.com/gpu";
  std::string gpu_type;                     // as asked; "" for any GPU node
  std::vector<std::string> products;        // the products --gpu-type matched (label values)
  bool type_found = true;                   // false: no node carries the asked type
  std::vector<std::string> known_products;  // every product in the cluster, for the error
  // label key -> values: one key and one value becomes a nodeSelector, anything else a required
  // node affinity with one term per key (nodes of one cluster may use several label schemes).
  std::map<std::string, std::vector<std::string>> selector;
  // The NoSchedule/NoExecute taints every schedulable node of a matched product carries (so they
  // mark the pool, not one node's trouble), without the node lifecycle taints.
  std::vector<kube::Taint> pool_taints;
  std::vector<nlohmann::json> tolerations;  // one per pool taint
};

// Pure. `gpu_type` matches a product exactly, else case- and punctuation-insensitively ("a100"
// matches NVIDIA-A100-SXM4-80GB and nvidia-tesla-a100); every product it matches is allowed.
GpuPlacement derive_gpu_placement(const std::vector<nlohmann::json>& nodes, std::string_view gpu_type,
                                  std::string_view resource = "nvidia.com/gpu");

// The nvidia.com/* resource a Job's pods request ("nvidia.com/gpu" first, then the first other
// one), or "" when they request none.
std::string requested_gpu_resource(const nlohmann::json& job);

// The Job, and what gpuctl added or changed, for the person submitting it.
struct BuiltJob {
  nlohmann::json job;
  std::vector<std::string> notes;     // defaults applied ("tolerates nvidia.com/gpu:NoSchedule ...")
  std::vector<std::string> warnings;  // likely mistakes that are not errors (no GPU request, ...)
};

// Pure: the Job from flags (spec.from_manifest false) in `namespace_name`.
Result<BuiltJob> build_job(const SubmitSpec& spec, const GpuPlacement& placement, const std::string& namespace_name);

// Pure: a user's batch/v1 Job checked and completed with the same defaults; explicit flags
// (--backoff-limit, --gpu-type, --label, ...) override the manifest. `namespace_name` is the one
// from -n or the context; a manifest naming another namespace is an error unless -n names it.
// `explicit_namespace` tells whether -n was given.
Result<BuiltJob> complete_job(nlohmann::json manifest, const SubmitSpec& spec, const GpuPlacement& placement,
                              const std::string& namespace_name, bool explicit_namespace, std::string_view source);

// Sends the Job with strict field validation (an unknown or misspelt field is an error, not
// dropped). With `server_dry_run`, dryRun=All, and a Pod built from the template is dry-run too,
// since quota and LimitRange admission only look at pods; a refusal of that pod is an error that
// says so (with the quota's numbers when it is a quota). Returns the Job the server answered with.
Result<nlohmann::json> send_job(kube::Client& client, const nlohmann::json& job, bool server_dry_run);

}  // namespace gpuctl::ops
