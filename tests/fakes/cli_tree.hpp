#pragma once
// gpuctl's command tree as run_cli builds it, with its help record, for tests that read the tree
// (help, man pages, completion) without running a command.
#include <sstream>

#include "app.hpp"

namespace gpuctl::testing {

struct CliTree {
  std::ostringstream out, err;
  cli::AppContext context{cli::Streams{out, err}, cli::Environment{}};
  CLI::App app{"gpuctl", "gpuctl"};
  bool version = false;
  CliTree() { cli::configure_app(app, context, version); }
};

}  // namespace gpuctl::testing
