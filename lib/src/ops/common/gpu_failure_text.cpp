// The GPU failure texts (gpu_failure_text.hpp). Each row: every needle must occur (case-sensitive,
// as the programs print them); the first matching row wins, so specific rows come first.
#include "gpuctl/ops/common/gpu_failure_text.hpp"

#include <algorithm>
#include <initializer_list>

namespace gpuctl::ops {
namespace {

struct Pattern {
  std::initializer_list<std::string_view> needles;
  TextClass what;
};

constexpr std::string_view kMismatchCause =
    "the NVIDIA kernel module and user-space library differ (driver upgraded, node not rebooted)";
constexpr std::string_view kOomHint = "lower the batch size or use a GPU with more memory";
constexpr std::string_view kNcclHint = "check the GPUs' NVLink/network and peers";

// "Xid 79", "Xid (PCI:0000:3b:00): 79": the word, then a number within a few characters.
bool mentions_xid(std::string_view text) {
  for (auto at = text.find("Xid"); at != std::string_view::npos; at = text.find("Xid", at + 3)) {
    std::string_view rest = text.substr(at + 3, 24);
    if (std::any_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  }
  return false;
}

std::optional<TextClass> first_match(std::string_view t, std::initializer_list<Pattern> table) {
  for (const auto& p : table) {
    if (std::all_of(p.needles.begin(), p.needles.end(),
                    [&](std::string_view n) { return t.find(n) != std::string_view::npos; }))
      return p.what;
  }
  return std::nullopt;
}

}  // namespace

std::optional<TextClass> classify_gpu_failure(std::string_view t) {
  auto found = first_match(
      t, {
             {{"CUDA driver version is insufficient for CUDA runtime version"},
              {"driver-too-old", "the node's driver is older than the container's CUDA runtime needs",
               "use an image built for the node's CUDA version, or upgrade the driver"}},
             {{"Driver/library version mismatch"},
              {"driver-library-mismatch", kMismatchCause, "drain and reboot the node"}},
             {{"driver/library version mismatch"},
              {"driver-library-mismatch", kMismatchCause, "drain and reboot the node"}},
             {{"GPU is lost"}, {"gpu-lost", "a GPU fell off the bus while the job ran", "the node needs a reboot"}},
             {{"nvml error: unknown error"},
              {"nvml-error", "NVML answered Unknown Error: the GPU or its driver is in a bad state",
               "drain the node and check its GPUs (gpuctl gpus NODE)"}},
             {{"NVML", "Unknown Error"},
              {"nvml-error", "NVML answered Unknown Error: the GPU or its driver is in a bad state",
               "drain the node and check its GPUs (gpuctl gpus NODE)"}},
             {{"no CUDA-capable device is detected"},
              {"no-cuda-device", "the container sees no GPU", "check the pod's GPU request and the container runtime"}},
             {{"CUDA out of memory"}, {"cuda-oom", "the job ran out of GPU memory", kOomHint}},
             {{"out of memory", "CUDA"}, {"cuda-oom", "the job ran out of GPU memory", kOomHint}},
             {{"Watchdog caught collective operation timeout"},
              {"nccl-timeout", "a NCCL collective timed out: a peer rank stalled or died", kNcclHint}},
             {{"NCCL", "timeout"},
              {"nccl-timeout", "a NCCL collective timed out: a peer rank stalled or died", kNcclHint}},
             {{"NCCL", "unhandled system error"},
              {"nccl-system-error", "NCCL hit a system error (network or InfiniBand, shared memory, GPU peer access)",
               kNcclHint}},
             {{"NCCL error"}, {"nccl-error", "NCCL (multi-GPU communication) failed", kNcclHint}},
             {{"NCCL WARN"}, {"nccl-error", "NCCL (multi-GPU communication) reported a failure", kNcclHint}},
         });
  if (found) return found;
  if (mentions_xid(t)) {
    return TextClass{"xid", "the GPU reported an Xid error (a fault the driver logged)",
                     "gpuctl diagnose --check xid-errors on the node"};
  }
  return std::nullopt;
}

}  // namespace gpuctl::ops
