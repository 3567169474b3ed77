// complete_workload: each pod template of a JobSet or a PyTorchJob completed by complete_job on a
// Job wrapped around it, then the Job-level defaults where the kind has a field for them.
#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"
#include "gpuctl/util/time.hpp"
#include "submit_job_internal.hpp"
#include "submit_workloads_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace workloads_detail;

// apply_defaults' warning for a template without GPUs: said once for the whole workload instead.
constexpr std::string_view kNoGpuWarning = "the job requests no GPUs";

using submit_job_detail::object_at;

std::string human_seconds(std::int64_t s) { return util::human_duration(std::chrono::seconds(s)); }

struct CompletedGroup {
  BuiltJob built;
  bool requests_gpus = false;
};

// A JobSet's template is a Job spec: it is completed as that Job, except ttlSecondsAfterFinished,
// which the JobSet has for itself (a Job deleted under a running JobSet would be made again).
Result<CompletedGroup> complete_replicated_job(json wrapper, GroupRef& ref, SubmitSpec spec,
                                               const GpuPlacement& placement, const std::string& ns,
                                               bool explicit_namespace, const std::string& source) {
  json job_spec = ref.replica->at("template").at("spec");
  const bool had_ttl = job_spec.contains("ttlSecondsAfterFinished");
  if (!had_ttl) job_spec["ttlSecondsAfterFinished"] = 0;  // keeps the Job's default (and its note) off
  wrapper["spec"] = std::move(job_spec);
  CompletedGroup out;
  out.requests_gpus = !requested_gpu_resource(wrapper).empty();
  if (!out.requests_gpus) spec.gpu_type.clear();  // --gpu-type places the pods that use GPUs
  GPUCTL_TRY_ASSIGN(out.built, complete_job(std::move(wrapper), spec, placement, ns, explicit_namespace, source));
  json& done = out.built.job["spec"];
  if (!had_ttl) done.erase("ttlSecondsAfterFinished");
  (*ref.replica)["template"]["spec"] = done;
  return out;
}

// A Kubeflow replica's template is a pod template whose restartPolicy the operator overwrites
// from the replica spec: it is completed as a Job's template, with its own restartPolicy kept and
// the Job-level settings left to runPolicy (set by default_run_policy).
Result<CompletedGroup> complete_replica(json wrapper, GroupRef& ref, SubmitSpec spec, const GpuPlacement& placement,
                                        const std::string& ns, bool explicit_namespace, const std::string& source) {
  json tmpl = ref.replica->at("template");
  const json pod_restart = kube::field(tmpl["spec"], "restartPolicy");
  tmpl["spec"].erase("restartPolicy");
  // Present, so complete_job adds none of its own Job-level defaults (or their notes).
  wrapper["spec"] = {{"template", std::move(tmpl)}, {"backoffLimit", 0}, {"ttlSecondsAfterFinished", 0}};
  spec.backoff_limit.reset();
  spec.active_deadline_seconds.reset();
  spec.count_disruptions = true;  // no podFailurePolicy field to put it in
  CompletedGroup out;
  out.requests_gpus = !requested_gpu_resource(wrapper).empty();
  if (!out.requests_gpus) spec.gpu_type.clear();
  GPUCTL_TRY_ASSIGN(out.built, complete_job(std::move(wrapper), spec, placement, ns, explicit_namespace, source));
  json done = out.built.job["spec"]["template"];
  if (pod_restart.is_null()) {
    done["spec"].erase("restartPolicy");
  } else {
    done["spec"]["restartPolicy"] = pod_restart;
  }
  (*ref.replica)["template"] = std::move(done);
  return out;
}

// The kind's restartPolicy at the replica spec: Never unless the manifest says, as a Job's pods
// get it (a failed container fails its pod instead of restarting on the same GPU).
void default_replica_restart(GroupRef& ref, NoteMerger& notes) {
  if (ref.replica->contains("restartPolicy")) return;
  (*ref.replica)["restartPolicy"] = "Never";
  notes.add(ref.name, "restartPolicy Never: a failed container fails its pod instead of restarting on the same GPU");
}

// ttlSecondsAfterFinished at `path` of the object: the flag, else the manifest's, else gpuctl's.
void default_ttl(json& holder, std::string_view path, const SubmitSpec& spec, std::string_view kind,
                 std::vector<std::string>& notes) {
  if (spec.ttl_disabled) {
    holder.erase("ttlSecondsAfterFinished");
  } else if (spec.ttl_seconds) {
    holder["ttlSecondsAfterFinished"] = *spec.ttl_seconds;
  } else if (!holder.contains("ttlSecondsAfterFinished")) {
    holder["ttlSecondsAfterFinished"] = kDefaultTtlAfterFinishedSeconds;
    notes.push_back(fmt::format("{} {}: the {} and its pods are deleted {} after it finishes", path,
                                kDefaultTtlAfterFinishedSeconds, kind, human_seconds(kDefaultTtlAfterFinishedSeconds)));
  }
}

