#pragma once
// Manifests from files (`-f job.yaml`): YAML or JSON text read into the JSON value the API server
// would decode, with scalars typed as sigs.k8s.io/yaml types them (plain `8` is a number,
// `true` a boolean, `"8"` a string), so what gpuctl checks is what the server would see.
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

// Exactly one document (a leading `---` is fine; an empty file or a second document is an
// invalid_argument error naming `source` and the line). Maps must have string keys.
Result<nlohmann::json> parse_manifest(std::string_view text, std::string_view source);

// Every document of a multi-document file (`---` between them; empty ones skipped), each an
// object, at most `max_documents` of them; the same typing and limits as parse_manifest.
Result<std::vector<nlohmann::json>> parse_manifests(std::string_view text, std::string_view source,
                                                    int max_documents);

}  // namespace gpuctl::kube
