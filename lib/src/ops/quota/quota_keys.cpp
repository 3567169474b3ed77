// What a ResourceQuota key means for GPUs: an nvidia.com/* extended resource (enforced only under
// requests.), a DRA device class key of NVIDIA's classes or the claim count (enforced as written),
// and the check that flags the keys Kubernetes accepts but never enforces.
#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/quota/quota.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

constexpr std::string_view kRequestsPrefix = "requests.";
using kube::field;

}  // namespace

std::string device_class_quota_key(std::string_view device_class) {
  return std::string(device_class) + std::string(kDeviceClassQuotaSuffix);
}

std::optional<GpuQuotaKey> classify_gpu_quota_key(std::string_view key) {
  GpuQuotaKey k;
  k.key = std::string(key);
  // DRA: counted per ResourceClaim, enforced as written. Only NVIDIA's classes are GPUs.
  if (key == kResourceClaimsQuotaKey) {
    k.resource = k.key;
    k.enforced = true;
    k.resource_claims = true;
    return k;
  }
  if (key.ends_with(kDeviceClassQuotaSuffix)) {
    std::string_view device_class = key.substr(0, key.size() - kDeviceClassQuotaSuffix.size());
    if (!device_class.ends_with("nvidia.com")) return std::nullopt;
    k.resource = k.key;
    k.enforced = true;
    k.device_class = std::string(device_class);
    return k;
  }
  std::string_view resource = key;
  if (resource.starts_with(kRequestsPrefix)) {
    resource.remove_prefix(kRequestsPrefix.size());
    k.enforced = true;
  } else if (resource.starts_with("limits.")) {
    resource.remove_prefix(std::string_view("limits.").size());
  }
  if (!is_nvidia_resource(resource) || resource.size() == kNvidiaResourcePrefix.size()) return std::nullopt;
  k.resource = std::string(resource);
  return k;
}

std::vector<QuotaFinding> check_quota_keys(const json& quota) {
  std::vector<QuotaFinding> out;
  const json& hard = field(field(quota, "spec"), "hard");
  if (!hard.is_object()) return out;
  const std::string ns = kube::namespace_of(quota);
  const std::string name = kube::name_of(quota);
  for (const auto& [key, value] : hard.items()) {
    auto k = classify_gpu_quota_key(key);
    if (!k || k->enforced) continue;
    QuotaFinding f;
    f.namespace_name = ns;
    f.quota = name;
    f.key = key;
    f.value = value.is_string() ? value.get<std::string>() : value.dump();
    f.replacement = std::string(kRequestsPrefix) + k->resource;
    f.message = fmt::format("quota {}/{}: key {} is never enforced by Kubernetes; use {} (gpuctl quota fix {})", ns,
                            name, key, f.replacement, ns);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops
