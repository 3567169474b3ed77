// The Job gpuctl submit sends: built from flags, or a user's manifest completed with the same
// defaults. Pure; the CLI prints it for --dry-run=client and sends it otherwise.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"
#include "gpuctl/util/time.hpp"
#include "submit_job_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

using submit_job_detail::array_at;
using submit_job_detail::object_at;

namespace {

auto usage(std::string message) { return fail(Errc::invalid_argument, std::move(message)); }

std::string human_seconds(std::int64_t s) { return util::human_duration(std::chrono::seconds(s)); }

// A flags-built job with a device class claims DRA devices instead of an extended resource.
bool claims_dra_devices(const SubmitSpec& spec) {
  return !spec.device_class.empty() && !spec.from_manifest && spec.gpus && *spec.gpus > 0;
}

// The skeleton from flags: one container "main" and what the flags say about it.
json job_from_flags(const SubmitSpec& spec) {
  json container = {{"name", kSubmitContainerName}, {"image", spec.image}};
  if (!spec.command.empty()) container["command"] = spec.command;
  if (!spec.env.empty()) {
    json env = json::array();
    for (const auto& [k, v] : spec.env) env.push_back({{"name", k}, {"value", v}});
    container["env"] = env;
  }
  json requests = json::object(), limits = json::object();
  if (!spec.cpu.empty()) requests["cpu"] = spec.cpu;
  if (!spec.memory.empty()) requests["memory"] = spec.memory;
  if (!spec.cpu_limit.empty()) limits["cpu"] = spec.cpu_limit;
  if (!spec.memory_limit.empty()) limits["memory"] = spec.memory_limit;
  const bool claims_devices = claims_dra_devices(spec);
  if (spec.gpus && *spec.gpus > 0 && !claims_devices) {
    requests[spec.gpu_resource] = std::to_string(*spec.gpus);
    limits[spec.gpu_resource] = std::to_string(*spec.gpus);
  }
  json resources = json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;
  if (claims_devices) resources["claims"] = json::array({{{"name", kDeviceClaimName}}});
  if (!resources.empty()) container["resources"] = resources;
  json pod_spec = {{"containers", json::array({container})}};
  if (claims_devices) {
    pod_spec["resourceClaims"] =
        json::array({{{"name", kDeviceClaimName}, {"resourceClaimTemplateName", claim_template_name(spec.name)}}});
  }
  if (!spec.volumes.empty()) {
    json mounts = json::array(), volumes = json::array();
    for (const auto& v : spec.volumes) {
      // One volume per claim, even when it is mounted at several paths.
      std::string name = v.claim.size() <= 57 ? "claim-" + v.claim : "claim-" + v.claim.substr(0, 57);
      while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
      json mount = {{"name", name}, {"mountPath", v.mount_path}};
      if (v.read_only) mount["readOnly"] = true;
      mounts.push_back(mount);
      bool known = std::any_of(volumes.begin(), volumes.end(), [&](const json& vol) { return vol["name"] == name; });
      if (!known) volumes.push_back({{"name", name}, {"persistentVolumeClaim", {{"claimName", v.claim}}}});
    }
    pod_spec["containers"][0]["volumeMounts"] = mounts;
    pod_spec["volumes"] = volumes;
  }
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", spec.name}}},
          {"spec", {{"template", {{"spec", pod_spec}}}}}};
}

