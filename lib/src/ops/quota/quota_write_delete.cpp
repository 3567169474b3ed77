// `gpuctl quota delete`: only the two objects gpuctl created (by name and label, with a uid
// precondition); when neither is there, the error names the quotas that are.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "quota_write_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

using quota_write_detail::get_optional;
using quota_write_detail::lowercase;
using quota_write_detail::path_of;

Result<DeleteResult> delete_quota(kube::Client& client, std::string_view namespace_name, DryRun dry_run) {
  const bool client_dry_run = dry_run == DryRun::client;
  const kube::WriteOptions options = write_options(dry_run);
  DeleteResult out;
  out.namespace_name = std::string(namespace_name);
  std::vector<std::string> not_ours;
  for (auto [kind, name] : {std::pair<std::string, std::string_view>{"ResourceQuota", kGpuQuotaName},
                            std::pair<std::string, std::string_view>{"LimitRange", kGpuLimitRangeName}}) {
    const std::string path = path_of(kind, namespace_name, name);
    GPUCTL_TRY_ASSIGN(std::optional<json> existing, get_optional(client, path));
    DeleteItem item{kind, std::string(name), false};
    if (existing && kube::label_of(*existing, kManagedByLabel) != std::string(kManagedByValue)) {
      not_ours.push_back(fmt::format("{}/{}", lowercase(kind), name));
      existing.reset();
    }
    if (existing) {
      if (client_dry_run) {
        item.deleted = true;
      } else {
        json preconditions = {
            {"preconditions", {{"uid", kube::string_field(kube::field(*existing, "metadata"), "uid")}}}};
        auto removed = client.remove(path, preconditions, options);
        if (removed) {
          item.deleted = true;
        } else if (!removed.error().is_not_found()) {
          return fail(removed.error().with_context(
              fmt::format("deleting {}/{} in namespace {}", lowercase(kind), name, namespace_name)));
        }
      }
    }
    out.items.push_back(std::move(item));
  }
  if (std::any_of(out.items.begin(), out.items.end(), [](const DeleteItem& i) { return i.deleted; })) return out;

  // Nothing of gpuctl's: say what is there instead.
  std::vector<std::string> others = not_ours;
  if (auto quotas = client.list(kube::paths::resource_quotas(namespace_name))) {
    for (const auto& q : quotas->items) {
      if (kube::name_of(q) != kGpuQuotaName) others.push_back("resourcequota/" + kube::name_of(q));
    }
  }
  Error e;
  e.code = Errc::api;
  e.http_status = 404;
  e.reason = "NotFound";
  e.message = fmt::format("namespace {} has no gpuctl quota (no resourcequota/{} or limitrange/{} with label {}={})",
                          namespace_name, kGpuQuotaName, kGpuLimitRangeName, kManagedByLabel, kManagedByValue);
  if (others.empty()) {
    e.message += "; it has no other quota either";
  } else {
    e.message +=
        fmt::format("; gpuctl leaves objects it did not create alone: {} (delete them with kubectl delete -n {} ...)",
                    fmt::join(others, ", "), namespace_name);
  }
  return fail(std::move(e));
}

}  // namespace gpuctl::ops
