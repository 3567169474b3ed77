// Kernel logs (dmesg in its formats, journalctl -k, /dev/kmsg): NVIDIA Xid and bus events.
// Invariant: the events serialize for -o json and their line numbers lie inside the text.
#include <algorithm>

#include "fuzz_support.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (const auto& event : gpuctl::gpu::parse_kernel_gpu_events(text)) {
    GPUCTL_FUZZ_CHECK(event.line_number >= 1 && event.line_number <= lines, event.message);
    gpuctl::fuzz::dump_checked(nlohmann::json(event), "kernel event");
  }
  return 0;
}
