#pragma once
// The -o/--output flag shared by listing commands, and structured (JSON/YAML) rendering.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::cli {

enum class OutputFormat { table, wide, json, yaml, name };

// Adds -o/--output with the given choices (the first is the default) bound to `text`.
CLI::Option* add_output_flag(CLI::App& app, std::string& text, const std::vector<std::string>& choices);
Result<OutputFormat> parse_output_format(const std::string& text);
// JSON (indented, newline-terminated) or YAML.
std::string render_structured(const nlohmann::json& value, OutputFormat format);

}  // namespace gpuctl::cli