// A Kubeflow job's Job-level settings live in spec.runPolicy.
void default_run_policy(json& object, const WorkloadKind& kind, const SubmitSpec& spec,
                        std::vector<std::string>& notes) {
  json& run_policy = object_at(object["spec"], "runPolicy");
  if (spec.backoff_limit) {
    run_policy["backoffLimit"] = *spec.backoff_limit;
  } else if (!run_policy.contains("backoffLimit")) {
    run_policy["backoffLimit"] = kDefaultBackoffLimit;
    notes.push_back(fmt::format("runPolicy.backoffLimit {}: the {} fails after {} restarts of its pods",
                                kDefaultBackoffLimit, kind.kind, kDefaultBackoffLimit));
  }
  if (spec.active_deadline_seconds) run_policy["activeDeadlineSeconds"] = *spec.active_deadline_seconds;
  default_ttl(run_policy, "runPolicy.ttlSecondsAfterFinished", spec, kind.kind, notes);
  if (!spec.count_disruptions) {
    notes.push_back(
        fmt::format("no podFailurePolicy: a {} has no such field, so pods lost to a drain, preemption or "
                    "eviction count as failures",
                    kind.kind));
  }
}

}  // namespace

Result<BuiltWorkload> complete_workload(json manifest, const SubmitSpec& spec, const GpuPlacement& placement,
                                        const std::string& namespace_name, bool explicit_namespace,
                                        std::string_view source) {
  GPUCTL_TRY(check_workload_manifest(manifest, source));
  if (spec.avoid_failed_nodes) {
    return fail(
        Errc::invalid_argument,
        fmt::format("{}: --avoid-failed-nodes takes a batch/v1 Job (it works while --wait watches the Job)", source));
  }
  // Kueue suspends the object itself, never the Jobs or pods it makes: the queue is applied once, below.
  SubmitSpec group_spec = spec;
  group_spec.queue.clear();
  BuiltWorkload built;
  built.kind = find_workload_kind(manifest);
  const WorkloadKind& kind = *built.kind;
  manifest.erase("status");
  if (!manifest.contains("metadata")) manifest["metadata"] = json::object();
  GPUCTL_TRY_ASSIGN(std::vector<GroupRef> refs, group_refs(manifest, kind, source));

  // The wrapper carries the object's metadata, so the name, the namespace, gpuctl's label and
  // --label/--annotation follow complete_job's rules; its metadata becomes the object's.
  const json wrapper = {{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", manifest["metadata"]}};
  json metadata;
  NoteMerger notes, warnings;
  bool any_gpu = false;
  for (auto& ref : refs) {
    const std::string group_source = fmt::format("{} ({} {})", source, kind.kind, ref.where);
    auto completed =
        kind.layout == WorkloadLayout::replicated_jobs
            ? complete_replicated_job(wrapper, ref, group_spec, placement, namespace_name, explicit_namespace,
                                      group_source)
            : complete_replica(wrapper, ref, group_spec, placement, namespace_name, explicit_namespace, group_source);
    if (!completed) return fail(completed.error());
    any_gpu = any_gpu || completed->requests_gpus;
    if (metadata.is_null()) metadata = completed->built.job["metadata"];
    if (kind.layout == WorkloadLayout::kubeflow_replicas) default_replica_restart(ref, notes);
    for (const auto& note : completed->built.notes) notes.add(ref.name, note);
    for (const auto& w : completed->built.warnings) {
      if (!w.starts_with(kNoGpuWarning)) warnings.add(ref.name, w);
    }
  }
  manifest["metadata"] = metadata;
  built.notes = notes.lines(refs.size());
  built.warnings = warnings.lines(refs.size());
  if (kind.layout == WorkloadLayout::replicated_jobs) {
    default_ttl(manifest["spec"], "ttlSecondsAfterFinished", spec, kind.kind, built.notes);
  } else {
    default_run_policy(manifest, kind, spec, built.notes);
  }
  if (!spec.queue.empty()) {
    // JobSet and the Kubeflow jobs are Kueue integrations: the queue label on the object, and
    // suspend where each kind has it.
    manifest["metadata"]["labels"][kKueueQueueLabel] = spec.queue;
    json& holder =
        kind.layout == WorkloadLayout::replicated_jobs ? manifest["spec"] : object_at(manifest["spec"], "runPolicy");
    holder["suspend"] = true;
    built.notes.push_back(
        fmt::format("queued: created suspended with label {}={}; Kueue starts the {} when the queue "
                    "admits all its pods at once",
                    kKueueQueueLabel, spec.queue, kind.kind));
  }
  if (!any_gpu) {
    built.warnings.insert(built.warnings.begin(),
                          fmt::format("the {} requests no GPUs: its pods get none (no NVIDIA devices in the container) "
                                      "and may land on any node; set resources.limits of nvidia.com/gpu in its pod "
                                      "templates",
                                      kind.kind));
  }
  for (const auto& ref : refs) {
    const json& holder = kind.layout == WorkloadLayout::replicated_jobs
                             ? kube::field(kube::field(*ref.replica, "template"), "spec")
                             : *ref.replica;
    const json& tmpl = kube::field(holder, "template");
    const std::int64_t pods = ref.replicas * pods_per_replica(ref, kind);
    built.groups.push_back({ref.name, ref.replicas, pods, group_job(metadata, ref.name, tmpl, pods)});
  }
  built.object = std::move(manifest);
  return built;
}

}  // namespace gpuctl::ops