// GPU requests equal to limits in every container: the API server refuses a request without a
// limit for extended resources, and a limit alone is the request anyway.
Result<bool> equalise_gpu_resources(json& containers, std::string_view source) {
  bool any_gpu = false;
  if (!containers.is_array()) return any_gpu;
  for (auto& c : containers) {
    json& res = object_at(c, "resources");
    json& req = object_at(res, "requests");
    json& lim = object_at(res, "limits");
    std::vector<std::string> keys;
    for (auto& [k, v] : req.items()) keys.push_back(k);
    for (auto& [k, v] : lim.items()) keys.push_back(k);
    for (const auto& k : keys) {
      if (!is_nvidia_resource(k)) continue;
      any_gpu = true;
      if (req.contains(k) && lim.contains(k)) {
        auto rq = kube::parse_resource_list(json{{k, req[k]}});
        auto lq = kube::parse_resource_list(json{{k, lim[k]}});
        if (rq.count(k) && lq.count(k) && rq.at(k) != lq.at(k)) {
          return usage(
              fmt::format("{}: container {:?} requests {} {} but limits it to {}: GPUs cannot be overcommitted, "
                          "make request and limit equal",
                          source, kube::string_field(c, "name"), req[k].dump(), k, lim[k].dump()));
        }
      } else if (req.contains(k)) {
        lim[k] = req[k];
      } else {
        req[k] = lim[k];
      }
    }
    if (req.empty()) res.erase("requests");
    if (lim.empty()) res.erase("limits");
    if (res.empty()) c.erase("resources");
  }
  return any_gpu;
}

// ANDs the GPU-type terms into any required node affinity the job already has.
void add_node_affinity(json& pod_spec, const std::map<std::string, std::vector<std::string>>& selector) {
  json ours = json::array();
  for (const auto& [key, values] : selector) {
    ours.push_back({{"matchExpressions", json::array({{{"key", key}, {"operator", "In"}, {"values", values}}})}});
  }
  and_node_selector_terms(pod_spec, ours);
}

std::string describe_selector(const std::map<std::string, std::vector<std::string>>& selector) {
  std::vector<std::string> parts;
  for (const auto& [key, values] : selector) {
    parts.push_back(values.size() == 1 ? fmt::format("{}={}", key, values[0])
                                       : fmt::format("{} in ({})", key, fmt::join(values, ",")));
  }
  return fmt::format("{}", fmt::join(parts, " or "));
}

// restartPolicy: Jobs allow Never and OnFailure; Never lets the failure policy see each failure.
Result<void> default_restart_policy(json& pod_spec, std::string_view source) {
  std::string restart = kube::string_field(pod_spec, "restartPolicy");
  if (restart.empty()) {
    pod_spec["restartPolicy"] = "Never";
  } else if (restart != "Never" && restart != "OnFailure") {
    return usage(
        fmt::format("{}: restartPolicy {} is not allowed in a Job; use Never (or OnFailure)", source, restart));
  }
  return {};
}

// gpuctl's managed-by label, then --label and --annotation on the Job and on its pods alike.
void add_labels_and_annotations(json& metadata, json& tmpl, const SubmitSpec& spec) {
  json& tmpl_meta = object_at(tmpl, "metadata");
  auto& labels = object_at(metadata, "labels");
  if (!labels.contains(kManagedByLabel)) labels[kManagedByLabel] = "gpuctl";
  for (const auto& [k, v] : spec.labels) {
    labels[k] = v;
    object_at(tmpl_meta, "labels")[k] = v;
  }
  for (const auto& [k, v] : spec.annotations) {
    object_at(metadata, "annotations")[k] = v;
    object_at(tmpl_meta, "annotations")[k] = v;
  }
  if (tmpl_meta.empty()) tmpl.erase("metadata");
}

