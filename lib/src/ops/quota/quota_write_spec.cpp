// The quota gpuctl writes: `quota set`'s flags read into a QuotaSpec, and the pure builders of
// the ResourceQuota and LimitRange it sends (so --dry-run=client prints exactly these).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "quota_write_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

using quota_write_detail::kRequests;

std::optional<std::int64_t> parse_count(std::string_view t) {
  if (t.empty() || t.size() > 12) return std::nullopt;
  std::int64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// --devices CLASS=K: the DRA device class keys.
Result<std::vector<std::pair<std::string, std::int64_t>>> parse_devices(const std::vector<std::string>& devices) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  std::set<std::string> seen;
  for (const auto& d : devices) {
    auto eq = d.find('=');
    if (eq == std::string::npos) {
      return fail(Errc::invalid_argument,
                  fmt::format("--devices \"{}\": expected CLASS=COUNT, e.g. --devices gpu.nvidia.com=8", d));
    }
    std::string name = d.substr(0, eq);
    std::string value = d.substr(eq + 1);
    if (name.ends_with(kDeviceClassQuotaSuffix)) {
      return fail(
          Errc::invalid_argument,
          fmt::format("--devices \"{}\": give the DeviceClass name alone (--devices {}={}); gpuctl writes "
                      "the {} key",
                      d, name.substr(0, name.size() - kDeviceClassQuotaSuffix.size()), value, kDeviceClassQuotaSuffix));
    }
    if (auto problem = kube::paths::dns_subdomain_problem(name); !problem.empty()) {
      return fail(Errc::invalid_argument,
                  fmt::format("--devices \"{}\": \"{}\" is not a DeviceClass name: {}", d, name, problem));
    }
    auto k = parse_count(value);
    if (!k) {
      return fail(Errc::invalid_argument,
                  fmt::format("--devices \"{}\": the count \"{}\" must be a whole number of 0 or more", d, value));
    }
    if (!seen.insert(name).second) {
      return fail(Errc::invalid_argument, fmt::format("--devices {} is given twice: give each class once", name));
    }
    out.emplace_back(name, *k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string namespace_name_problem(std::string_view name) {
  if (name.empty()) return "a namespace name must not be empty";
  if (name.size() > 63) return fmt::format("must be no more than 63 characters (has {})", name.size());
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : name) {
    if (!alnum(c) && c != '-') {
      return "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
             "character";
    }
  }
  if (!alnum(name.front()) || !alnum(name.back())) {
    return "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
           "character";
  }
  return {};
}

Result<QuotaSpec> parse_quota_spec(std::string_view namespace_name, std::string_view gpus,
                                   std::optional<std::string_view> max_per_pod,
                                   const std::vector<std::string>& resources, const std::vector<std::string>& devices,
                                   std::optional<std::string_view> claims) {
  QuotaSpec spec;
  if (auto p = namespace_name_problem(namespace_name); !p.empty()) {
    return fail(Errc::invalid_argument, fmt::format("namespace \"{}\": {}", namespace_name, p));
  }
  spec.namespace_name = std::string(namespace_name);
  auto n = parse_count(gpus);
  if (!n) {
    return fail(Errc::invalid_argument,
                fmt::format("--gpus \"{}\": give the number of GPUs the namespace may request in all, a whole number "
                            "of 0 or more (e.g. --gpus 8)",
                            gpus));
  }
  spec.gpus = *n;
  if (max_per_pod) {
    auto m = parse_count(*max_per_pod);
    if (!m) {
      return fail(Errc::invalid_argument,
                  fmt::format("--max-per-pod \"{}\": give the most GPUs one pod may request, a whole number of 0 or "
                              "more (e.g. --max-per-pod 4)",
                              *max_per_pod));
    }
    spec.max_per_pod = *m;
  }
  std::set<std::string> seen;
  for (const auto& r : resources) {
    auto eq = r.find('=');
    if (eq == std::string::npos) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": expected NAME=COUNT, e.g. --resource nvidia.com/mig-1g.10gb=4", r));
    }
    std::string name = r.substr(0, eq);
    std::string value = r.substr(eq + 1);
    for (std::string_view prefix : {"requests.", "limits."}) {
      if (name.starts_with(prefix)) {
        return fail(
            Errc::invalid_argument,
            fmt::format("--resource \"{}\": give the resource name without the \"{}\" prefix (--resource {}={}); "
                        "gpuctl writes the requests. key, the only one Kubernetes enforces",
                        r, prefix, name.substr(prefix.size()), value));
      }
    }
    if (name.ends_with(kDeviceClassQuotaSuffix) || name.starts_with("count/")) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": DRA devices and claims are set with --devices CLASS=COUNT and "
                              "--claims COUNT",
                              r));
    }
    if (name == kGpuResource) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": whole GPUs are set with --gpus {}", r, value.empty() ? "N" : value));
    }
    auto slash = name.find('/');
    std::string problem = qualified_name_problem(name);
    if (slash == std::string::npos || !problem.empty() || name.starts_with("kubernetes.io/") ||
        name.find(".kubernetes.io/") != std::string::npos) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": \"{}\" is not an extended resource name (a qualified name such as "
                              "nvidia.com/mig-1g.10gb){}",
                              r, name, problem.empty() ? "" : ": " + problem));
    }
    auto k = parse_count(value);
    if (!k) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": the count \"{}\" must be a whole number of 0 or more "
                              "(extended resources are counted in integers)",
                              r, value));
    }
    if (!seen.insert(name).second) {
      return fail(Errc::invalid_argument, fmt::format("--resource {} is given twice: give each resource once", name));
    }
    spec.resources.emplace_back(name, *k);
  }
  std::sort(spec.resources.begin(), spec.resources.end());
  GPUCTL_TRY_ASSIGN(spec.devices, parse_devices(devices));
  if (claims) {
    auto c = parse_count(*claims);
    if (!c) {
      return fail(Errc::invalid_argument,
                  fmt::format("--claims \"{}\": give the most ResourceClaims the namespace may hold, a whole number "
                              "of 0 or more (e.g. --claims 4)",
                              *claims));
    }
    spec.claims = *c;
  }
  return spec;
}

