#pragma once
// Manifests from files (`-f job.yaml`): YAML or JSON text read into the JSON value the API server
// would decode, with scalars typed as sigs.k8s.io/yaml types them (plain `8` is a number,
// `true` a boolean, `"8"` a string), so what gpuctl checks is what the server would see.
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

// Exactly one document (a leading `---` is fine; an empty file or a second document is an
// invalid_argument error naming `source` and the line). Maps must have string keys.
Result<nlohmann::json> parse_manifest(std::string_view text, std::string_view source);

}  // namespace gpuctl::kube
