#pragma once
// Private text helpers shared by the nvidia-smi parsers (lib/src/gpu only).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/gpu/gpu_info.hpp"

namespace gpuctl::gpu::detail {

std::string_view trim(std::string_view s);
// Lines without their terminators; "\r\n" and "\n" both end a line. A final empty line after a
// trailing newline is not returned.
std::vector<std::string_view> split_lines(std::string_view s);
std::string to_lower(std::string_view s);
// Case-insensitive search; npos when absent.
std::size_t ifind(std::string_view haystack, std::string_view needle, std::size_t from = 0);
inline bool icontains(std::string_view haystack, std::string_view needle) {
  return ifind(haystack, needle) != std::string_view::npos;
}
bool iequals(std::string_view a, std::string_view b);
// "FB Memory Usage" -> "fb_memory_usage", "GPU T.Limit Temp" -> "gpu_t_limit_temp".
std::string snake_key(std::string_view label);
// The first PCI bus id in `text` ("0000:0b:00.0", "00000000:0B:00.0", "PCI:0000:38:00"), canonical.
std::optional<std::string> find_pci_bus_id(std::string_view text);
// Valid UTF-8 (invalid bytes become '?') without control characters other than '\n' and '\t'.
std::string sanitize(std::string_view s);
// The text on one line, whitespace runs collapsed, cut at `max` bytes with "...".
std::string one_line(std::string_view s, std::size_t max = 200);
// Up to `max_lines` lines around line `index` of `lines`, joined with '\n' and sanitized.
std::string excerpt_around(const std::vector<std::string_view>& lines, std::size_t index, std::size_t max_lines = 3,
                           std::size_t max_bytes = 600);

// Attaches the warning lines in `text` ("WARNING: infoROM is corrupted at gpu 0000:0B:00.0") to the
// GPU whose bus id they name, else to log.warnings.
void attach_warning_lines(NvidiaSmiLog& log, std::string_view text);

}  // namespace gpuctl::gpu::detail
