#pragma once
// API discovery: which version of a group serves a resource, for the kinds only some clusters
// serve (DRA, Kueue, KAI, the GPU Operator) or serve under a version that changes between
// releases (DeviceTaintRule: v1alpha3 in 1.33-1.35, v1beta2 in 1.36).
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

class Client;

// The first version of `group` (the server's preferred one first) that serves `resource` (its
// plural, e.g. "devicetaintrules"); "" when the group or the resource is not served. Other
// errors (403, 5xx, transport) are returned.
Result<std::string> served_version(Client& client, std::string_view group, std::string_view resource);

// Whether `group_version` ("jobset.x-k8s.io/v1alpha2") serves `resource` (its plural); false when
// the group, the version or the resource is not served. Other errors are returned.
Result<bool> serves(Client& client, std::string_view group_version, std::string_view resource);

}  // namespace gpuctl::kube
