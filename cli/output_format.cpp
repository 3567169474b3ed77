#include "output_format.hpp"

#include <fmt/format.h>

#include "gpuctl/output/printable.hpp"
#include "gpuctl/output/yaml.hpp"

namespace gpuctl::cli {

CLI::Option* add_output_flag(CLI::App& app, HelpData& help, std::string& text,
                             const std::vector<std::string>& choices) {
  text = choices.front();
  auto* option = app.add_option("-o,--output", text, fmt::format("Output format: {}", fmt::join(choices, "|")));
  return with_choices(option, help, choices)->default_str(choices.front());
}

Result<OutputFormat> parse_output_format(const std::string& text) {
  if (text == "table") return OutputFormat::table;
  if (text == "wide") return OutputFormat::wide;
  if (text == "json") return OutputFormat::json;
  if (text == "yaml") return OutputFormat::yaml;
  if (text == "name") return OutputFormat::name;
  return fail(Errc::invalid_argument, fmt::format("--output: unknown format \"{}\"", text));
}

Result<std::optional<OutputFormat>> structured_output_format(const std::string& text) {
  if (text.empty() || text == "text") return std::optional<OutputFormat>();
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(text));
  return std::optional<OutputFormat>(format);
}

std::string render_structured(const nlohmann::json& value, OutputFormat format) {
  if (format == OutputFormat::yaml) return output::to_yaml(value);
  return value.dump(2) + "\n";
}

void print_line(std::ostream& out, std::string_view line) { out << output::printable(line) << '\n'; }

}  // namespace gpuctl::cli
