#pragma once
// gpuctl's config file applied to the command line that was parsed: each setting the file gives
// (config::setting_specs) is fed into the selected command's flag, through the flag's own
// conversion and checks, only where neither the flag nor its environment variable was given.
#include <CLI/CLI.hpp>

#include "app.hpp"
#include "gpuctl/error.hpp"

namespace gpuctl::cli {

// Reads the file (when there is one), resolves every setting (context.user_config, which
// `config view` shows) and feeds the file's values into the selected command's flags. A bad
// file or value is one Errc::config error "FILE: KEY: why" (exit 1, as a bad kubeconfig), before
// any request. Hidden commands (__man) are left alone.
Result<void> apply_user_config(CLI::App& app, AppContext& context);

}  // namespace gpuctl::cli
