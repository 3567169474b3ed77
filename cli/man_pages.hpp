#pragma once
// The man pages, generated from the command tree itself (the same descriptions, flags and
// examples --help prints, from command_doc.hpp's record), so the two cannot disagree: gpuctl(1) and one page per
// command (gpuctl-drain(1), gpuctl-jobs-clean(1)). Written by the hidden `gpuctl __man DIR` at build time.
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"

namespace gpuctl::cli {

// (file name, roff text) for the root and every visible command under it, recursively.
std::vector<std::pair<std::string, std::string>> man_pages(const CLI::App& root, const HelpData& help);

// Registers the hidden `__man DIR`, which writes man_pages(root) into DIR.
void register_man(CLI::App& root, class AppContext& context);

}  // namespace gpuctl::cli
