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
//
// GPUs as DRA devices (--device-class, or on its own when the cluster serves GPUs only through
// DRA): instead of an extended-resource request, the pods claim `--gpus` devices of the class
// through a ResourceClaimTemplate <job>-gpus (with --gpu-type, a CEL selector on the product),
// created before the Job and owned by it once the Job exists, so deleting the Job removes it.
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
struct DraInventory;
}

namespace gpuctl::ops {

inline constexpr std::int64_t kDefaultBackoffLimit = 2;
inline constexpr std::int64_t kDefaultTtlAfterFinishedSeconds = 7 * 24 * 3600;  // a week to read a failure
inline constexpr std::string_view kSubmitContainerName = "main";
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kDefaultColocateTopology = "kubernetes.io/hostname";
// The pod's claim, its container's reference to it and its request in the template share this name.
inline constexpr std::string_view kDeviceClaimName = "gpus";
// NVIDIA's DeviceClass of full GPUs (kubernetes-sigs/dra-driver-nvidia-gpu's Helm chart).
inline constexpr std::string_view kNvidiaGpuDeviceClass = "gpu.nvidia.com";
// The port of a distributed job's rendezvous (torchrun's and PyTorchJob's default MASTER_PORT).
inline constexpr std::int64_t kRendezvousPort = 29500;
// The label Kueue admits a Job by (the name of a LocalQueue in the job's namespace).
inline constexpr std::string_view kKueueQueueLabel = "kueue.x-k8s.io/queue-name";
// The label the Job controller puts on every pod of a Job (Kubernetes 1.27 and later).
inline constexpr std::string_view kJobNameLabel = "batch.kubernetes.io/job-name";

// The flags as typed; "" (or an empty list) means "not given".
struct SubmitFlags {
  std::string name;
  std::string image;
  std::vector<std::string> command;  // after --
  std::string gpus;
  std::string gpu_type;
  std::string gpu_resource;  // default nvidia.com/gpu; e.g. nvidia.com/mig-1g.10gb
  std::string device_class;  // claim DRA devices of this DeviceClass instead
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
  // Slurm's names: --nodes N pods, one per node, each with --gpus-per-node GPUs (see SubmitSpec).
  std::string nodes;
  std::string gpus_per_node;
  std::string completions, parallelism;  // a plain parallel job
  std::string queue;                     // a Kueue LocalQueue
  bool avoid_failed_nodes = false;
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
  bool gpu_resource_given = false;  // --gpu-resource was typed (never replaced by a device class)
  // The DeviceClass the GPUs are claimed from: --device-class, or the one plan_submission chose
  // (choose_device_class); "" for an extended-resource request.
  std::string device_class;
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
  // --nodes N: a distributed job. An Indexed Job of N completions, all running at once, one pod
  // per node (required pod anti-affinity on the hostname), a headless Service named as the job
  // for rendezvous (the pods' subdomain, so pod i is <job>-<i>.<job>), and the environment
  // torchrun and PyTorchJob's pods expect: MASTER_ADDR, MASTER_PORT, WORLD_SIZE (nodes), RANK and
  // NODE_RANK (the completion index), PET_NNODES, PET_NPROC_PER_NODE (GPUs per node),
  // PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT. `gpus` holds --gpus-per-node then.
  std::optional<std::int64_t> nodes;
  std::optional<std::int64_t> completions, parallelism;
  std::string queue;  // --queue: labelled for Kueue and created suspended
  bool avoid_failed_nodes = false;
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
  // The ResourceClaimTemplate the pods claim their devices through; null without a device class.
  nlohmann::json claim_template;
  // The headless Service of a distributed job (--nodes), its rendezvous; null otherwise. Sent
  // after the Job, owned by it.
  nlohmann::json service;
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

// Pure: the headless Service of a distributed job (spec.nodes set): named as the job, selecting
// its pods by the Job controller's job-name label, the rendezvous port, and addresses published
// before the pods are ready (they resolve each other while starting). No owner yet: the Job's uid
// is known only once it exists (send_submission adds it).
nlohmann::json build_rendezvous_service(const SubmitSpec& spec, const std::string& namespace_name);

// ---- GPUs as DRA devices -----------------------------------------------------------------

// "<job>-gpus": the ResourceClaimTemplate of a job.
std::string claim_template_name(std::string_view job_name);

// Pure: the ResourceClaimTemplate (resource.k8s.io/v1) of a flags-built job whose
// spec.device_class is set: one request kDeviceClaimName, exactly {deviceClassName,
// allocationMode ExactCount, count: --gpus}, with --gpu-type a CEL selector from
// product_selector_expression(); labelled managed-by gpuctl.
nlohmann::json build_claim_template(const SubmitSpec& spec, const std::string& namespace_name);

// "2 devices of DeviceClass gpu.nvidia.com" from a template build_claim_template made.
std::string describe_claim_template(const nlohmann::json& claim_template);

// Whether the cluster serves `resource` as an extended resource: some node's allocatable (or
// capacity) has it above zero.
bool any_node_offers(const std::vector<nlohmann::json>& nodes, std::string_view resource);

// Whether plan_submission needs the DRA objects: --device-class was given, or the flags ask for
// nvidia.com/gpu that no node offers (the cluster may serve GPUs only through DRA).
bool wants_dra(const SubmitSpec& spec, const std::vector<nlohmann::json>& nodes);

struct DeviceClassChoice {
  std::string device_class;  // "" : keep the extended-resource request
  std::string notice;        // why gpuctl chose a class on its own, for stderr; "" otherwise
};
// Pure. --device-class: it must exist (invalid_argument naming the classes that do; a cluster
// without resource.k8s.io/v1 is an error too). Without it, for flags asking for nvidia.com/gpu:
// when no node offers it, no DeviceClass has it as extendedResourceName (the scheduler then
// serves the request through DRA itself) and devices of NVIDIA's driver exist, the class
// gpu.nvidia.com, with a notice that says so.
Result<DeviceClassChoice> choose_device_class(const SubmitSpec& spec, const std::vector<nlohmann::json>& nodes,
                                              const DraInventory& dra);

// Pure: where a DRA job may run, as derive_gpu_placement says it for labelled nodes: no node
// selector (the scheduler finds the devices), `products` the products of the devices the class
// and --gpu-type match (type_found false when the class has devices and none matches, never
// when a selector is outside what gpuctl evaluates), and tolerations for the taints every node
// holding such devices carries.
GpuPlacement derive_dra_placement(const std::vector<nlohmann::json>& nodes, const DraInventory& dra,
                                  const SubmitSpec& spec);

// What send_submission created (or, in a server dry run, what the server would have).
struct SentSubmission {
  nlohmann::json job;
  nlohmann::json claim_template;      // null without one
  nlohmann::json service;             // null without one
  std::vector<std::string> warnings;  // the template could not be tied to the job, ...
};

// Sends the claim template (when there is one) and then the Job, as send_job does; the template
// first, so the pods find it. A refused Job takes its template back out (deleted with a uid
// precondition), so nothing half-made is left; the error says so. After the Job exists, the
// template gets an ownerReference to it (controller false, blockOwnerDeletion false), so the
// garbage collector deletes it with the Job; when that fails the Job stands and a warning says
// how to clean up. An existing template of that name is an error, never overwritten.
// A distributed job's Service comes after the Job, created with the Job as its owner; a refused
// Service takes the Job (and so its template) back out, since the pods could never meet.
Result<SentSubmission> send_submission(kube::Client& client, const BuiltJob& built, bool server_dry_run);

// Sends the Job with strict field validation (an unknown or misspelt field is an error, not
// dropped). With `server_dry_run`, dryRun=All, and a Pod built from the template is dry-run too,
// since quota and LimitRange admission only look at pods; a refusal of that pod is an error that
// says so (with the quota's numbers when it is a quota). Returns the Job the server answered with.
Result<nlohmann::json> send_job(kube::Client& client, const nlohmann::json& job, bool server_dry_run);

}  // namespace gpuctl::ops
