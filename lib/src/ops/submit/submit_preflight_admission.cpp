// quota and limit-range: what the ResourceQuota and LimitRanger admission plugins would say to
// the job's pods (they look at pods, never at the Job).
#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace preflight_detail;
using kube::Quantity;
using kube::ResourceList;

constexpr std::string_view kQuota = "quota";
constexpr std::string_view kLimitRange = "limit-range";

}  // namespace

// Which quotas count a pod, and under which keys: shared with the workloads' sum (preflight_detail).
namespace preflight_detail {
namespace {

std::string object_name(const json& object, const std::string& ns) { return ns + "/" + kube::name_of(object); }

// --- Quota scopes --------------------------------------------------------------------------

bool has_compute_resources(const json& spec) {
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = field(spec, list);
    if (!containers.is_array()) continue;
    for (const auto& c : containers) {
      const json& resources = field(c, "resources");
      for (const char* kind : {"requests", "limits"}) {
        const json& r = field(resources, kind);
        if (r.is_object() && (r.contains("cpu") || r.contains("memory"))) return true;
      }
    }
  }
  return false;
}

bool cross_namespace_affinity(const json& spec) {
  const json& affinity = field(spec, "affinity");
  for (const char* kind : {"podAffinity", "podAntiAffinity"}) {
    const json& a = field(affinity, kind);
    for (const char* when :
         {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"}) {
      const json& terms = field(a, when);
      if (!terms.is_array()) continue;
      for (const auto& t : terms) {
        const json& term = t.contains("podAffinityTerm") ? t["podAffinityTerm"] : t;
        if (!field(term, "namespaceSelector").is_null()) return true;
        if (field(term, "namespaces").is_array() && !field(term, "namespaces").empty()) return true;
      }
    }
  }
  return false;
}

// Whether a scope (operator Exists) holds for the pod; nullopt for scopes this check cannot judge.
std::optional<bool> scope_holds(const std::string& scope, const json& spec) {
  if (scope == "Terminating") return field(spec, "activeDeadlineSeconds").is_number_integer();
  if (scope == "NotTerminating") return !field(spec, "activeDeadlineSeconds").is_number_integer();
  if (scope == "BestEffort") return !has_compute_resources(spec);
  if (scope == "NotBestEffort") return has_compute_resources(spec);
  if (scope == "CrossNamespacePodAffinity") return cross_namespace_affinity(spec);
  return std::nullopt;
}

}  // namespace

Applies quota_applies(const json& quota, const json& pod_spec) {
  const json& spec = field(quota, "spec");
  const std::string priority_class = string_field(pod_spec, "priorityClassName");
  bool unknown = false;
  auto judge = [&](const std::string& scope, const std::string& op, const std::vector<std::string>& values) -> bool {
    if (scope == "PriorityClass") {
      // A pod without a class may be given the cluster's globalDefault class at admission.
      if (priority_class.empty()) {
        unknown = true;
        return true;
      }
      bool listed = std::find(values.begin(), values.end(), priority_class) != values.end();
      if (op == "In") return listed;
      if (op == "NotIn") return !listed;
      if (op == "Exists") return true;
      if (op == "DoesNotExist") return false;
      unknown = true;
      return true;
    }
    auto holds = scope_holds(scope, pod_spec);
    if (!holds || (op != "Exists" && op != "DoesNotExist")) {
      unknown = true;
      return true;
    }
    return op == "Exists" ? *holds : !*holds;
  };
  if (const json& scopes = field(spec, "scopes"); scopes.is_array()) {
    for (const auto& s : scopes) {
      if (!judge(s.is_string() ? s.get<std::string>() : "", "Exists", {})) return Applies::no;
    }
  }
  if (const json& exprs = field(field(spec, "scopeSelector"), "matchExpressions"); exprs.is_array()) {
    for (const auto& e : exprs) {
      std::vector<std::string> values;
      if (const json& v = field(e, "values"); v.is_array()) {
        for (const auto& x : v) {
          if (x.is_string()) values.push_back(x.get<std::string>());
        }
      }
      if (!judge(string_field(e, "scopeName"), string_field(e, "operator"), values)) return Applies::no;
    }
  }
  return unknown ? Applies::unknown : Applies::yes;
}

// --- Quota keys ----------------------------------------------------------------------------

bool is_extended(const std::string& resource) {
  return resource.find('/') != std::string::npos && !resource.starts_with("kubernetes.io/") &&
         !resource.starts_with("requests.") && !resource.starts_with("limits.");
}

// The quota keys a pod's request of `resource` is counted under.
std::vector<std::string> quota_keys(const std::string& resource) {
  if (resource == "cpu" || resource == "memory" || resource == "ephemeral-storage")
    return {resource, "requests." + resource};
  if (resource.starts_with("hugepages-") || is_extended(resource)) return {"requests." + resource};
  return {};
}

}  // namespace preflight_detail

