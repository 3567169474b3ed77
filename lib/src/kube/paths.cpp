#include "gpuctl/kube/paths.hpp"

#include "gpuctl/kube/client.hpp"

namespace gpuctl::kube::paths {
namespace {
std::string seg(std::string_view s) { return percent_encode(s); }
std::string core(std::string_view ns, std::string_view plural) {
  if (ns.empty()) return "/api/v1/" + std::string(plural);
  return "/api/v1/namespaces/" + seg(ns) + "/" + std::string(plural);
}
std::string group(std::string_view group_version, std::string_view ns, std::string_view plural) {
  if (ns.empty()) return "/apis/" + std::string(group_version) + "/" + std::string(plural);
  return "/apis/" + std::string(group_version) + "/namespaces/" + seg(ns) + "/" + std::string(plural);
}
}  // namespace

std::string nodes() { return "/api/v1/nodes"; }
std::string node(std::string_view name) { return nodes() + "/" + seg(name); }
std::string node_status(std::string_view name) { return node(name) + "/status"; }
std::string namespaces() { return "/api/v1/namespaces"; }
std::string namespace_(std::string_view name) { return namespaces() + "/" + seg(name); }
std::string pods(std::string_view ns) { return core(ns, "pods"); }
std::string pod(std::string_view ns, std::string_view name) { return core(ns, "pods") + "/" + seg(name); }
std::string pod_eviction(std::string_view ns, std::string_view name) { return pod(ns, name) + "/eviction"; }
std::string pod_log(std::string_view ns, std::string_view name) { return pod(ns, name) + "/log"; }
std::string jobs(std::string_view ns) { return group("batch/v1", ns, "jobs"); }
std::string job(std::string_view ns, std::string_view name) { return jobs(ns) + "/" + seg(name); }
std::string resource_quotas(std::string_view ns) { return core(ns, "resourcequotas"); }
std::string resource_quota(std::string_view ns, std::string_view name) { return core(ns, "resourcequotas") + "/" + seg(name); }
std::string limit_ranges(std::string_view ns) { return core(ns, "limitranges"); }
std::string limit_range(std::string_view ns, std::string_view name) { return core(ns, "limitranges") + "/" + seg(name); }
std::string pod_disruption_budgets(std::string_view ns) { return group("policy/v1", ns, "poddisruptionbudgets"); }
std::string persistent_volume_claims(std::string_view ns) { return core(ns, "persistentvolumeclaims"); }
std::string storage_classes() { return "/apis/storage.k8s.io/v1/storageclasses"; }
std::string storage_class(std::string_view name) { return storage_classes() + "/" + seg(name); }
std::string persistent_volume_claim(std::string_view ns, std::string_view name) {
  return core(ns, "persistentvolumeclaims") + "/" + seg(name);
}
std::string events(std::string_view ns) { return core(ns, "events"); }
std::string daemon_set(std::string_view ns, std::string_view name) { return group("apps/v1", ns, "daemonsets") + "/" + seg(name); }
std::string core_v1_discovery() { return "/api/v1"; }

}  // namespace gpuctl::kube::paths