// Retries, the deadline and the clean-up after finishing: the flags win, then what the job says,
// then gpuctl's defaults (each default chosen is noted).
void default_lifetime(json& job_spec, const SubmitSpec& spec, BuiltJob& built) {
  if (spec.backoff_limit) {
    job_spec["backoffLimit"] = *spec.backoff_limit;
  } else if (!job_spec.contains("backoffLimit") && !job_spec.contains("backoffLimitPerIndex")) {
    job_spec["backoffLimit"] = kDefaultBackoffLimit;
    built.notes.push_back(
        fmt::format("backoffLimit {}: a failing pod is retried {} times", kDefaultBackoffLimit, kDefaultBackoffLimit));
  }
  if (spec.active_deadline_seconds) job_spec["activeDeadlineSeconds"] = *spec.active_deadline_seconds;
  if (spec.ttl_disabled) {
    job_spec.erase("ttlSecondsAfterFinished");
  } else if (spec.ttl_seconds) {
    job_spec["ttlSecondsAfterFinished"] = *spec.ttl_seconds;
  } else if (!job_spec.contains("ttlSecondsAfterFinished")) {
    job_spec["ttlSecondsAfterFinished"] = kDefaultTtlAfterFinishedSeconds;
    built.notes.push_back(
        fmt::format("ttlSecondsAfterFinished {}: the job and its pods are deleted {} after it finishes",
                    kDefaultTtlAfterFinishedSeconds, human_seconds(kDefaultTtlAfterFinishedSeconds)));
  }
}

// Unless --count-disruptions or the job has its own: pods lost to drains, preemption or eviction
// are not the program's failures, so they must not use up backoffLimit.
void default_pod_failure_policy(json& job_spec, const json& pod_spec, const SubmitSpec& spec, BuiltJob& built) {
  if (spec.count_disruptions || job_spec.contains("podFailurePolicy")) return;
  if (kube::string_field(pod_spec, "restartPolicy") == "Never") {
    job_spec["podFailurePolicy"] = {
        {"rules",
         json::array({{{"action", "Ignore"},
                       {"onPodConditions", json::array({{{"type", "DisruptionTarget"}, {"status", "True"}}})}}})}};
    built.notes.push_back(
        "podFailurePolicy: pods lost to a drain, preemption or eviction are replaced without counting "
        "against backoffLimit");
  } else {
    built.warnings.push_back(
        "restartPolicy OnFailure: a podFailurePolicy needs Never, so evictions and preemptions count "
        "against backoffLimit");
  }
}

// --gpu-type: GPU nodes of that type only. One label value is a nodeSelector, unless the job has
// node affinity of its own; anything else is ANDed into its required node affinity.
Result<void> select_gpu_type(json& pod_spec, const SubmitSpec& spec, const GpuPlacement& placement,
                             std::string_view source, BuiltJob& built) {
  if (spec.gpu_type.empty()) return {};
  if (placement.selector.size() == 1 && placement.selector.begin()->second.size() == 1 &&
      !(pod_spec.contains("affinity") && pod_spec["affinity"].contains("nodeAffinity"))) {
    const auto& [key, values] = *placement.selector.begin();
    json& ns = object_at(pod_spec, "nodeSelector");
    if (ns.contains(key) && ns[key] != values[0]) {
      return usage(fmt::format("{}: nodeSelector {}={} contradicts --gpu-type {} ({}={})", source, key,
                               ns[key].get<std::string>(), spec.gpu_type, key, values[0]));
    }
    ns[key] = values[0];
  } else {
    add_node_affinity(pod_spec, placement.selector);
  }
  built.notes.push_back(
      fmt::format("runs on {} nodes only ({})", spec.gpu_type, describe_selector(placement.selector)));
  return {};
}

// The tolerations the GPU pools' taints need, for those the job does not tolerate already.
void tolerate_pool_taints(json& pod_spec, const GpuPlacement& placement, BuiltJob& built) {
  std::vector<json> existing = kube::tolerations_of(pod_spec);
  json& tolerations = array_at(pod_spec, "tolerations");
  for (std::size_t i = 0; i < placement.pool_taints.size(); ++i) {
    const auto& taint = placement.pool_taints[i];
    if (kube::tolerates(existing, taint)) continue;
    tolerations.push_back(placement.tolerations[i]);
    built.notes.push_back(fmt::format("tolerates {} (the taint of the GPU nodes it may use)", kube::to_string(taint)));
  }
  if (tolerations.empty()) pod_spec.erase("tolerations");
}

