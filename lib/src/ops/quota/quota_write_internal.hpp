#pragma once
// Helpers shared by the quota_write*.cpp files (quota set, fix and delete); not part of the
// library's interface.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::quota_write_detail {

// Reads and writes of one object before a run of 409 Conflicts is given up.
inline constexpr int kMaxAttempts = 5;
// The prefix of the quota keys Kubernetes enforces for extended resources.
inline const std::string kRequests = "requests.";

// A quantity as written: the string itself, anything else as JSON.
std::string qstr(const nlohmann::json& v);

// The object as it may be sent back: no status, no managedFields.
nlohmann::json writable(nlohmann::json object);

std::string lowercase(std::string s);

// The REST path of a LimitRange or (any other kind) ResourceQuota; the collection when `name` is
// empty.
std::string path_of(std::string_view kind, std::string_view ns, std::string_view name);

// The object, or nullopt when it does not exist.
Result<std::optional<nlohmann::json>> get_optional(kube::Client& client, const std::string& path);

}  // namespace gpuctl::ops::quota_write_detail
