// Kernel logs (dmesg in its formats, journalctl -k, /dev/kmsg): NVIDIA Xid and bus events, the
// Xid/SXid reader and its classifier.
// Invariant: the events serialize for -o json, their line numbers lie inside the text, and every
// event lands in exactly one verdict.
#include <algorithm>

#include "fuzz_support.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"
#include "gpuctl/gpu/xid.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (const auto& event : gpuctl::gpu::parse_kernel_gpu_events(text)) {
    GPUCTL_FUZZ_CHECK(event.line_number >= 1 && event.line_number <= lines, event.message);
    gpuctl::fuzz::dump_checked(nlohmann::json(event), "kernel event");
  }
  auto events = gpuctl::gpu::parse_kernel_log(text);
  for (const auto& event : events) {
    GPUCTL_FUZZ_CHECK(event.line_number >= 1 && event.line_number <= lines, event.line);
    gpuctl::fuzz::dump_checked(nlohmann::json(event), "kernel log event");
  }
  std::size_t counted = 0;
  for (const auto& verdict : gpuctl::gpu::classify_xid_events(events)) {
    for (const auto& c : verdict.counts) counted += static_cast<std::size_t>(c.count);
    gpuctl::fuzz::dump_checked(nlohmann::json(verdict), "xid verdict");
  }
  GPUCTL_FUZZ_CHECK(counted <= events.size(), "a verdict counted more events than were read");
  return 0;
}
