#pragma once
// Flags several commands share, spelled as kubectl spells them.
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"
#include "gpuctl/error.hpp"
#include "gpuctl/ops/common/dry_run.hpp"

namespace gpuctl::cli {

using ops::DryRun;  // one dry-run type, from lib

// The error of a flag or argument the user got wrong (exit 2), with the fix in `message`.
inline Error usage(std::string message) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = std::move(message);
  return e;
}

// --dry-run[=none|client|server]; a bare --dry-run means client, as in kubectl.
// client: print what would be sent, send nothing. server: send with dryRun=All, persist nothing.
CLI::Option* add_dry_run_flag(CLI::App& app, HelpData& help, std::string& text);
Result<DryRun> parse_dry_run(const std::string& text);
// " (dry run)", " (server dry run)" or "", after what a command did or would do.
std::string_view dry_run_suffix(DryRun dry_run);

// -l/--selector for label selectors on the objects the command selects.
CLI::Option* add_selector_flag(CLI::App& app, HelpData& help, std::string& text, const std::string& what = "nodes");

}  // namespace gpuctl::cli
