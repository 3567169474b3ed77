#pragma once
// What gpuctl says when a command line is wrong, and how its help is laid out: "did you mean"
// for a mistyped command or flag, the missing argument by its description, usage lines that name
// the whole command, flags with optional values shown as --dry-run[=MODE].
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace gpuctl::cli {

// CLI11 wraps its messages over several lines; gpuctl prints one line.
std::string one_line(std::string text);

// The innermost command the parsed line selected ("clean" of `gpuctl jobs clean`), or the root.
CLI::App* selected_command(CLI::App& root);

// "gpuctl jobs clean": the names from the root down to `app`.
std::string command_path(const CLI::App* app);

// The one-line message for a parse error of `target` (the innermost subcommand given), e.g.
// "unknown command \"nodse\" for \"gpuctl\"; did you mean \"nodes\"?".
std::string usage_error_message(const CLI::App& target, const CLI::ParseError& error);

// CLI11's help with gpuctl's option names: "--dry-run[=MODE]" instead of "--dry-run{client}".
std::shared_ptr<CLI::Formatter> help_formatter();

}  // namespace gpuctl::cli
