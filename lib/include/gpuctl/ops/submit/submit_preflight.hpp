#pragma once
// The pre-flight checks of `gpuctl submit`: before a Job is created, would its pods ever be
// scheduled, admitted by ResourceQuota and LimitRange, and find their claims? Each check is a
// small pure function over what collect_preflight_input read; a refusal stops the submit unless
// --force, a warning is printed and the submit goes on. The checks aim for no false refusals:
// what cannot be judged from the objects at hand (an unreadable storage class, a quota scope
// that depends on the cluster's default priority class) is skipped or downgraded to a warning.
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/submit/submit.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// What the cluster says about Kueue, read only for a job that asks for a queue or runs one pod per
// node on several nodes (read_kueue).
struct KueueView {
  bool served = false;                    // some version of kueue.x-k8s.io serves localqueues
  bool queues_listed = false;             // the namespace's LocalQueues could be read (a 403 leaves it false)
  std::vector<std::string> local_queues;  // their names, in the job's namespace
};

struct PreflightInput {
  nlohmann::json job;  // the batch/v1 Job about to be created (fully built: template, nodeSelector/affinity,
                       // tolerations, resources, volumes)
  std::vector<nlohmann::json> nodes;             // every node
  std::vector<nlohmann::json> pods;              // non-terminal pods bound to nodes, all namespaces (for free GPUs now)
  std::vector<nlohmann::json> quotas;            // ResourceQuotas of the job's namespace
  std::vector<nlohmann::json> limit_ranges;      // LimitRanges of the job's namespace
  std::map<std::string, nlohmann::json> claims;  // PVCs named by the template's volumes that exist, by name
  std::map<std::string, nlohmann::json>
      storage_classes;  // storage classes of those claims, by name (for WaitForFirstConsumer)
  // Storage classes that exist or may exist but could not be read (403): no refusal rests on them.
  std::set<std::string> unreadable_storage_classes;
  // False when the cluster-wide pod list was forbidden: gpu-free-now and the claim-in-use
  // warning are skipped rather than reporting every GPU as free.
  bool pods_listed = true;
  // The job's ResourceClaimTemplate when its pods claim DRA devices (BuiltJob::claim_template),
  // null otherwise; `dra`: what collect_dra read (devices of complete pools, claims, classes).
  nlohmann::json claim_template;
  std::optional<DraInventory> dra;
  std::optional<KueueView> kueue;  // unset: not needed (or not read), and nothing is said about it
};

enum class FindingSeverity { refusal, warning };
// "refusal" or "warning".
std::string_view to_string(FindingSeverity severity);

struct PreflightFinding {
  // "gpu-type", "gpu-capacity", "gpu-free-now", "device-capacity", "device-free-now", "quota",
  // "limit-range", "volume-claim", "queue", "gang"
  std::string check;
  FindingSeverity severity = FindingSeverity::refusal;
  std::string message;  // one line with the numbers, e.g. `no schedulable node with product NVIDIA-H100-80GB-HBM3 has
                        // 16 GPUs: the largest has 8 (4 nodes of that product, 3 schedulable)`
};

struct PreflightCheck {
  std::string_view name;
  std::vector<PreflightFinding> (*run)(const PreflightInput&);
};

// The checks as data, in the order they run: gpu-capacity, gpu-free-now, device-capacity,
// device-free-now, quota, limit-range, volume-claim, queue, gang.
const std::vector<PreflightCheck>& preflight_checks();
// Every check's findings, in check order.
std::vector<PreflightFinding> run_preflight(const PreflightInput& input);
// True when any finding is a refusal.
bool has_refusal(const std::vector<PreflightFinding>& findings);

