// `gpuctl quota fix`: quota keys Kubernetes never enforces (nvidia.com/gpu, limits.nvidia.com/gpu)
// rewritten to requests.* keys, the stricter value kept, each quota replaced with its
// resourceVersion and planned again after a conflict.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "quota_write_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

using quota_write_detail::kMaxAttempts;
using quota_write_detail::qstr;
using quota_write_detail::writable;

std::optional<FixPlan> plan_quota_fix(const json& quota) {
  auto findings = check_quota_keys(quota);
  if (findings.empty()) return std::nullopt;
  FixPlan plan;
  plan.namespace_name = kube::namespace_of(quota);
  plan.quota = kube::name_of(quota);
  plan.object = writable(quota);
  json& hard = plan.object["spec"]["hard"];
  for (const auto& f : findings) {
    const std::string value = qstr(hard[f.key]);
    hard.erase(f.key);
    if (!hard.contains(f.replacement)) {
      hard[f.replacement] = value;
      plan.changes.push_back(fmt::format("{}={} -> {}={}", f.key, value, f.replacement, value));
      continue;
    }
    const std::string kept = qstr(hard[f.replacement]);
    auto a = kube::Quantity::parse(value);
    auto b = kube::Quantity::parse(kept);
    if (a && b && *a < *b) {
      hard[f.replacement] = value;
      plan.changes.push_back(
          fmt::format("{}={} -> {}={} (stricter than {}={})", f.key, value, f.replacement, value, f.replacement, kept));
    } else {
      plan.changes.push_back(
          fmt::format("{}={} removed ({}={} is as strict or stricter)", f.key, value, f.replacement, kept));
    }
  }
  plan.findings = std::move(findings);
  return plan;
}

std::size_t FixResult::failed() const {
  return static_cast<std::size_t>(
      std::count_if(items.begin(), items.end(), [](const FixItem& i) { return i.error.has_value(); }));
}

Result<FixResult> fix_quotas(kube::Client& client, std::string_view namespace_name, DryRun dry_run) {
  const bool client_dry_run = dry_run == DryRun::client;
  const kube::WriteOptions options = write_options(dry_run);
  GPUCTL_TRY_ASSIGN(kube::ListResult quotas, client.list(kube::paths::resource_quotas(namespace_name)));
  FixResult out;
  for (std::size_t i = 0; i < quotas.items.size(); ++i) {
    const json& quota = quotas.items[i];
    if (auto problem = kube::quota_shape_problem(quota); !problem.empty()) {
      // Never rewritten: what gpuctl cannot read it must not replace. Named, exit 1.
      FixItem item;
      item.plan.namespace_name = kube::namespace_of(quota);
      item.plan.quota = kube::name_of(quota);
      item.error =
          fail(Errc::parse, fmt::format("{} skipped: {}", kube::object_label("resourcequota", quota, i), problem))
              .error();
      out.items.push_back(std::move(item));
      continue;
    }
    auto plan = plan_quota_fix(quota);
    if (!plan) continue;
    FixItem item;
    item.plan = std::move(*plan);
    if (client_dry_run) {
      item.result = item.plan.object;
      out.items.push_back(std::move(item));
      continue;
    }
    const std::string path = kube::paths::resource_quota(item.plan.namespace_name, item.plan.quota);
    auto fixed = retry_on_conflict(kMaxAttempts, item.conflicts, [&](int attempt) -> Result<void> {
      if (attempt > 0) {
        // Changed since the list: read it again and plan again (it may need no fix any more).
        GPUCTL_TRY_ASSIGN(json fresh, client.get(path));
        auto again = plan_quota_fix(fresh);
        if (!again) {
          item.result = std::move(fresh);
          item.plan.changes = {"already fixed by someone else"};
          return {};
        }
        item.plan = std::move(*again);
      }
      GPUCTL_TRY_ASSIGN(item.result, client.replace(path, item.plan.object, options));
      return {};
    });
    if (!fixed) item.error = fixed.error();
    out.items.push_back(std::move(item));
  }
  return out;
}

}  // namespace gpuctl::ops
