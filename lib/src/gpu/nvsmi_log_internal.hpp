#pragma once
// Private pieces shared by the nvidia-smi -q tree readers (lib/src/gpu/nvsmi_log*.cpp only): how
// a field is picked from the first of its paths that has a value, and the readers of the tree's
// sections.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/gpu/nvidia_smi.hpp"

namespace gpuctl::gpu::detail {

using Paths = std::initializer_list<std::string_view>;

// Resolves `path` under `base`. When a section on the way is present but is itself "N/A" (e.g.
// <remapped_rows>N/A</remapped_rows>), its fields are absent for the same reason, not "missing".
const NvsmiNode* resolve(const NvsmiNode* base, std::string_view path, std::optional<Absence>& inherited);

// The first path whose value parses; else the absence of the first path found; else missing.
template <class Parse>
auto pick(const NvsmiNode* base, Paths paths, Parse parse) -> decltype(parse(std::string_view{})) {
  using R = decltype(parse(std::string_view{}));
  std::optional<Absence> first_absence;
  std::optional<Absence> inherited;
  if (base == nullptr) return R{};
  for (std::string_view p : paths) {
    const NvsmiNode* n = resolve(base, p, inherited);
    if (n == nullptr) continue;
    R r = parse(std::string_view(n->value));
    if (r.has_value()) return r;
    if (!first_absence) first_absence = r.absence();
  }
  if (first_absence) return R::absent(*first_absence);
  if (inherited) return R::absent(*inherited);
  return R{};
}

Reported<int> narrow(const Reported<std::int64_t>& v);

inline auto text_of() {
  return [](std::string_view s) { return parse_text(s); };
}
// R610 appends " [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]" to the
// driver and CUDA versions; the version is what comes before.
inline auto version_of() {
  return [](std::string_view s) {
    std::size_t bracket = s.find(" [");
    return parse_text(bracket == std::string_view::npos ? s : s.substr(0, bracket));
  };
}
inline auto int64_of(std::string_view unit = {}) {
  return [unit](std::string_view s) { return parse_integer(s, unit); };
}
inline auto int_of(std::string_view unit = {}) {
  return [unit](std::string_view s) { return narrow(parse_integer(s, unit)); };
}
inline auto number_of(std::string_view unit) {
  return [unit](std::string_view s) { return parse_number(s, unit); };
}
inline auto flag_of() {
  return [](std::string_view s) { return parse_flag(s); };
}

const NvsmiNode* first_child(const NvsmiNode* base, Paths paths);

// The readers of a GPU's sections (nvsmi_log_sections.cpp).
MemoryUsage memory_of(const NvsmiNode* section);
EccCounts ecc_counts_of(const NvsmiNode* section);
Reported<std::vector<std::string>> reasons_of(const NvsmiNode& gpu);
std::vector<GpuProcess> processes_of(const NvsmiNode& gpu);
std::vector<MigDevice> mig_devices_of(const NvsmiNode& gpu);

}  // namespace gpuctl::gpu::detail
