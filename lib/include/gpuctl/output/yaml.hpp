#pragma once
// JSON values rendered as YAML (block style, keys in their JSON order), for -o yaml.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuctl::output {
// Strings that YAML would read as another type ("true", "1.5", "null", "") are quoted, so a
// YAML reader gets back exactly the JSON value. Objects and arrays nested deeper than
// util::kMaxNestingDepth (200) are written as the string
// "<nested deeper than 200 levels: not shown>" instead of recursing further.
std::string to_yaml(const nlohmann::json& value);

// Whether a YAML 1.1/1.2 reader would take this plain scalar for something other than a string
// (null, a boolean, a number, a base-60 number, a timestamp). One linear pass.
bool yaml_needs_quotes(std::string_view s);
}  // namespace gpuctl::output
