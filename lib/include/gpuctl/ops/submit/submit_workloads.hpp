#pragma once
// The workload kinds `gpuctl submit -f` takes besides a batch/v1 Job, as data: JobSet
// (jobset.x-k8s.io/v1alpha2: spec.replicatedJobs[], each `replicas` Jobs of a batch Job template)
// and Kubeflow's PyTorchJob (kubeflow.org/v1: spec.pytorchReplicaSpecs.{Master,Worker}, each
// `replicas` pods of a pod template, restartPolicy at the replica spec).
//
// Each pod template is completed as the pod template of a Job is: complete_job runs on a Job
// wrapped around it, so a template of a JobSet gets exactly what a Job's template gets (GPU
// request = limit, restartPolicy Never where the kind keeps it in the pod, --gpu-type placement,
// pool tolerations, --label/--annotation, --priority-class, --colocate-with). The Job-level
// defaults go where the kind has a field for them: a JobSet's Jobs keep backoffLimit and
// podFailurePolicy (their templates are Job specs) and the JobSet gets ttlSecondsAfterFinished; a
// PyTorchJob gets runPolicy.{backoffLimit, ttlSecondsAfterFinished, activeDeadlineSeconds} and no
// podFailurePolicy (it has none: noted). The pre-flight checks count every template times its pods.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// Where a kind keeps its pod templates.
enum class WorkloadLayout {
  // spec.replicatedJobs[]: {name, replicas (default 1), template: {metadata, spec: a batch Job spec}}
  replicated_jobs,
  // spec.<replica_specs>.<type>: {replicas (default 1), restartPolicy, template: a pod template};
  // Job-level settings under spec.runPolicy
  kubeflow_replicas,
};

struct WorkloadKind {
  std::string_view kind;      // "JobSet"
  std::string_view group;     // "jobset.x-k8s.io"
  std::string_view version;   // "v1alpha2"
  std::string_view resource;  // "jobsets": the plural in its REST path and in discovery
  WorkloadLayout layout = WorkloadLayout::replicated_jobs;
  std::string_view replica_specs;  // kubeflow_replicas: the field under spec ("pytorchReplicaSpecs")
  std::string_view installs;       // what an admin installs for the cluster to serve it
  std::string api_version() const { return std::string(group) + "/" + std::string(version); }
};

// The kinds, in the order the errors list them.
const std::vector<WorkloadKind>& workload_kinds();
// The kind of a manifest with exactly that apiVersion and kind; nullptr for any other (a batch/v1
// Job included, which complete_job takes).
const WorkloadKind* find_workload_kind(const nlohmann::json& manifest);
// "a batch/v1 Job, a jobset.x-k8s.io/v1alpha2 JobSet or a kubeflow.org/v1 PyTorchJob", for errors.
std::string accepted_manifest_kinds();

// One pod template of a workload and how many pods it makes.
struct PodGroup {
  std::string name;           // the replicatedJob's name, or the replica type (Master, Worker)
  std::int64_t replicas = 1;  // Jobs (JobSet) or pods (PyTorchJob) made from the template
  std::int64_t pods = 1;      // pods of the template at once: replicas x its Job's min(parallelism, completions)
  // The completed template as a batch/v1 Job "<name>-<group>" with parallelism `pods`, so the
  // pre-flight checks and the server dry run of a pod read it as they read a Job.
  nlohmann::json job;
};

struct BuiltWorkload {
  const WorkloadKind* kind = nullptr;
  nlohmann::json object;  // what is sent
  std::vector<PodGroup> groups;
  std::vector<std::string> notes;     // defaults applied; "<group>: ..." when only some groups got it
  std::vector<std::string> warnings;  // likely mistakes that are not errors
};

// Everything about a workload manifest that needs no cluster: its templates where the kind keeps
// them, of the right types, replicas whole numbers from 0 to 10000, at least one template.
// invalid_argument names the field.
Result<void> check_workload_manifest(const nlohmann::json& manifest, std::string_view source);

// The nvidia.com/* resource the workload's pods request (nvidia.com/gpu first, else the first
// template's), "" when none does.
std::string workload_gpu_resource(const nlohmann::json& manifest);

// Pure: the manifest checked and completed (see the top of this file). The name and namespace
// follow complete_job's rules; explicit flags override the manifest.
Result<BuiltWorkload> complete_workload(nlohmann::json manifest, const SubmitSpec& spec, const GpuPlacement& placement,
                                        const std::string& namespace_name, bool explicit_namespace,
                                        std::string_view source);

// "5 pods: Master 1 x 1 nvidia.com/gpu, Worker 4 x 1 nvidia.com/gpu".
std::string describe_workload_pods(const BuiltWorkload& built);

// Pure: the pre-flight checks over every group. gpu-capacity, limit-range and volume-claim per
// group (they judge one pod); quota per group and, with several groups, over their sum; gpu-free-now
// over the sum of the pods of groups with the same GPU request and placement. Each message names
// its group unless every group found the same.
std::vector<PreflightFinding> run_workload_preflight(const PreflightInput& shared, const BuiltWorkload& built);

// not_served, naming the API and what to install, when the cluster's discovery does not list the
// kind's resource in its group/version; other discovery errors are returned as they are.
Result<void> check_workload_served(kube::Client& client, const WorkloadKind& kind);

struct WorkloadPlan {
  BuiltWorkload built;
  std::vector<PreflightFinding> findings;  // a GPU type no node offers first, then run_workload_preflight's
};
// check_workload_served, the nodes (placement), complete_workload, the reads of the pre-flight
// checks (once for every group) and the checks. Sends nothing.
Result<WorkloadPlan> plan_workload_submission(kube::Client& client, const SubmitSpec& spec,
                                              const nlohmann::json& manifest, const std::string& namespace_name,
                                              bool explicit_namespace, std::string_view source);

// Creates the object at its own REST path with fieldValidation=Strict. With `server_dry_run`,
// dryRun=All, and a pod of every group is dry-run too (quota and LimitRange admission only look at
// pods). Returns the object the server answered with.
Result<nlohmann::json> send_workload(kube::Client& client, const BuiltWorkload& built, bool server_dry_run);

}  // namespace gpuctl::ops
