#pragma once
// Private helpers shared by the client's files (lib/src/kube/client*.cpp only).
#include <string>
#include <string_view>

namespace gpuctl::kube::detail {

// Runs of whitespace as one space, none at the ends: a plain-text answer on one line.
std::string collapse_whitespace(std::string_view s);
// The path of a URL, without scheme, host and query ("/api/v1/nodes"): what messages name.
std::string path_of(std::string_view url);

}  // namespace gpuctl::kube::detail
