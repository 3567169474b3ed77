#pragma once
// What a GPU program's failure text says about the GPU: CUDA, NVML, NCCL and driver messages as
// the programs print them (tests/fixtures/k8s-errors holds real samples), the cause an admin reads
// and what to do. Shared by `jobs` (a failed job's REASON) and diagnose (gpu-job-failed, pods).
// Pure: no I/O.
#include <optional>
#include <string_view>

namespace gpuctl::ops {

struct TextClass {
  std::string_view id;     // stable, e.g. "cuda-oom", "nccl-timeout"
  std::string_view cause;  // what it means, one clause
  std::string_view hint;   // what to do, one clause ("" when the remedy commands say it)
};

// A termination message or log line of a GPU container: CUDA out of memory, no CUDA device,
// driver too old for the CUDA runtime, NVML errors (driver/library mismatch, Unknown Error), NCCL
// errors, timeouts and system errors, a GPU lost, an Xid the line mentions. std::nullopt: nothing
// about the GPU.
std::optional<TextClass> classify_gpu_failure(std::string_view text);

}  // namespace gpuctl::ops
