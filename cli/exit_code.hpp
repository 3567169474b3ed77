#pragma once
// gpuctl's exit-code contract, documented in README.md and man/gpuctl.1. Chosen only in main.
namespace gpuctl::cli {
enum class ExitCode : int {
  ok = 0,            // success
  failure = 1,       // talking to the cluster or carrying out the operation failed
  usage = 2,         // bad flags or arguments, invalid specs or manifests
};
}  // namespace gpuctl::cli
