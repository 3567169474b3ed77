// `gpuctl quota set`: warn when the new quota is below what the namespace already uses, then
// create or replace the ResourceQuota and, with --max-per-pod, the LimitRange.
#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "quota_write_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

using quota_write_detail::get_optional;
using quota_write_detail::kMaxAttempts;
using quota_write_detail::kRequests;
using quota_write_detail::lowercase;
using quota_write_detail::path_of;
using quota_write_detail::qstr;

std::map<std::string, std::int64_t> pod_usage(const std::vector<json>& pods) {
  std::map<std::string, std::int64_t> used;
  for (const auto& pod : pods) {
    if (kube::pod_is_terminal(pod)) continue;
    for (const auto& [resource, q] : kube::pod_requests(pod)) {
      if (is_nvidia_resource(resource)) used[resource] = kube::saturating_add(used[resource], q.value());
    }
  }
  return used;
}

Result<ApplyResult> apply_one(kube::Client& client, const json& desired, bool client_dry_run,
                              const kube::WriteOptions& options) {
  const std::string kind = kube::string_field(desired, "kind");
  const std::string ns = kube::namespace_of(desired);
  const std::string name = kube::name_of(desired);
  ApplyResult out;
  auto applied = retry_on_conflict(kMaxAttempts, out.conflicts, [&](int) -> Result<void> {
    // Every attempt reads afresh: after a conflict somebody else created or changed the object.
    GPUCTL_TRY_ASSIGN(std::optional<json> existing, get_optional(client, path_of(kind, ns, name)));
    GPUCTL_TRY_ASSIGN(out.plan, plan_managed_object(desired, existing));
    if (client_dry_run || out.plan.action == ApplyAction::unchanged) {
      out.result = out.plan.object;
      return {};
    }
    GPUCTL_TRY_ASSIGN(out.result, out.plan.action == ApplyAction::create
                                      ? client.create(path_of(kind, ns, ""), out.plan.object, options)
                                      : client.replace(path_of(kind, ns, name), out.plan.object, options));
    return {};
  });
  if (!applied) return fail(applied.error().with_context(fmt::format("{} {}/{}", lowercase(kind), ns, name)));
  return out;
}

}  // namespace

std::vector<std::string> below_use_warnings(const QuotaSpec& spec, const std::map<std::string, std::int64_t>& used) {
  std::vector<std::pair<std::string, std::int64_t>> wanted = {{std::string(kGpuResource), spec.gpus}};
  wanted.insert(wanted.end(), spec.resources.begin(), spec.resources.end());
  std::vector<std::string> out;
  for (const auto& [resource, hard] : wanted) {
    auto it = used.find(resource);
    if (it == used.end() || it->second <= hard) continue;
    out.push_back(fmt::format(
        "namespace {} already uses {} {}{}, more than the new quota of {}: running pods stay, "
        "new pods asking for {} are refused until fewer than {} are in use",
        spec.namespace_name, it->second, kRequests, resource, hard, resource, std::max<std::int64_t>(hard, 1)));
  }
  std::vector<std::pair<std::string, std::int64_t>> claimed;
  for (const auto& [device_class, hard] : spec.devices)
    claimed.emplace_back(device_class_quota_key(device_class), hard);
  if (spec.claims) claimed.emplace_back(std::string(kResourceClaimsQuotaKey), *spec.claims);
  for (const auto& [key, hard] : claimed) {
    auto it = used.find(key);
    if (it == used.end() || it->second <= hard) continue;
    out.push_back(fmt::format(
        "namespace {} already uses {} {}, more than the new quota of {}: existing ResourceClaims stay, new ones "
        "are refused (their pods wait in Pending) until the use is below it",
        spec.namespace_name, it->second, key, hard));
  }
  return out;
}

Result<SetResult> set_quota(kube::Client& client, const QuotaSpec& spec, DryRun dry_run) {
  const bool client_dry_run = dry_run == DryRun::client;
  const kube::WriteOptions options = write_options(dry_run);
  SetResult out;
  // Current use: the controller's count when it has one for every key, else the pods'.
  const std::string quota_path = kube::paths::resource_quota(spec.namespace_name, kGpuQuotaName);
  GPUCTL_TRY_ASSIGN(std::optional<json> existing, get_optional(client, quota_path));
  std::map<std::string, std::int64_t> used;
  bool counted = existing && existing->contains("/status/used"_json_pointer);
  std::vector<std::string> resources = {std::string(kGpuResource)};
  for (const auto& [name, count] : spec.resources) resources.push_back(name);
  for (const auto& r : resources) {
    if (!counted) break;
    const json& u = existing->at("/status/used"_json_pointer);
    if (!u.contains(kRequests + r)) {
      counted = false;
      break;
    }
    auto q = kube::Quantity::parse(qstr(u[kRequests + r]));
    used[r] = q ? q->value() : 0;
  }
  if (!counted) {
    kube::ListOptions running;
    running.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
    GPUCTL_TRY_ASSIGN(kube::ListResult pods, client.list(kube::paths::pods(spec.namespace_name), running));
    used = pod_usage(pods.items);
  }
  // DRA keys: only the controller's count (claims are not pods; the pod fallback cannot see them).
  if (existing && existing->contains("/status/used"_json_pointer)) {
    const json& u = existing->at("/status/used"_json_pointer);
    std::vector<std::string> keys;
    for (const auto& [device_class, count] : spec.devices) keys.push_back(device_class_quota_key(device_class));
    if (spec.claims) keys.emplace_back(kResourceClaimsQuotaKey);
    for (const auto& key : keys) {
      if (!u.contains(key)) continue;
      if (auto q = kube::Quantity::parse(qstr(u[key])); q) used[key] = q->value();
    }
  }
  out.warnings = below_use_warnings(spec, used);

  GPUCTL_TRY_ASSIGN(ApplyResult quota, apply_one(client, build_gpu_quota(spec), client_dry_run, options));
  out.objects.push_back(std::move(quota));
  if (spec.max_per_pod) {
    auto limits = apply_one(client, build_gpu_limit_range(spec), client_dry_run, options);
    if (!limits) {
      return fail(limits.error().with_context(fmt::format("resourcequota/{} {}, but the LimitRange failed",
                                                          kGpuQuotaName, to_string(out.objects[0].plan.action))));
    }
    out.objects.push_back(std::move(*limits));
  }
  return out;
}

}  // namespace gpuctl::ops
