// The pre-flight registry, the reads behind it, and the dry-run Pod built from a Job template.
#include "gpuctl/ops/submit/submit_preflight.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace preflight_detail {

const json& pod_template(const json& job) { return field(field(job, "spec"), "template"); }
const json& pod_spec(const json& job) { return field(pod_template(job), "spec"); }

std::string job_namespace(const json& job) {
  std::string ns = kube::namespace_of(job);
  return ns.empty() ? "default" : ns;
}

std::int64_t concurrent_pods(const json& job, bool honour_suspend) {
  const json& spec = field(job, "spec");
  if (honour_suspend && field(spec, "suspend").is_boolean() && field(spec, "suspend").get<bool>()) return 0;
  std::int64_t n = 1;
  if (const json& p = field(spec, "parallelism"); p.is_number_integer()) n = p.get<std::int64_t>();
  if (const json& c = field(spec, "completions"); c.is_number_integer()) n = std::min(n, c.get<std::int64_t>());
  return std::max<std::int64_t>(n, 0);
}

bool one_pod_per_node(const json& job) {
  const json& tmpl = pod_template(job);
  json labels = field(field(tmpl, "metadata"), "labels");
  if (!labels.is_object()) labels = json::object();
  const std::string name = kube::name_of(job);
  labels[kJobNameLabel] = name;
  labels["job-name"] = name;
  const json& terms = field(field(field(field(tmpl, "spec"), "affinity"), "podAntiAffinity"),
                            "requiredDuringSchedulingIgnoredDuringExecution");
  if (!terms.is_array()) return false;
  return std::any_of(terms.begin(), terms.end(), [&](const json& term) {
    // Namespaces other than the pod's own would repel other pods, not the job's.
    return string_field(term, "topologyKey") == kDefaultColocateTopology && field(term, "namespaces").is_null() &&
           field(term, "namespaceSelector").is_null() && field(term, "labelSelector").is_object() &&
           selector_matches(field(term, "labelSelector"), labels);
  });
}

std::vector<std::pair<std::string, std::int64_t>> nvidia_requests(const json& job) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& [name, q] : kube::pod_requests(pod_template(job))) {
    if (!is_nvidia_resource(name) || q.value() <= 0) continue;
    out.emplace_back(name, q.value());
  }
  std::stable_partition(out.begin(), out.end(), [](const auto& r) { return r.first == kGpuResource; });
  return out;
}

std::string amount(std::int64_t n, std::string_view resource) {
  if (resource == kGpuResource) return fmt::format("{} {}", n, n == 1 ? "GPU" : "GPUs");
  return fmt::format("{} {}", n, resource);
}

std::string count_of(std::int64_t n, std::string_view singular, std::string_view plural) {
  return fmt::format("{} {}", n, n == 1 ? singular : plural);
}

PreflightFinding refusal(std::string_view check, std::string message) {
  return PreflightFinding{std::string(check), FindingSeverity::refusal, std::move(message)};
}
PreflightFinding warning(std::string_view check, std::string message) {
  return PreflightFinding{std::string(check), FindingSeverity::warning, std::move(message)};
}

}  // namespace preflight_detail

using namespace preflight_detail;

std::string_view to_string(FindingSeverity severity) {
  return severity == FindingSeverity::refusal ? "refusal" : "warning";
}

const std::vector<PreflightCheck>& preflight_checks() {
  static const std::vector<PreflightCheck> checks = {
      {"gpu-capacity", &check_gpu_capacity},
      {"gpu-free-now", &check_gpu_free_now},
      {"device-capacity", &check_device_capacity},
      {"device-free-now", &check_device_free_now},
      {"quota", &check_quota},
      {"limit-range", &check_limit_range},
      {"volume-claim", &check_volume_claims},
      {"queue", &check_queue},
      {"gang", &check_gang},
  };
  return checks;
}

std::vector<PreflightFinding> run_preflight(const PreflightInput& input) {
  std::vector<PreflightFinding> findings;
  for (const auto& check : preflight_checks()) {
    auto found = check.run(input);
    findings.insert(findings.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  }
  return findings;
}

bool has_refusal(const std::vector<PreflightFinding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const auto& f) { return f.severity == FindingSeverity::refusal; });
}