// --colocate-with: a required pod affinity term beside any the job has.
void add_colocation(json& pod_spec, const SubmitSpec& spec) {
  if (spec.colocate_selector.is_null()) return;
  json& affinity = object_at(pod_spec, "affinity");
  json& pod_affinity = object_at(affinity, "podAffinity");
  json& required = array_at(pod_affinity, "requiredDuringSchedulingIgnoredDuringExecution");
  required.push_back({{"labelSelector", spec.colocate_selector}, {"topologyKey", spec.colocate_topology}});
}

// Everything both modes share: the defaults, the placement and the flags that override. The
// steps run in this order so that notes and warnings read in it too.
Result<BuiltJob> apply_defaults(json job, const SubmitSpec& spec, const GpuPlacement& placement,
                                std::string_view source) {
  BuiltJob built;
  json& metadata = object_at(job, "metadata");
  json& job_spec = object_at(job, "spec");
  json& tmpl = object_at(job_spec, "template");
  json& pod_spec = object_at(tmpl, "spec");

  if (!pod_spec.contains("containers") || !pod_spec["containers"].is_array() || pod_spec["containers"].empty()) {
    return usage(fmt::format("{}: spec.template.spec.containers is empty; a Job needs at least one container", source));
  }
  GPUCTL_TRY_ASSIGN(bool any_gpu, equalise_gpu_resources(pod_spec["containers"], source));
  const bool claims_devices = claims_dra_devices(spec);
  if (!any_gpu && !claims_devices) {
    built.warnings.push_back(
        "the job requests no GPUs: its pods get none (no NVIDIA devices in the container) and may "
        "land on any node; give --gpus N or set resources.limits of nvidia.com/gpu");
  }
  GPUCTL_TRY(default_restart_policy(pod_spec, source));
  add_labels_and_annotations(metadata, tmpl, spec);
  default_lifetime(job_spec, spec, built);
  default_pod_failure_policy(job_spec, pod_spec, spec, built);
  if (!spec.priority_class.empty()) pod_spec["priorityClassName"] = spec.priority_class;
  if (claims_devices) {
    // The claim's CEL selector picks the product; no node label is needed (or may exist).
    if (!spec.gpu_type.empty()) {
      built.notes.push_back(
          fmt::format("devices whose productName matches {} only (a CEL selector in the claim)", spec.gpu_type));
    }
  } else {
    GPUCTL_TRY(select_gpu_type(pod_spec, spec, placement, source, built));
  }
  if (any_gpu || claims_devices) tolerate_pool_taints(pod_spec, placement, built);
  add_colocation(pod_spec, spec);
  built.job = std::move(job);
  return built;
}

}  // namespace

