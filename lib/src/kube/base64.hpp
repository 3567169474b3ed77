#pragma once
// Base64 (RFC 4648, standard alphabet, padded), for basic auth and *-data kubeconfig fields.
#include <optional>
#include <string>
#include <string_view>

namespace gpuctl::kube {
std::string base64_encode(std::string_view data);
// Returns nullopt on characters outside the alphabet; whitespace is ignored.
std::optional<std::string> base64_decode(std::string_view text);
}  // namespace gpuctl::kube
