// `nvidia-smi nvlink -s`: per GPU, which NVLinks are up and which are down.
#include <charconv>

#include "gpu/util.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

namespace gpuctl::gpu {

namespace {

std::optional<int> number_after(std::string_view s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return std::nullopt;
  s.remove_prefix(prefix.size());
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p == s.data() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::vector<NvlinkGpuStatus> parse_nvlink_status(std::string_view text) {
  std::vector<NvlinkGpuStatus> out;
  for (std::string_view raw : detail::split_lines(text)) {
    std::string_view line = detail::trim(raw);
    if (line.starts_with("GPU ")) {
      GpuList header = parse_nvidia_smi_list(line);
      if (header.gpus.empty()) continue;
      NvlinkGpuStatus g;
      g.index = header.gpus.front().index;
      g.uuid = header.gpus.front().uuid;
      out.push_back(std::move(g));
      continue;
    }
    std::optional<int> link = number_after(line, "Link ");
    std::size_t colon = line.find(':');
    if (!link || out.empty() || colon == std::string_view::npos) continue;
    std::string_view state = detail::trim(line.substr(colon + 1));
    // "<inactive>" on every driver seen; a link the driver cannot read says so in words.
    bool down = detail::icontains(state, "inactive") || detail::icontains(state, "disabled");
    (down ? out.back().inactive_links : out.back().active_links).push_back(*link);
  }
  return out;
}

}  // namespace gpuctl::gpu
