// The workload kinds submit -f takes besides a Job, as data, and the pure completion of their
// manifests: each pod template goes through complete_job wrapped in a Job, so the pods of a
// JobSet or a PyTorchJob get exactly the defaults a Job's pods get.
#include "gpuctl/ops/submit/submit_workloads.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/strings.hpp"
#include "gpuctl/util/time.hpp"
#include "submit_workloads_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
using namespace workloads_detail;

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> kinds = {
      {"JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", WorkloadLayout::replicated_jobs, "",
       "the JobSet controller and its CRD (https://jobset.sigs.k8s.io/docs/installation/)"},
      {"PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", WorkloadLayout::kubeflow_replicas, "pytorchReplicaSpecs",
       "the Kubeflow training operator v1 and its CRDs (https://www.kubeflow.org/docs/components/trainer/legacy-v1/)"},
  };
  return kinds;
}

const WorkloadKind* find_workload_kind(const json& manifest) {
  if (!manifest.is_object()) return nullptr;
  const std::string api_version = kube::string_field(manifest, "apiVersion");
  const std::string kind = kube::string_field(manifest, "kind");
  for (const auto& k : workload_kinds()) {
    if (k.api_version() == api_version && k.kind == kind) return &k;
  }
  return nullptr;
}

std::string accepted_manifest_kinds() {
  std::vector<std::string> kinds = {"a batch/v1 Job"};
  for (const auto& k : workload_kinds()) kinds.push_back(fmt::format("a {} {}", k.api_version(), k.kind));
  std::string last = kinds.back();
  kinds.pop_back();
  return fmt::format("{} or {}", util::join(kinds, ", "), last);
}

namespace workloads_detail {

namespace {

auto usage(std::string message) { return fail(Errc::invalid_argument, std::move(message)); }

// replicas: absent is 1; anything else a whole number the checks can multiply safely.
Result<std::int64_t> replicas_of(const json& replica, const std::string& where, std::string_view source) {
  const json& r = kube::field(replica, "replicas");
  if (r.is_null()) return std::int64_t{1};
  if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() > kMaxReplicas) {
    return usage(
        fmt::format("{}: {}.replicas {}: expected a whole number from 0 to {}", source, where, r.dump(), kMaxReplicas));
  }
  return r.get<std::int64_t>();
}

Result<void> object_or_missing(const json& value, const std::string& where, std::string_view source) {
  if (!value.is_object()) return usage(fmt::format("{}: {} is missing or not an object", source, where));
  return {};
}

}  // namespace

Result<std::vector<GroupRef>> group_refs(json& object, const WorkloadKind& kind, std::string_view source) {
  std::vector<GroupRef> refs;
  GPUCTL_TRY(object_or_missing(kube::field(object, "spec"), "spec", source));
  json& spec = object["spec"];
  if (kind.layout == WorkloadLayout::replicated_jobs) {
    json& jobs = spec["replicatedJobs"];
    if (!jobs.is_array() || jobs.empty())
      return usage(fmt::format("{}: spec.replicatedJobs is missing or empty; a JobSet needs at least one", source));
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const std::string where = fmt::format("spec.replicatedJobs[{}]", i);
      GPUCTL_TRY(object_or_missing(jobs[i], where, source));
      const json& name = kube::field(jobs[i], "name");
      if (!name.is_string() || name.get<std::string>().empty())
        return usage(fmt::format("{}: {}.name is missing; every replicated job needs one", source, where));
      GPUCTL_TRY(
          object_or_missing(kube::field(kube::field(jobs[i], "template"), "spec"), where + ".template.spec", source));
      refs.push_back({name.get<std::string>(), where, &jobs[i]});
    }
  } else {
    const std::string field_name(kind.replica_specs);
    json& replicas = spec[field_name];
    if (!replicas.is_object() || replicas.empty()) {
      return usage(fmt::format("{}: spec.{} is missing or empty; a {} needs at least one replica type", source,
                               field_name, kind.kind));
    }
    for (auto& [type, replica] : replicas.items()) {
      const std::string where = fmt::format("spec.{}.{}", field_name, type);
      GPUCTL_TRY(object_or_missing(replica, where, source));
      GPUCTL_TRY(
          object_or_missing(kube::field(kube::field(replica, "template"), "spec"), where + ".template.spec", source));
      const json& restart = kube::field(replica, "restartPolicy");
      static const std::vector<std::string> allowed = {"Always", "OnFailure", "Never", "ExitCode"};
      if (!restart.is_null() && (!restart.is_string() || std::find(allowed.begin(), allowed.end(),
                                                                   restart.get<std::string>()) == allowed.end())) {
        return usage(fmt::format("{}: {}.restartPolicy {}: expected one of Always, OnFailure, Never, ExitCode", source,
                                 where, restart.dump()));
      }
      refs.push_back({type, where, &replica});
    }
  }
  for (auto& ref : refs) {
    GPUCTL_TRY_ASSIGN(ref.replicas, replicas_of(*ref.replica, ref.where, source));
  }
  return refs;
}

