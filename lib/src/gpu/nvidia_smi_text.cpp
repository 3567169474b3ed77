// `nvidia-smi -L` and the default `nvidia-smi` table.
#include <cctype>
#include <charconv>
#include <unordered_map>

#include "gpu/util.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

namespace gpuctl::gpu {

using detail::trim;

namespace {

std::optional<int> leading_int(std::string_view& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return v;
}

bool consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// "(UUID: GPU-...)" at the end of `s`: the UUID, and `s` without it.
Reported<std::string> take_uuid(std::string_view& s) {
  std::size_t open = s.rfind("(UUID:");
  if (open == std::string_view::npos || s.back() != ')') return {};
  std::string_view inner = trim(s.substr(open + 6, s.size() - open - 7));
  s = trim(s.substr(0, open));
  return parse_text(inner);
}

std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
    std::size_t j = i;
    while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j])) == 0) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

GpuList parse_nvidia_smi_list(std::string_view text) {
  GpuList list;
  for (std::string_view raw : detail::split_lines(text)) {
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    std::string_view s = line;
    if (consume(s, "GPU ")) {
      if (auto idx = leading_int(s); idx && consume(s, ": ")) {
        ListedGpu g;
        g.index = *idx;
        g.uuid = take_uuid(s);
        g.name = detail::sanitize(trim(s));
        list.gpus.push_back(std::move(g));
        continue;
      }
    }
    s = line;
    if (consume(s, "MIG ") && !list.gpus.empty()) {
      // "MIG 1g.10gb     Device  0: (UUID: MIG-...)"
      std::size_t dev = s.find(" Device ");
      if (dev != std::string_view::npos) {
        ListedMigDevice m;
        m.profile_name = parse_text(trim(s.substr(0, dev)));
        std::string_view rest = trim(s.substr(dev + 8));
        if (auto di = leading_int(rest); di && consume(rest, ":")) {
          m.device_index = *di;
          rest = trim(rest);
          m.uuid = take_uuid(rest);
          // Before R470 the MIG UUID was "MIG-GPU-<gpu uuid>/<gi>/<ci>".
          if (m.uuid) {
            std::string_view u = *m.uuid;
            std::size_t s1 = u.find('/');
            std::size_t s2 = s1 == std::string_view::npos ? s1 : u.find('/', s1 + 1);
            if (s2 != std::string_view::npos) {
              std::string_view gi = u.substr(s1 + 1, s2 - s1 - 1);
              std::string_view ci = u.substr(s2 + 1);
              if (auto v = leading_int(gi); v && gi.empty()) m.gpu_instance_id = *v;
              if (auto v = leading_int(ci); v && ci.empty()) m.compute_instance_id = *v;
            }
          }
          list.gpus.back().mig_devices.push_back(std::move(m));
          continue;
        }
      }
    }
    list.other_lines.push_back(detail::one_line(line));
  }
  return list;
}

namespace {

// Copies what -L knows into `gpu`. MIG devices are matched through an index map (device
// index -> listed devices, in order), so a hostile -L with thousands of devices stays linear.
void merge_listed(GpuInfo& gpu, const ListedGpu& match) {
  if (!gpu.uuid && match.uuid) gpu.uuid = match.uuid;
  if (!gpu.product_name && !match.name.empty()) gpu.product_name = match.name;
  if (gpu.mig.devices.empty()) {
    for (const auto& m : match.mig_devices) {
      MigDevice d;
      d.index = m.device_index;
      gpu.mig.devices.push_back(std::move(d));
    }
  }
  std::unordered_map<int, std::vector<const ListedMigDevice*>> by_index;
  for (const auto& m : match.mig_devices) by_index[m.device_index].push_back(&m);
  for (MigDevice& d : gpu.mig.devices) {
    if (!d.index) continue;
    auto it = by_index.find(*d.index);
    if (it == by_index.end()) continue;
    for (const ListedMigDevice* m : it->second) {  // every match in order: the last one's names win
      d.profile_name = m->profile_name;
      d.uuid = m->uuid;
      if (!d.gpu_instance_id && m->gpu_instance_id) d.gpu_instance_id = m->gpu_instance_id;
      if (!d.compute_instance_id && m->compute_instance_id) d.compute_instance_id = m->compute_instance_id;
    }
  }
}

// The listed GPUs by UUID and by index; the last of equals wins, as a scan of the list did.
struct ListIndex {
  std::unordered_map<std::string, const ListedGpu*> by_uuid;
  std::unordered_map<int, const ListedGpu*> by_index;

