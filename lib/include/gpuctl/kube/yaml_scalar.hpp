#pragma once
// How gpuctl types plain (unquoted) YAML scalars, with linear scanners: no std::regex, whose
// backtracking recurses once per character and overflows the stack on a long string. Each
// function gives exactly what the regular expression in its comment would.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuctl::kube {

// [-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?   (with_underscores)
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?          (without)
// The YAML 1.1 float syntax (an integer is one too).
bool is_yaml_float_syntax(std::string_view s, bool with_underscores);

// A plain scalar of a manifest as sigs.k8s.io/yaml (go-yaml v2) types it: the YAML 1.2 core
// schema plus the YAML 1.1 booleans (yes/no/on/off/y/n), integers with '_', 0x hex and 0o/0
// octal; a number that does not fit stays a string.
nlohmann::json manifest_plain_scalar(const std::string& s);

// A plain scalar of a kubeconfig as gpuctl's kubeconfig reader types it (null, the YAML 1.1
// booleans, [-+]?[0-9]+ integers, floats); anything else is the string.
nlohmann::json kubeconfig_plain_scalar(const std::string& s);

}  // namespace gpuctl::kube
