#pragma once
// JSON values rendered as YAML (block style, keys in their JSON order), for -o yaml.
#include <string>

#include <nlohmann/json.hpp>

namespace gpuctl::output {
// Strings that YAML would read as another type ("true", "1.5", "null", "") are quoted, so a
// YAML reader gets back exactly the JSON value.
std::string to_yaml(const nlohmann::json& value);
}  // namespace gpuctl::output
