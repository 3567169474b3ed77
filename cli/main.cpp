// gpuctl's entry point: process-wide setup, then run_cli. The one top-level catch is here.
#include <unistd.h>

#include <csignal>
#include <exception>
#include <iostream>

#include "app.hpp"
#include "exit_code.hpp"
#include "gpuctl/util/cancel.hpp"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe is a write error, not a silent death
  // Ctrl-C and SIGTERM stop the work cleanly (children stopped, the summary printed, exit 130 or
  // 143); a second one exits at once.
  gpuctl::util::install_interrupt_handlers(
      "\ngpuctl: interrupted: stopping cleanly (interrupt again to quit at once)\n");
  int code = 1;
  try {
    gpuctl::cli::Streams streams{std::cout, std::cerr, isatty(STDOUT_FILENO) == 1, isatty(STDERR_FILENO) == 1,
                                 isatty(STDIN_FILENO) == 1};
    code = gpuctl::cli::run_cli(argc, argv, streams, gpuctl::cli::default_environment());
  } catch (const std::exception& e) {
    std::cerr << "error: internal error: " << e.what() << " (please report this)\n";
    code = 1;
  }
  std::cout.flush();
  return gpuctl::cli::settle_exit_code(code);
}