// Pure: `terms` (ORed among themselves) ANDed with every term of the pod's required node
// affinity: each existing term times each of ours.
void and_node_selector_terms(json& pod_spec, const json& terms) {
  json ours = terms;
  json& affinity = object_at(pod_spec, "affinity");
  json& node_affinity = object_at(affinity, "nodeAffinity");
  json& required = object_at(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution");
  json existing = required.value("nodeSelectorTerms", json::array());
  if (existing.empty()) {
    required["nodeSelectorTerms"] = ours;
    return;
  }
  json combined = json::array();
  for (const auto& term : existing) {
    for (const auto& extra : ours) {
      json t = term;
      json& exprs = array_at(t, "matchExpressions");
      for (const auto& e : extra["matchExpressions"]) exprs.push_back(e);
      combined.push_back(t);
    }
  }
  required["nodeSelectorTerms"] = combined;
}

std::string requested_gpu_resource(const json& job) {
  json pod = {
      {"spec", job.contains("spec") && job["spec"].contains("template") && job["spec"]["template"].contains("spec")
                   ? job["spec"]["template"]["spec"]
                   : json::object()}};
  // Limits alone count as requests here, as the API server's defaulting makes them.
  auto requests = kube::pod_requests(pod);
  if (requests.count(std::string(kGpuResource)) && !requests.at(std::string(kGpuResource)).is_zero())
    return std::string(kGpuResource);
  for (const auto& [name, q] : requests) {
    if (is_nvidia_resource(name) && !q.is_zero()) return name;
  }
  return {};
}

Result<BuiltJob> build_job(const SubmitSpec& spec, const GpuPlacement& placement, const std::string& namespace_name) {
  if (spec.from_manifest) return fail(Errc::internal, "build_job called for a manifest; use complete_job");
  json job = job_from_flags(spec);
  job["metadata"]["namespace"] = namespace_name;
  GPUCTL_TRY_ASSIGN(BuiltJob built, apply_defaults(std::move(job), spec, placement, "flags"));
  shape_parallel_job(built.job, spec, built);
  GPUCTL_TRY(keep_off_avoided_nodes(built.job, spec, built));
  hand_to_queue(built.job, spec, built);
  if (claims_dra_devices(spec)) {
    built.claim_template = build_claim_template(spec, namespace_name);
    built.notes.insert(built.notes.begin(),
                       fmt::format("claims {} per pod through ResourceClaimTemplate {} (deleted with the job)",
                                   describe_claim_template(built.claim_template), claim_template_name(spec.name)));
  }
  return built;
}

Result<void> check_manifest(const json& manifest, std::string_view source) {
  if (!manifest.is_object()) return usage(fmt::format("{}: not an object; expected a batch/v1 Job", source));
  std::string kind = kube::string_field(manifest, "kind");
  std::string api_version = kube::string_field(manifest, "apiVersion");
  if (kind != "Job" || api_version != "batch/v1") {
    return usage(fmt::format("{}: is {} {}; gpuctl submit takes {}", source,
                             api_version.empty() ? "(no apiVersion)" : api_version, kind.empty() ? "(no kind)" : kind,
                             accepted_manifest_kinds()));
  }
  // A wrongly typed field is the manifest's mistake (exit 2), named before anything reads it.
  if (auto problem = kube::job_shape_problem(manifest); !problem.empty())
    return usage(fmt::format("{}: {}", source, problem));
  if (auto checked = check_manifest_values(manifest); !checked)
    return usage(fmt::format("{}: {}", source, checked.error().message));
  return {};
}

Result<BuiltJob> complete_job(json manifest, const SubmitSpec& spec, const GpuPlacement& placement,
                              const std::string& namespace_name, bool explicit_namespace, std::string_view source) {
  GPUCTL_TRY(check_manifest(manifest, source));
  json& metadata = object_at(manifest, "metadata");
  std::string name = kube::string_field(metadata, "name");
  if (!spec.name.empty()) {
    if (!name.empty() && name != spec.name) {
      return usage(fmt::format("{}: the manifest names the job {:?} but the command line says {:?}; drop one", source,
                               name, spec.name));
    }
    metadata["name"] = spec.name;
  } else if (name.empty() && kube::string_field(metadata, "generateName").empty()) {
    return usage(
        fmt::format("{}: metadata.name is missing; name the job in the manifest or on the command line", source));
  }
  std::string manifest_ns = kube::string_field(metadata, "namespace");
  if (!manifest_ns.empty() && manifest_ns != namespace_name) {
    if (explicit_namespace) {
      return usage(fmt::format("{}: the manifest's namespace {:?} does not match -n {:?}; drop one of them", source,
                               manifest_ns, namespace_name));
    }
  } else {
    metadata["namespace"] = namespace_name;
  }
  if (manifest.contains("status")) manifest.erase("status");
  GPUCTL_TRY_ASSIGN(BuiltJob built, apply_defaults(std::move(manifest), spec, placement, source));
  GPUCTL_TRY(keep_off_avoided_nodes(built.job, spec, built));
  hand_to_queue(built.job, spec, built);
  return built;
}

}  // namespace gpuctl::ops
