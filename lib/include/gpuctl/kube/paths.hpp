#pragma once
// REST paths of the resources gpuctl touches. Names are percent-encoded, so a hostile name
// cannot change the path. The only place that knows the URL layout of the API.
#include <string>
#include <string_view>

namespace gpuctl::kube::paths {

// Kubernetes' name rules, the one validator for every name gpuctl puts into a path. Each
// returns what is wrong ("must ...") or "" when the name is valid.
std::string dns_label_problem(std::string_view name);      // namespaces: RFC 1123 label, 63 chars
std::string dns_subdomain_problem(std::string_view name);  // nodes, most objects: 253 chars

// What makes `path` unsafe to send: a segment that is empty, "." or ".." (also percent-encoded),
// which a URL library or proxy would resolve into another resource (`-n ..` turned a namespaced
// delete into a cluster-wide one). "" when every segment is a plain name.
std::string unsafe_path_problem(std::string_view path);

std::string nodes();
std::string node(std::string_view name);

std::string namespaces();

// Pods in every namespace when `ns` is empty.
std::string pods(std::string_view ns = {});
std::string pod(std::string_view ns, std::string_view name);
std::string pod_eviction(std::string_view ns, std::string_view name);
std::string pod_log(std::string_view ns, std::string_view name);

std::string jobs(std::string_view ns = {});
std::string job(std::string_view ns, std::string_view name);

std::string resource_quotas(std::string_view ns = {});
std::string resource_quota(std::string_view ns, std::string_view name);
std::string limit_ranges(std::string_view ns = {});
std::string limit_range(std::string_view ns, std::string_view name);
std::string pod_disruption_budgets(std::string_view ns = {});
std::string persistent_volume_claims(std::string_view ns = {});
std::string persistent_volumes();
std::string persistent_volume_claim(std::string_view ns, std::string_view name);
std::string storage_classes();
std::string storage_class(std::string_view name);
std::string events(std::string_view ns = {});
std::string daemon_sets(std::string_view ns = {});
std::string daemon_set(std::string_view ns, std::string_view name);
std::string core_v1_discovery();  // /api/v1, to find the pods/eviction subresource

// Any resource by its group/version and plural, as backup and restore read them: `group_version`
// is "v1" for the core group, "batch/v1", "resource.k8s.io/v1", ...; the collection of every
// namespace when `ns` is empty (and always for a cluster-scoped resource: `namespaced` false).
std::string resources(std::string_view group_version, std::string_view plural, bool namespaced,
                      std::string_view ns = {});
std::string resource(std::string_view group_version, std::string_view plural, bool namespaced, std::string_view ns,
                     std::string_view name);
// Discovery: "/apis/<group>" (its versions, preferred first) and "/apis/<group>/<version>" or
// "/api/v1" (the resources a version serves).
std::string group_discovery(std::string_view group);
std::string group_version_discovery(std::string_view group_version);

}  // namespace gpuctl::kube::paths
