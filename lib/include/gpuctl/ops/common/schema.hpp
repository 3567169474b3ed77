#pragma once
// The envelope of every `-o json|yaml` document gpuctl prints: its own API group and version, a
// kind, then the kind's fields (usually `items`). Scripts key on these two fields.
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuctl::ops {

inline constexpr std::string_view kSchemaApiVersion = "gpuctl.io/v1alpha1";

// `fields` (an object) with "apiVersion": "gpuctl.io/v1alpha1" and "kind": KIND added.
nlohmann::json schema_document(std::string_view kind, nlohmann::json fields);

}  // namespace gpuctl::ops
