#pragma once
// Helpers shared by the submit_preflight*.cpp files; not part of the library's interface.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "gpuctl/util/strings.hpp"

namespace gpuctl::ops::preflight_detail {

using kube::field;
using kube::string_field;
using util::join;

// job.spec.template (with metadata and spec) and job.spec.template.spec.
const nlohmann::json& pod_template(const nlohmann::json& job);
const nlohmann::json& pod_spec(const nlohmann::json& job);
// metadata.namespace of the job, "default" when unset.
std::string job_namespace(const nlohmann::json& job);

// How many of the job's pods run at once: min(parallelism (default 1), completions when set);
// 0 when `honour_suspend` and the job is suspended.
std::int64_t concurrent_pods(const nlohmann::json& job, bool honour_suspend);

// Whether the job's pods keep off each other's nodes: a required pod anti-affinity term on the
// hostname whose selector matches the pods' own labels (the template's and the Job controller's
// job-name), as `submit --nodes` writes it. Its pods then need as many nodes as run at once.
bool one_pod_per_node(const nlohmann::json& job);

// The per-pod nvidia.com/* requests of the template (kube::pod_requests), nvidia.com/gpu first,
// then by name; zero requests left out.
std::vector<std::pair<std::string, std::int64_t>> nvidia_requests(const nlohmann::json& job);

// "8 GPUs", "1 GPU", "2 nvidia.com/mig-1g.10gb".
std::string amount(std::int64_t n, std::string_view resource);
// "3 nodes", "1 node".
std::string count_of(std::int64_t n, std::string_view singular, std::string_view plural);

PreflightFinding refusal(std::string_view check, std::string message);
PreflightFinding warning(std::string_view check, std::string message);

// Whether a ResourceQuota counts a pod of this spec (its scopes and scopeSelector): unknown where
// a scope cannot be judged here (a PriorityClass scope for a pod without a class, say).
enum class Applies { yes, no, unknown };
Applies quota_applies(const nlohmann::json& quota, const nlohmann::json& pod_spec);
// An extended resource's name (a domain, not kubernetes.io/, not already a quota key).
bool is_extended(const std::string& resource);
// The quota keys a pod's request of `resource` is counted under ("cpu" and "requests.cpu", ...).
std::vector<std::string> quota_keys(const std::string& resource);

}  // namespace gpuctl::ops::preflight_detail

namespace gpuctl::ops {
// The quota keys the claim of a pod of a job claiming DRA devices is counted under, with the
// amount per pod (<class>.deviceclass.resource.k8s.io/devices: the claim's count;
// count/resourceclaims: 1; requests.<extendedResourceName> of the class, when it has one: the
// count); none without a claim template.
std::vector<std::pair<std::string, kube::Quantity>> device_quota_keys(const PreflightInput& input);
}  // namespace gpuctl::ops