namespace {

using namespace preflight_detail;

Quantity times(const Quantity& q, std::int64_t n) { return q.times(n); }

std::int64_t how_many_fit(const Quantity& left, const Quantity& each) {
  if (each.milli_value() <= 0) return 0;
  return std::max<std::int64_t>(left.milli_value(), 0) / each.milli_value();
}

// --- LimitRange items -----------------------------------------------------------------------

constexpr std::string_view kRefused = "the API server would refuse every pod";

// One item of a LimitRange's spec.limits, as far as it concerns nvidia.com/* resources.
struct LimitItem {
  std::string type;  // Container, Pod (others, such as PersistentVolumeClaim, are not about GPUs)
  ResourceList max, min, defaults, default_requests;
  std::set<std::string> gpu_resources;  // the nvidia.com/* resources any of the four lists names
};

LimitItem read_limit_item(const json& item) {
  LimitItem l;
  l.type = string_field(item, "type");
  l.max = kube::parse_resource_list(field(item, "max"));
  l.min = kube::parse_resource_list(field(item, "min"));
  l.defaults = kube::parse_resource_list(field(item, "default"));
  l.default_requests = kube::parse_resource_list(field(item, "defaultRequest"));
  for (const auto* list : {&l.max, &l.min, &l.defaults, &l.default_requests}) {
    for (const auto& [r, q] : *list) {
      if (is_nvidia_resource(r)) l.gpu_resources.insert(r);
    }
  }
  return l;
}

// A container that asks for none of `r`: LimitRanger gives it the item's default (a warning: each
// pod takes more GPUs than the job says), or, with no default but a max or min, refuses the pod.
void container_without(const LimitItem& item, const std::string& r, const std::string& name, const std::string& cname,
                       std::vector<PreflightFinding>& out) {
  std::optional<Quantity> given;
  if (auto d = item.defaults.find(r); d != item.defaults.end()) {
    given = d->second;
  } else if (auto dr = item.default_requests.find(r); dr != item.default_requests.end()) {
    given = dr->second;
  }
  if (given && given->sign() > 0) {
    out.push_back(warning(kLimitRange, fmt::format("LimitRange {} gives container \"{}\", which asks for no {}, "
                                                   "the default of {}: each pod takes that many more",
                                                   name, cname, r, given->to_string())));
  } else if (item.max.contains(r) || item.min.contains(r)) {
    out.push_back(refusal(kLimitRange, fmt::format("LimitRange {} requires a {} limit on every container, "
                                                   "container \"{}\" sets none; {}",
                                                   name, r, cname, kRefused)));
  }
}

// A type: Container item against every container (init containers too) of the pod.
void check_containers(const LimitItem& item, const json& spec, const std::string& name,
                      std::vector<PreflightFinding>& out) {
  for (const char* kind : {"initContainers", "containers"}) {
    const json& containers = field(spec, kind);
    if (!containers.is_array()) continue;
    for (const auto& c : containers) {
      const std::string cname = string_field(c, "name");
      const ResourceList limits = kube::parse_resource_list(field(field(c, "resources"), "limits"));
      const ResourceList requests = kube::parse_resource_list(field(field(c, "resources"), "requests"));
      for (const auto& r : item.gpu_resources) {
        auto l = limits.find(r);
        auto q = requests.find(r);
        if (l == limits.end() && q == requests.end()) {
          container_without(item, r, name, cname, out);
          continue;
        }
        // A limit alone is the request too (the API server's defaulting); a request alone is read
        // as the limit as well.
        const Quantity limit = l != limits.end() ? l->second : q->second;
        const Quantity request = q != requests.end() ? q->second : l->second;
        if (auto m = item.max.find(r); m != item.max.end() && limit > m->second) {
          out.push_back(
              refusal(kLimitRange, fmt::format("LimitRange {} allows at most {} {} per container, container "
                                               "\"{}\" asks for {}; {}",
                                               name, m->second.to_string(), r, cname, limit.to_string(), kRefused)));
        }
        if (auto m = item.min.find(r); m != item.min.end() && request < m->second) {
          out.push_back(
              refusal(kLimitRange, fmt::format("LimitRange {} requires at least {} {} per container, container "
                                               "\"{}\" asks for {}; {}",
                                               name, m->second.to_string(), r, cname, request.to_string(), kRefused)));
        }
      }
    }
  }
}

// A type: Pod item against the pod's total requests.
void check_pod(const LimitItem& item, const ResourceList& pod_total, const std::string& name,
               std::vector<PreflightFinding>& out) {
  for (const auto& r : item.gpu_resources) {
    auto total = pod_total.find(r);
    bool asks = total != pod_total.end() && total->second.sign() > 0;
    auto mx = item.max.find(r);
    auto mn = item.min.find(r);
    if (!asks) {
      // LimitRanger's "maximum ... usage per Pod is N.  No limit is specified".
      if (mx != item.max.end() || mn != item.min.end()) {
        out.push_back(refusal(kLimitRange, fmt::format("LimitRange {} limits {} per pod, and the API server refuses "
                                                       "pods that set no {} limit, as this job's do",
                                                       name, r, r)));
      }
      continue;
    }
    if (mx != item.max.end() && total->second > mx->second) {
      out.push_back(
          refusal(kLimitRange, fmt::format("LimitRange {} allows at most {} {} per pod, each pod of this job "
                                           "asks for {}; {}",
                                           name, mx->second.to_string(), r, total->second.to_string(), kRefused)));
    }
    if (mn != item.min.end() && total->second < mn->second) {
      out.push_back(
          refusal(kLimitRange, fmt::format("LimitRange {} requires at least {} {} per pod, each pod of this job "
                                           "asks for {}; {}",
                                           name, mn->second.to_string(), r, total->second.to_string(), kRefused)));
    }
  }
}

}  // namespace