Result<PreflightInput> collect_preflight_input(kube::Client& client, const json& job,
                                               const std::vector<json>* known_nodes) {
  PreflightInput input;
  input.job = job;
  const std::string ns = job_namespace(job);

  if (known_nodes) {
    input.nodes = *known_nodes;
  } else {
    GPUCTL_TRY_ASSIGN(kube::ListResult nodes, client.list(kube::paths::nodes()));
    input.nodes = std::move(nodes.items);
  }

  kube::ListOptions bound;
  bound.field_selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";
  if (auto pods = client.list(kube::paths::pods(), bound); pods) {
    input.pods = std::move(pods->items);
  } else if (pods.error().is_forbidden()) {
    input.pods_listed = false;  // a namespaced user: say nothing about free GPUs rather than guess
  } else {
    return fail(pods.error());
  }

  GPUCTL_TRY_ASSIGN(kube::ListResult quotas, client.list(kube::paths::resource_quotas(ns)));
  input.quotas = std::move(quotas.items);
  GPUCTL_TRY_ASSIGN(kube::ListResult limits, client.list(kube::paths::limit_ranges(ns)));
  input.limit_ranges = std::move(limits.items);

  std::set<std::string> claim_names;
  if (const json& volumes = field(pod_spec(job), "volumes"); volumes.is_array()) {
    for (const auto& v : volumes) {
      if (auto name = string_field(field(v, "persistentVolumeClaim"), "claimName"); !name.empty())
        claim_names.insert(name);
    }
  }
  std::set<std::string> class_names;
  for (const auto& name : claim_names) {
    auto claim = client.get(kube::paths::persistent_volume_claim(ns, name));
    if (!claim) {
      if (claim.error().is_not_found()) continue;
      return fail(claim.error().with_context(fmt::format("reading PersistentVolumeClaim {}/{}", ns, name)));
    }
    // Only an unbound claim's class matters (WaitForFirstConsumer); bound ones need no read.
    if (string_field(field(*claim, "status"), "phase") != "Bound") {
      if (auto cls = string_field(field(*claim, "spec"), "storageClassName"); !cls.empty()) class_names.insert(cls);
    }
    input.claims.emplace(name, std::move(*claim));
  }
  for (const auto& name : class_names) {
    auto cls = client.get(kube::paths::storage_class(name));
    if (cls) {
      input.storage_classes.emplace(name, std::move(*cls));
    } else if (cls.error().is_forbidden()) {
      input.unreadable_storage_classes.insert(name);
    } else if (!cls.error().is_not_found()) {
      return fail(cls.error().with_context(fmt::format("reading StorageClass {}", name)));
    }
  }
  return input;
}

json pod_from_job_template(const json& job) {
  const json& tmpl = pod_template(job);
  const json& tmpl_meta = field(tmpl, "metadata");
  const std::string name = kube::name_of(job);

  json metadata = json::object();
  if (!name.empty()) {
    metadata["generateName"] = name + "-";
  } else if (auto generate = string_field(field(job, "metadata"), "generateName"); !generate.empty()) {
    metadata["generateName"] = generate;
  }
  metadata["namespace"] = job_namespace(job);
  json labels = field(tmpl_meta, "labels").is_object() ? field(tmpl_meta, "labels") : json::object();
  json annotations = field(tmpl_meta, "annotations").is_object() ? field(tmpl_meta, "annotations") : json::object();
  if (!name.empty()) {
    labels["batch.kubernetes.io/job-name"] = name;
    labels["job-name"] = name;
  }
  if (string_field(field(job, "spec"), "completionMode") == "Indexed") {
    labels["batch.kubernetes.io/job-completion-index"] = "0";
    annotations["batch.kubernetes.io/job-completion-index"] = "0";
  }
  if (!labels.empty()) metadata["labels"] = std::move(labels);
  if (!annotations.empty()) metadata["annotations"] = std::move(annotations);

  json spec = field(tmpl, "spec").is_object() ? field(tmpl, "spec") : json::object();
  return json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(metadata)}, {"spec", std::move(spec)}};
}

json to_json(const std::vector<PreflightFinding>& findings) {
  json list = json::array();
  for (const auto& f : findings) {
    list.push_back({{"check", f.check}, {"severity", std::string(to_string(f.severity))}, {"message", f.message}});
  }
  return schema_document("PreflightReport", {{"refused", has_refusal(findings)}, {"findings", std::move(list)}});
}

}  // namespace gpuctl::ops