std::int64_t pods_per_replica(const GroupRef& ref, const WorkloadKind& kind) {
  if (kind.layout != WorkloadLayout::replicated_jobs) return 1;
  const json& job_spec = kube::field(kube::field(*ref.replica, "template"), "spec");
  std::int64_t n = kube::integer_field(job_spec, "parallelism").value_or(1);
  if (auto completions = kube::integer_field(job_spec, "completions")) n = std::min(n, *completions);
  return std::clamp<std::int64_t>(n, 0, kMaxReplicas);
}

json group_job(const json& metadata, const std::string& group, const json& pod_template, std::int64_t pods) {
  std::string base = kube::string_field(metadata, "name");
  if (base.empty()) base = kube::string_field(metadata, "generateName");
  std::string lowered = group;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  json job_metadata = {{"name", base.ends_with("-") ? base + lowered : base + "-" + lowered}};
  if (auto ns = kube::string_field(metadata, "namespace"); !ns.empty()) job_metadata["namespace"] = ns;
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", std::move(job_metadata)},
          {"spec", {{"parallelism", pods}, {"template", pod_template}}}};
}

void NoteMerger::add(const std::string& group, const std::string& note) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == note; });
  if (it == entries_.end()) {
    entries_.push_back({note, {group}});
  } else if (std::find(it->second.begin(), it->second.end(), group) == it->second.end()) {
    it->second.push_back(group);
  }
}

std::vector<std::string> NoteMerger::lines(std::size_t group_count) const {
  std::vector<std::string> out;
  for (const auto& [note, groups] : entries_) {
    out.push_back(groups.size() == group_count ? note : fmt::format("{}: {}", util::join(groups, ", "), note));
  }
  return out;
}

}  // namespace workloads_detail

Result<void> check_workload_manifest(const json& manifest, std::string_view source) {
  const WorkloadKind* kind = find_workload_kind(manifest);
  if (kind == nullptr) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: not a workload kind; gpuctl submit takes {}", source, accepted_manifest_kinds()));
  }
  if (const json& metadata = kube::field(manifest, "metadata"); !metadata.is_null() && !metadata.is_object())
    return fail(Errc::invalid_argument, fmt::format("{}: metadata is not an object", source));
  json copy = manifest;
  GPUCTL_TRY(group_refs(copy, *kind, source));
  return {};
}

std::string workload_gpu_resource(const json& manifest) {
  const WorkloadKind* kind = find_workload_kind(manifest);
  if (kind == nullptr) return {};
  json copy = manifest;
  auto refs = group_refs(copy, *kind, "");
  if (!refs) return {};
  std::string first;
  for (const auto& ref : *refs) {
    const json& tmpl = kind->layout == WorkloadLayout::replicated_jobs
                           ? kube::field(kube::field(kube::field(*ref.replica, "template"), "spec"), "template")
                           : kube::field(*ref.replica, "template");
    std::string resource = requested_gpu_resource(json{{"spec", {{"template", tmpl}}}});
    if (resource == kGpuResource) return resource;
    if (first.empty()) first = resource;
  }
  return first;
}

std::string describe_workload_pods(const BuiltWorkload& built) {
  std::int64_t total = 0;
  std::vector<std::string> parts;
  for (const auto& g : built.groups) {
    total += g.pods;
    const std::string resource = requested_gpu_resource(g.job);
    std::string gpus = "no GPUs";
    if (!resource.empty()) {
      auto requests = kube::pod_requests(g.job["spec"]["template"]);
      gpus = fmt::format("{} {}", requests.at(resource).to_string(), resource);
    }
    parts.push_back(fmt::format("{} {} x {}", g.name, g.pods, gpus));
  }
  return fmt::format("{} {}: {}", total, total == 1 ? "pod" : "pods", util::join(parts, ", "));
}

}  // namespace gpuctl::ops