std::vector<PreflightFinding> check_quota(const PreflightInput& input) {
  std::vector<PreflightFinding> out;
  const std::string ns = job_namespace(input.job);
  const json& spec = pod_spec(input.job);
  const ResourceList per_pod = kube::pod_requests(pod_template(input.job));
  const std::int64_t pods = std::max<std::int64_t>(concurrent_pods(input.job, false), 1);

  std::vector<std::pair<std::string, Quantity>> counted;  // quota key -> per-pod amount
  for (const auto& [resource, q] : per_pod) {
    if (q.sign() <= 0) continue;
    for (const auto& key : quota_keys(resource)) counted.emplace_back(key, q);
  }
  counted.emplace_back("pods", Quantity::from_int(1));
  counted.emplace_back("count/pods", Quantity::from_int(1));
  // A claim is no pod: quota scopes never select it, so only unscoped quotas count its keys.
  const auto device_keys = device_quota_keys(input);
  std::set<std::string> claim_keys;  // what the API server refuses the claim on, not the pod
  for (const auto& [key, each] : device_keys) claim_keys.insert(key);

  for (const auto& quota : input.quotas) {
    const std::string name = object_name(quota, ns);
    const ResourceList hard = kube::parse_resource_list(field(field(quota, "spec"), "hard"));
    // Keys Kubernetes accepts and never enforces, for extended resources the pod asks for.
    for (const auto& [resource, q] : per_pod) {
      if (!is_extended(resource) || q.sign() <= 0) continue;
      for (const std::string& key : {resource, "limits." + resource}) {
        auto it = hard.find(key);
        if (it == hard.end()) continue;
        out.push_back(warning(kQuota, fmt::format("quota {} sets {}: {}, which Kubernetes accepts but never enforces "
                                                  "(only requests.{} counts); gpuctl quota fix {} rewrites it",
                                                  name, key, it->second.to_string(), resource, ns)));
      }
    }
    const bool scoped =
        !field(field(quota, "spec"), "scopes").empty() || !field(field(quota, "spec"), "scopeSelector").is_null();
    if (quota_applies(quota, spec) != Applies::yes) continue;
    auto keys = counted;
    if (!scoped) keys.insert(keys.end(), device_keys.begin(), device_keys.end());

    const json& status_used = field(field(quota, "status"), "used");
    const ResourceList used = kube::parse_resource_list(status_used);
    for (const auto& [key, each] : keys) {
      auto h = hard.find(key);
      if (h == hard.end()) continue;
      auto u = used.find(key);
      if (u == used.end()) {
        out.push_back(warning(kQuota, fmt::format("quota {} has not been counted yet (no status.used for {}): the API "
                                                  "server refuses pods until kube-controller-manager fills it in",
                                                  name, key)));
        continue;
      }
      const Quantity left = h->second - u->second;
      if (each > left) {
        out.push_back(refusal(
            kQuota, fmt::format("quota {} allows {} {}, {} in use, each pod of this job asks for {}; "
                                "the API server would refuse {}",
                                name, h->second.to_string(), key, u->second.to_string(), each.to_string(),
                                claim_keys.contains(key) ? "the ResourceClaims of its pods, which then wait in Pending"
                                                         : "its pods")));
      } else if (pods > 1 && times(each, pods) > left) {
        out.push_back(
            refusal(kQuota, fmt::format("quota {} allows {} {}, {} in use, the job's {} pods ask for {} each ({}): "
                                        "only {} of them would be admitted",
                                        name, h->second.to_string(), key, u->second.to_string(), pods, each.to_string(),
                                        times(each, pods).to_string(), how_many_fit(left, each))));
      }
    }
  }
  return out;
}

std::vector<PreflightFinding> check_limit_range(const PreflightInput& input) {
  std::vector<PreflightFinding> out;
  const std::string ns = job_namespace(input.job);
  const json& spec = pod_spec(input.job);
  const ResourceList pod_total = kube::pod_requests(pod_template(input.job));
  for (const auto& lr : input.limit_ranges) {
    const std::string name = object_name(lr, ns);
    const json& items = field(field(lr, "spec"), "limits");
    if (!items.is_array()) continue;
    for (const auto& raw : items) {
      const LimitItem item = read_limit_item(raw);
      if (item.gpu_resources.empty()) continue;
      if (item.type == "Container") {
        check_containers(item, spec, name, out);
      } else if (item.type == "Pod") {
        check_pod(item, pod_total, name, out);
      }
    }
  }
  return out;
}

}  // namespace gpuctl::ops