json build_gpu_quota(const QuotaSpec& spec) {
  json hard = json::object();
  hard[kRequests + std::string(kGpuResource)] = std::to_string(spec.gpus);
  for (const auto& [name, count] : spec.resources) hard[kRequests + name] = std::to_string(count);
  for (const auto& [device_class, count] : spec.devices)
    hard[device_class_quota_key(device_class)] = std::to_string(count);
  if (spec.claims) hard[std::string(kResourceClaimsQuotaKey)] = std::to_string(*spec.claims);
  return {
      {"apiVersion", "v1"},
      {"kind", "ResourceQuota"},
      {"metadata",
       {{"name", kGpuQuotaName}, {"namespace", spec.namespace_name}, {"labels", {{kManagedByLabel, kManagedByValue}}}}},
      {"spec", {{"hard", hard}}}};
}

json build_gpu_limit_range(const QuotaSpec& spec) {
  const std::string m = std::to_string(spec.max_per_pod.value_or(0));
  const std::string gpu(kGpuResource);
  return {
      {"apiVersion", "v1"},
      {"kind", "LimitRange"},
      {"metadata",
       {{"name", kGpuLimitRangeName},
        {"namespace", spec.namespace_name},
        {"labels", {{kManagedByLabel, kManagedByValue}}}}},
      {"spec",
       {{"limits",
         json::array(
             {{{"type", "Container"}, {"max", {{gpu, m}}}, {"default", {{gpu, "0"}}}, {"defaultRequest", {{gpu, "0"}}}},
              {{"type", "Pod"}, {"max", {{gpu, m}}}}})}}}};
}

}  // namespace gpuctl::ops