// The individual checks (what preflight_checks() lists), for callers and tests.
//
// gpu-capacity (refusal): the per-pod nvidia.com/* request fits the allocatable of at least one
// node the pod could ever land on (placement, cordon, NoSchedule/NoExecute taints). No nvidia.com/*
// request: no finding.
std::vector<PreflightFinding> check_gpu_capacity(const PreflightInput& input);
// A job whose pods keep off each other's nodes (required pod anti-affinity on the hostname to its
// own pods, as `submit --nodes` writes) needs that many nodes that could each hold one pod.
// gpu-free-now (warning): such nodes exist, but not all of the job's concurrent pods
// (min(parallelism, completions), 0 when suspended; one per node for such a job) fit on the GPUs
// free now.
std::vector<PreflightFinding> check_gpu_free_now(const PreflightInput& input);
// device-capacity (refusal): for a job whose pods claim DRA devices, some node the pod could be
// scheduled to (cordon, NoSchedule/NoExecute taints) holds the claim's count of devices the
// class's and the claim's selectors match, that carry no NoSchedule/NoExecute device taint
// (allocated ones count: they come free). A claim is allocated on one node, so devices are
// never added across nodes. A selector outside the CEL subset, or devices not local to one
// node, make it a warning that it cannot count, never a refusal. No claim template: no finding.
std::vector<PreflightFinding> check_device_capacity(const PreflightInput& input);
// device-free-now (warning): such nodes exist, but not all of the job's concurrent pods find
// that many unallocated devices on one node now. Silent when the claims could not be listed.
std::vector<PreflightFinding> check_device_free_now(const PreflightInput& input);
// quota (refusal): every ResourceQuota whose scopes match the pod, for the keys the pod is
// counted under (requests.<extended>, cpu/requests.cpu, memory/requests.memory,
// requests.ephemeral-storage, pods, count/pods): used + per pod > hard refuses; so does
// used + concurrent pods * per pod > hard. Missing status.used: warning (not counted yet).
// Keys Kubernetes never enforces (nvidia.com/gpu, limits.nvidia.com/gpu) for a resource the pod
// asks for: warning. A job claiming DRA devices is also counted, per pod, under
// <class>.deviceclass.resource.k8s.io/devices (the claim's count),
// count/resourceclaims.resource.k8s.io (one claim) and, for a class with an extendedResourceName,
// requests.<that resource> (the claim's count, as DRAExtendedResource counts it), in quotas without scopes (scopes
// select pods, and claims are no pods). PriorityClass-scoped quotas are skipped when the pod names no priority class
// (the cluster's globalDefault class, unknown here, may apply); unknown scopes are skipped.
std::vector<PreflightFinding> check_quota(const PreflightInput& input);
// limit-range (refusal): LimitRange max/min for nvidia.com/* per Container and per Pod, as the
// LimitRanger admission plugin applies them; a Container default that would give a GPU to a
// container that asks for none is a warning.
std::vector<PreflightFinding> check_limit_range(const PreflightInput& input);
// volume-claim (refusal): every persistentVolumeClaim volume's claim exists, is not being
// deleted and is Bound, except Pending with a WaitForFirstConsumer storage class (binds when
// the pod is scheduled: no finding). A ReadWriteOnce/ReadWriteOncePod claim already mounted
// by a pod on some node: warning.
std::vector<PreflightFinding> check_volume_claims(const PreflightInput& input);
// queue (refusal): the Job carries Kueue's queue label (--queue) but the cluster serves no Kueue
// (the job would stay suspended for ever), or the namespace has no LocalQueue of that name.
std::vector<PreflightFinding> check_queue(const PreflightInput& input);
// gang (warning): pods of one pod per node on several nodes, for the default scheduler and no
// queue: nothing starts them together, so the warning says what happens and how to get it.
std::vector<PreflightFinding> check_gang(const PreflightInput& input);

// Reads Kueue (discovery, then the job's namespace's LocalQueues) when the job needs it: it has
// the queue label, or runs one pod per node on several nodes; std::nullopt otherwise. A failed
// read leaves it unread (std::nullopt): the checks then say nothing rather than guess.
std::optional<KueueView> read_kueue(kube::Client& client, const nlohmann::json& job);

// Reads what the checks need: nodes, non-terminal bound pods (fieldSelector on spec.nodeName
// and status.phase; a 403 clears pods_listed), the namespace's quotas and limit ranges, the
// claims named by the template (NotFound = absent from the map, other errors fail), their
// storage classes (NotFound = absent, 403 = unreadable_storage_classes, other errors fail).
// `known_nodes`: the nodes the caller already listed (submit reads them to place the job), so
// thousands of nodes are not listed twice.
Result<PreflightInput> collect_preflight_input(kube::Client& client, const nlohmann::json& job,
                                               const std::vector<nlohmann::json>* known_nodes = nullptr);

// The Pod the job's first pod would be, for POST pods?dryRun=All: apiVersion v1, kind Pod,
// template metadata (labels, annotations) and spec, metadata.generateName "<job>-", the job's
// namespace, plus the labels the Job controller adds (batch.kubernetes.io/job-name, job-name;
// for Indexed jobs batch.kubernetes.io/job-completion-index "0" as label and annotation) so
// LimitRange/quota/admission see the same pod.
nlohmann::json pod_from_job_template(const nlohmann::json& job);

// Everything `gpuctl submit` decides before it writes anything.
struct SubmitPlan {
  BuiltJob built;
  std::vector<PreflightFinding> findings;  // a GPU type no node offers first, then run_preflight's
  // What gpuctl decided on its own that the submitter should know (a device class chosen because
  // the cluster serves GPUs only through DRA), for stderr.
  std::vector<std::string> notices;
};
// Reads the nodes once (which label names the product, which taints mark the pools), and the DRA
// objects when the job may claim devices (wants_dra: then choose_device_class, and the placement
// from the devices), builds the Job from the flags or completes the manifest (`manifest` is used
// when spec.from_manifest), and runs every pre-flight check over what collect_preflight_input
// reads. Sends nothing.
Result<SubmitPlan> plan_submission(kube::Client& client, const SubmitSpec& spec, const nlohmann::json& manifest,
                                   const std::string& namespace_name, bool explicit_namespace, std::string_view source);

// gpuctl's stable schema: {apiVersion: gpuctl.io/v1alpha1, kind: PreflightReport,
// refused: bool, findings: [{check, severity, message}]}.
nlohmann::json to_json(const std::vector<PreflightFinding>& findings);

}  // namespace gpuctl::ops