  explicit ListIndex(const GpuList& list) {
    for (const auto& g : list.gpus) {
      if (g.uuid) by_uuid[*g.uuid] = &g;
      by_index[g.index] = &g;
    }
  }
  const ListedGpu* match(const GpuInfo& gpu) const {
    if (gpu.uuid) {
      if (auto it = by_uuid.find(*gpu.uuid); it != by_uuid.end()) return it->second;
    }
    if (gpu.index >= 0) {
      if (auto it = by_index.find(gpu.index); it != by_index.end()) return it->second;
    }
    return nullptr;
  }
};

}  // namespace

bool merge_gpu_list(GpuInfo& gpu, const GpuList& list) {
  const ListedGpu* match = ListIndex(list).match(gpu);
  if (match == nullptr) return false;
  merge_listed(gpu, *match);
  return true;
}

void merge_gpu_lists(std::vector<GpuInfo>& gpus, const GpuList& list) {
  const ListIndex index(list);
  for (GpuInfo& gpu : gpus) {
    if (const ListedGpu* match = index.match(gpu)) merge_listed(gpu, *match);
  }
}

// --- The default table ---

namespace {

// The first three cells of a table row (all the parser reads): a hostile line of millions of
// '|' costs one short scan, not millions of cells.
std::vector<std::string_view> table_cells(std::string_view line) {
  constexpr std::size_t kCellsRead = 3;
  std::vector<std::string_view> cells;
  line = trim(line);
  if (line.size() < 2 || line.front() != '|') return cells;
  std::size_t start = 1;
  while (start < line.size() && cells.size() < kCellsRead) {
    std::size_t bar = line.find('|', start);
    if (bar == std::string_view::npos) break;
    cells.push_back(line.substr(start, bar - start));
    start = bar + 1;
  }
  return cells;
}

std::string_view after(std::string_view line, std::string_view label) {
  std::size_t p = line.find(label);
  if (p == std::string_view::npos) return {};
  std::string_view rest = trim(line.substr(p + label.size()));
  std::size_t end = 0;
  while (end < rest.size() && std::isspace(static_cast<unsigned char>(rest[end])) == 0 && rest[end] != '|') ++end;
  return rest.substr(0, end);
}

// "| NVIDIA-SMI 550.90.07   Driver Version: 550.90.07   CUDA Version: 12.4 |";
// R610: "| NVIDIA-SMI 610.62   KMD Version: 610.62   CUDA UMD Version: 13.3 |". False when `line`
// is not the header.
bool read_table_header(std::string_view line, NvidiaSmiLog& log) {
  if (line.find("NVIDIA-SMI") == std::string_view::npos ||
      (line.find("Driver Version:") == std::string_view::npos && line.find("KMD Version:") == std::string_view::npos)) {
    return false;
  }
  std::string_view driver = after(line, "Driver Version:");
  std::string_view cuda = after(line, "CUDA Version:");
  log.driver_version = parse_text(driver.empty() ? after(line, "KMD Version:") : driver);
  log.cuda_version = parse_text(cuda.empty() ? after(line, "CUDA UMD Version:") : cuda);
  return true;
}

Reported<int> narrow_int(const Reported<std::int64_t>& v) {
  return v ? Reported<int>(static_cast<int>(*v)) : Reported<int>::absent(v.absence());
}

// First row of a GPU: "|   0  NVIDIA H100 80GB HBM3   On  |   00000000:19:00.0 Off |   0 |" (at
// least three cells); nullopt when the row does not start a GPU.
std::optional<GpuInfo> gpu_of_first_row(const std::vector<std::string_view>& c1) {
  std::string_view first = trim(c1[0]);
  auto idx = leading_int(first);
  std::optional<std::string> bus = detail::find_pci_bus_id(c1[1]);
  if (!idx || !bus) return std::nullopt;
  GpuInfo g;
  g.index = *idx;
  std::vector<std::string_view> name_tokens = tokens(first);
  if (!name_tokens.empty()) {
    g.persistence_mode_enabled = parse_flag(name_tokens.back());
    std::string_view name = trim(first.substr(0, static_cast<std::size_t>(name_tokens.back().data() - first.data())));
    g.product_name = parse_text(name);
  }
  std::vector<std::string_view> bus_tokens = tokens(c1[1]);
  g.pci_bus_id = std::string(bus_tokens.front());
  std::vector<std::string_view> ecc = tokens(c1[2]);
  if (ecc.size() == 1) g.ecc.volatile_counts.uncorrected = parse_integer(ecc[0]);
  return g;
}

// Second row: "| N/A   27C    P0             72W /  700W |  1MiB /  81559MiB |  0%  Default |"
void read_second_row(std::string_view line, GpuInfo& g) {
  std::vector<std::string_view> c2 = table_cells(line);
  if (c2.size() < 3) return;
  std::vector<std::string_view> t = tokens(c2[0]);
  if (t.size() >= 3) {
    g.fan_speed_percent = narrow_int(parse_integer(t[0], "%"));
    g.temperature.gpu_c = narrow_int(parse_integer(t[1], "C"));
    g.performance_state = parse_text(t[2]);
  }
  if (t.size() >= 6 && t[4] == "/") {
    g.power.draw_w = parse_number(t[3], "W");
    g.power.limit_w = parse_number(t[5], "W");
  }
  std::vector<std::string_view> m = tokens(c2[1]);
  if (m.size() == 3 && m[1] == "/") {
    g.memory.used_mib = parse_integer(m[0], "MiB");
    g.memory.total_mib = parse_integer(m[2], "MiB");
  }
  std::vector<std::string_view> u = tokens(c2[2]);
  if (!u.empty()) {
    g.utilization.gpu_percent = narrow_int(parse_integer(u[0], "%"));
    std::string_view mode = trim(c2[2]);
    mode = trim(mode.substr(static_cast<std::size_t>(u[0].data() + u[0].size() - mode.data())));
    if (!mode.empty()) g.compute_mode = std::string(mode);
  }
}

// Third row (R450+): "MIG M." in the last column.
void read_third_row(std::string_view line, GpuInfo& g) {
  std::vector<std::string_view> c3 = table_cells(line);
  if (c3.size() >= 3 && trim(c3[0]).empty()) g.mig.current_enabled = parse_flag(c3[2]);
}

}  // namespace

Result<NvidiaSmiLog> parse_nvidia_smi_table(std::string_view text) {
  NvidiaSmiLog log;
  std::vector<std::string_view> lines = detail::split_lines(text);
  bool header = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (!header && read_table_header(line, log)) {
      header = true;
      continue;
    }
    std::vector<std::string_view> c1 = table_cells(line);
    if (!header || c1.size() < 3 || i + 1 >= lines.size()) continue;
    std::optional<GpuInfo> g = gpu_of_first_row(c1);
    if (!g) continue;
    read_second_row(lines[i + 1], *g);
    if (i + 2 < lines.size()) read_third_row(lines[i + 2], *g);
    g->driver_version = log.driver_version;
    g->cuda_version = log.cuda_version;
    log.gpus.push_back(std::move(*g));
    ++i;
  }
  if (!header) return fail(Errc::parse, "not an nvidia-smi table: no \"NVIDIA-SMI ... Driver Version:\" header line");
  std::string warnings;
  for (std::string_view line : lines) {
    if (trim(line).substr(0, 8) == "WARNING:") warnings.append(line).push_back('\n');
  }
  detail::attach_warning_lines(log, warnings);  // once: it indexes the GPUs by bus id
  return log;
}

}  // namespace gpuctl::gpu
