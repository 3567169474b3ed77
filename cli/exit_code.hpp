#pragma once
// gpuctl's exit-code contract, documented in README.md. Codes are chosen only here and in
// run_cli; commands return an ExitCode or an Error.
#include "gpuctl/error.hpp"

namespace gpuctl::cli {

enum class ExitCode : int {
  ok = 0,       // success
  failure = 1,  // talking to the cluster or carrying out the operation failed (also: partly)
  usage = 2,    // bad flags or arguments, invalid specs or manifests
};

// invalid_argument is the user's input (2); everything else is a failure to carry out (1).
ExitCode exit_code_for(const Error& error);

}  // namespace gpuctl::cli
