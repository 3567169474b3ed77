#pragma once
// The -o/--output flag shared by listing commands, and structured (JSON/YAML) rendering.
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "command_doc.hpp"
#include "gpuctl/error.hpp"

namespace gpuctl::cli {

enum class OutputFormat { table, wide, json, yaml, name };

// Adds -o/--output with the given choices (the first is the default) bound to `text`.
CLI::Option* add_output_flag(CLI::App& app, HelpData& help, std::string& text, const std::vector<std::string>& choices);
Result<OutputFormat> parse_output_format(const std::string& text);
// For commands whose -o is text|json|yaml: nullopt for text (or none given), else the format.
Result<std::optional<OutputFormat>> structured_output_format(const std::string& text);
// JSON (indented, newline-terminated) or YAML.
std::string render_structured(const nlohmann::json& value, OutputFormat format);
// One line of human output: `line` with its control characters escaped (output::printable, so
// text from the cluster cannot drive the terminal or forge lines), then a newline.
void print_line(std::ostream& out, std::string_view line);

}  // namespace gpuctl::cli
