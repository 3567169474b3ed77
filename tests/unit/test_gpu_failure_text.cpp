// classify_gpu_failure: what a GPU container's last words say about the GPU. The texts are the
// ones the programs print: CUDA's runtime errors, PyTorch's ProcessGroupNCCL messages, NVML's and
// nvidia-container-cli's (tests/fixtures/k8s-errors), the driver's Xid lines.
#include <catch2/catch.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/ops/common/gpu_failure_text.hpp"

using gpuctl::ops::classify_gpu_failure;

namespace {

std::string id_of(std::string_view text) {
  auto c = classify_gpu_failure(text);
  return c ? std::string(c->id) : std::string("-");
}

}  // namespace

TEST_CASE("gpu failure text: CUDA, NVML, NCCL and Xid messages, the specific before the generic", "[gpu-failure]") {
  CHECK(id_of("RuntimeError: CUDA error: out of memory") == "cuda-oom");
  CHECK(id_of("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") == "cuda-oom");
  CHECK(id_of("RuntimeError: CUDA error: no CUDA-capable device is detected") == "no-cuda-device");
  CHECK(id_of("CUDA driver version is insufficient for CUDA runtime version") == "driver-too-old");
  CHECK(id_of("Failed to initialize NVML: Driver/library version mismatch") == "driver-library-mismatch");
  CHECK(id_of("Failed to initialize NVML: Unknown Error") == "nvml-error");
  CHECK(id_of("Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system") ==
        "gpu-lost");
  CHECK(id_of("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
              "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600327 milliseconds before timing out.") ==
        "nccl-timeout");
  CHECK(id_of("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
              "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL "
              "version 2.19.3") == "nccl-system-error");
  CHECK(id_of("NCCL error in: ProcessGroupNCCL.cpp:1269, internal error, NCCL version 2.14.3") == "nccl-error");
  CHECK(id_of("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.") == "xid");
  // What says nothing about the GPU.
  CHECK(id_of("KeyError: 'learning_rate'") == "-");
  CHECK(id_of("Xidian University dataset not found") == "-");
  CHECK(id_of("") == "-");
}

TEST_CASE("gpu failure text: nvidia-container-cli's NVML unknown error, as gpud recorded it", "[gpu-failure]") {
  std::string text = gpuctl::testing::fixture("k8s-errors/gpud__gfd-container-start-nvml-unknown-error.log");
  REQUIRE_FALSE(text.empty());
  CHECK(id_of(text) == "nvml-error");
}
