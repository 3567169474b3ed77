#include "gpuctl/kube/paths.hpp"

#include "gpuctl/kube/client.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gpuctl::kube::paths {
namespace {
bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
// One dot-separated part of a DNS-1123 subdomain: Kubernetes bounds only the whole name (253),
// not its parts.
bool is_subdomain_part(std::string_view s) {
  return !s.empty() && is_lower_alnum(s.front()) && is_lower_alnum(s.back()) &&
         std::all_of(s.begin(), s.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
}
bool is_label(std::string_view s) { return s.size() <= 63 && is_subdomain_part(s); }
std::string percent_decoded(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}
std::string seg(std::string_view s) { return percent_encode(s); }
std::string core(std::string_view ns, std::string_view plural) {
  if (ns.empty()) return "/api/v1/" + std::string(plural);
  return "/api/v1/namespaces/" + seg(ns) + "/" + std::string(plural);
}
// One object in a namespace: the namespace segment is always there, so an empty namespace
// becomes an empty segment (refused by the client) instead of a cluster-wide path.
std::string core_object(std::string_view ns, std::string_view plural, std::string_view name) {
  return "/api/v1/namespaces/" + seg(ns) + "/" + std::string(plural) + "/" + seg(name);
}
std::string group_object(std::string_view group_version, std::string_view ns, std::string_view plural,
                         std::string_view name) {
  return "/apis/" + std::string(group_version) + "/namespaces/" + seg(ns) + "/" + std::string(plural) + "/" + seg(name);
}
std::string group(std::string_view group_version, std::string_view ns, std::string_view plural) {
  if (ns.empty()) return "/apis/" + std::string(group_version) + "/" + std::string(plural);
  return "/apis/" + std::string(group_version) + "/namespaces/" + seg(ns) + "/" + std::string(plural);
}
}  // namespace

std::string dns_label_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 63) return fmt::format("must be no more than 63 characters (has {})", name.size());
  if (!is_label(name)) {
    return "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
           "character";
  }
  return {};
}

std::string dns_subdomain_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 253) return fmt::format("must be no more than 253 characters (has {})", name.size());
  for (std::size_t start = 0;;) {
    auto dot = name.find('.', start);
    auto part = name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!is_subdomain_part(part)) {
      return "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
             "alphanumeric character";
    }
    if (dot == std::string_view::npos) return {};
    start = dot + 1;
  }
}

std::string unsafe_path_problem(std::string_view path) {
  if (!path.starts_with('/')) return "does not start with '/'";
  for (std::size_t start = 1;;) {
    auto slash = path.find('/', start);
    auto segment =
        percent_decoded(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (segment.empty()) return "has an empty segment (an empty name)";
    if (segment == "." || segment == "..") return fmt::format("has a \"{}\" segment", segment);
    if (segment.find('/') != std::string::npos) return "has a segment with an encoded '/'";
    if (slash == std::string_view::npos) return {};
    start = slash + 1;
  }
}

std::string nodes() { return "/api/v1/nodes"; }
std::string node(std::string_view name) { return nodes() + "/" + seg(name); }
std::string namespaces() { return "/api/v1/namespaces"; }
std::string pods(std::string_view ns) { return core(ns, "pods"); }
std::string pod(std::string_view ns, std::string_view name) { return core_object(ns, "pods", name); }
std::string pod_eviction(std::string_view ns, std::string_view name) { return pod(ns, name) + "/eviction"; }
std::string pod_log(std::string_view ns, std::string_view name) { return pod(ns, name) + "/log"; }
std::string jobs(std::string_view ns) { return group("batch/v1", ns, "jobs"); }
std::string job(std::string_view ns, std::string_view name) { return group_object("batch/v1", ns, "jobs", name); }
std::string resource_quotas(std::string_view ns) { return core(ns, "resourcequotas"); }
std::string resource_quota(std::string_view ns, std::string_view name) {
  return core_object(ns, "resourcequotas", name);
}
std::string limit_ranges(std::string_view ns) { return core(ns, "limitranges"); }
std::string limit_range(std::string_view ns, std::string_view name) { return core_object(ns, "limitranges", name); }
std::string pod_disruption_budgets(std::string_view ns) { return group("policy/v1", ns, "poddisruptionbudgets"); }
std::string persistent_volume_claims(std::string_view ns) { return core(ns, "persistentvolumeclaims"); }
std::string persistent_volumes() { return "/api/v1/persistentvolumes"; }
std::string storage_classes() { return "/apis/storage.k8s.io/v1/storageclasses"; }
std::string storage_class(std::string_view name) { return storage_classes() + "/" + seg(name); }
std::string persistent_volume_claim(std::string_view ns, std::string_view name) {
  return core_object(ns, "persistentvolumeclaims", name);
}
std::string events(std::string_view ns) { return core(ns, "events"); }
std::string daemon_sets(std::string_view ns) { return group("apps/v1", ns, "daemonsets"); }
std::string daemon_set(std::string_view ns, std::string_view name) {
  return group_object("apps/v1", ns, "daemonsets", name);
}
std::string core_v1_discovery() { return "/api/v1"; }

std::string resources(std::string_view group_version, std::string_view plural, bool namespaced, std::string_view ns) {
  if (!namespaced) ns = {};
  return group_version == "v1" ? core(ns, plural) : group(group_version, ns, plural);
}
std::string resource(std::string_view group_version, std::string_view plural, bool namespaced, std::string_view ns,
                     std::string_view name) {
  if (!namespaced) return resources(group_version, plural, false) + "/" + seg(name);
  return group_version == "v1" ? core_object(ns, plural, name) : group_object(group_version, ns, plural, name);
}
std::string group_discovery(std::string_view group) { return "/apis/" + seg(group); }
std::string group_version_discovery(std::string_view group_version) {
  return group_version == "v1" ? core_v1_discovery() : "/apis/" + std::string(group_version);
}

}  // namespace gpuctl::kube::paths
