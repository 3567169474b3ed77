// A -f manifest's values, checked as the flags that would set them are checked, so that a job
// from a manifest is held to what a job from flags is.
#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "submit_flags_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace submit_flags_detail;

// A manifest resource value, checked as the matching flag checks it: GPUs (nvidia.com/*) as
// --gpus (a whole number 0..1024), everything else as --cpu/--memory (more than zero).
Result<void> resource_value(std::string_view where, const std::string& resource, const json& value) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  auto q = value.is_string()           ? kube::Quantity::parse(text)
           : value.is_number_integer() ? Result<kube::Quantity>(kube::Quantity::from_int(value.get<std::int64_t>()))
                                       : Result<kube::Quantity>(fail(Errc::parse, "not a quantity"));
  if (!q) return usage(fmt::format("{}.{} {:?}: not a quantity", where, resource, text));
  if (resource.starts_with("nvidia.com/")) {
    if (q->sign() < 0 || q->milli_value() != kube::saturating_mul(q->value(), 1000) || q->value() > 1024) {
      return usage(
          fmt::format("{}.{} {:?}: expected a whole number of GPUs from 0 to 1024 (as --gpus)", where, resource, text));
    }
  } else if (q->sign() <= 0) {
    return usage(fmt::format("{}.{} {:?}: must be more than zero (as --cpu and --memory)", where, resource, text));
  }
  return {};
}

Result<void> container_values(const json& c, const std::string& where) {
  const json& resources = kube::field(c, "resources");
  for (const char* part : {"requests", "limits"}) {
    const json& list = kube::field(resources, part);
    if (!list.is_object()) continue;
    for (const auto& [resource, value] : list.items()) {
      GPUCTL_TRY(resource_value(fmt::format("{}.resources.{}", where, part), resource, value));
    }
  }
  for (const char* r : {"cpu", "memory"}) {
    auto req = kube::parse_resource_list(kube::field(resources, "requests"));
    auto lim = kube::parse_resource_list(kube::field(resources, "limits"));
    if (req.contains(r) && lim.contains(r) && lim.at(r) < req.at(r)) {
      return usage(fmt::format("{}: the {} limit {} is below the request {}: a limit must be at least the request",
                               where, r, lim.at(r).to_string(), req.at(r).to_string()));
    }
  }
  for (const auto& e : kube::array_field(c, "env")) {
    std::string name = kube::string_field(e, "name");
    if (!is_env_name(name))
      return usage(fmt::format("{}.env: {:?} is not a valid variable name (as --env)", where, name));
  }
  return {};
}

Result<void> labels_and_annotations(const json& metadata, const std::string& where) {
  const json& labels = kube::field(metadata, "labels");
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      if (!is_qualified_name(k) || !v.is_string() || !is_label_value(v.get<std::string>())) {
        return usage(fmt::format("{}.labels: {:?}={} is not a valid label (as --label)", where, k, v.dump()));
      }
    }
  }
  const json& annotations = kube::field(metadata, "annotations");
  if (annotations.is_object()) {
    for (const auto& [k, v] : annotations.items()) {
      if (!is_qualified_name(k) || !v.is_string())
        return usage(fmt::format("{}.annotations: {:?} is not a valid annotation (as --annotation)", where, k));
    }
  }
  return {};
}

Result<void> integer_at_least(const json& spec, const char* key, std::int64_t min, std::string_view flag) {
  const json& v = kube::field(spec, key);
  if (v.is_null()) return {};
  if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > 2147483647) {
    return usage(fmt::format("spec.{} {}: expected a whole number from {} to 2147483647{}", key, v.dump(), min, flag));
  }
  return {};
}

}  // namespace

Result<void> check_manifest_values(const json& job) {
  std::string name = kube::name_of(job);
  if (!name.empty() && !is_dns_label(name)) {
    return usage(
        fmt::format("metadata.name {:?} is not valid: at most 63 lowercase letters, digits and '-', starting and "
                    "ending with a letter or digit (the Job controller puts it in a label)",
                    name));
  }
  GPUCTL_TRY(labels_and_annotations(kube::field(job, "metadata"), "metadata"));
  const json& spec = kube::field(job, "spec");
  GPUCTL_TRY(integer_at_least(spec, "backoffLimit", 0, " (as --backoff-limit)"));
  GPUCTL_TRY(integer_at_least(spec, "activeDeadlineSeconds", 1, " (as --active-deadline)"));
  GPUCTL_TRY(integer_at_least(spec, "ttlSecondsAfterFinished", 0, " (as --ttl-after-finished)"));
  GPUCTL_TRY(integer_at_least(spec, "parallelism", 0, ""));
  GPUCTL_TRY(integer_at_least(spec, "completions", 0, ""));
  const json& tmpl = kube::field(spec, "template");
  GPUCTL_TRY(labels_and_annotations(kube::field(tmpl, "metadata"), "spec.template.metadata"));
  const json& pod_spec = kube::field(tmpl, "spec");
  std::string priority = kube::string_field(pod_spec, "priorityClassName");
  if (!priority.empty() && !(priority.size() <= 253 && is_qualified_name(priority))) {
    return usage(fmt::format("spec.template.spec.priorityClassName {:?} is not a valid PriorityClass name", priority));
  }
  for (const char* list : {"initContainers", "containers"}) {
    const json& containers = kube::array_field(pod_spec, list);
    for (std::size_t i = 0; i < containers.size(); ++i) {
      GPUCTL_TRY(container_values(containers[i], fmt::format("spec.template.spec.{}[{}]", list, i)));
    }
  }
  return {};
}

}  // namespace gpuctl::ops
