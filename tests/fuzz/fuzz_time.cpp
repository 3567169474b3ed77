// Durations from flags (--timeout, --older-than) and RFC 3339 times from API objects.
// Invariants: a parsed time formats to text that parses back to the same second; ages of any
// duration format without overflow.
#include <chrono>

#include "fuzz_support.hpp"
#include "gpuctl/util/time.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace std::chrono;
  auto text = gpuctl::fuzz::as_text(data, size);
  if (auto duration = gpuctl::util::parse_duration(text)) {
    GPUCTL_FUZZ_CHECK(duration->count() >= 0, text);
    (void)gpuctl::util::human_duration(duration_cast<seconds>(*duration));
  }
  if (auto time = gpuctl::util::parse_rfc3339(text)) {
    std::string written = gpuctl::util::format_rfc3339(*time);
    auto again = gpuctl::util::parse_rfc3339(written);
    GPUCTL_FUZZ_CHECK(again.has_value(), written);
    GPUCTL_FUZZ_CHECK(floor<seconds>(*again) == floor<seconds>(*time), written);
    (void)gpuctl::util::human_duration(duration_cast<seconds>(system_clock::time_point{} - *time));
  }
  return 0;
}
