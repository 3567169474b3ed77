// `nvidia-smi --query-*=... --format=csv[,noheader][,nounits]`.
#include <limits>
#include <map>

#include <fmt/format.h>

#include "gpu/util.hpp"
#include "gpuctl/gpu/clocks_event_reasons.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

namespace gpuctl::gpu {

using detail::trim;

namespace {

std::vector<std::string> split_cells(std::string_view line) {
  std::vector<std::string> cells;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    cells.emplace_back(
        trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return cells;
}

// "memory.total [MiB]" -> ("memory.total", "MiB").
void split_header(std::string_view cell, std::string& field, std::string& unit) {
  cell = trim(cell);
  std::size_t open = cell.rfind(" [");
  if (open != std::string_view::npos && cell.back() == ']') {
    field = std::string(trim(cell.substr(0, open)));
    unit = std::string(cell.substr(open + 2, cell.size() - open - 3));
  } else {
    field = std::string(cell);
    unit.clear();
  }
}

}  // namespace

Result<CsvTable> parse_nvidia_smi_csv(std::string_view text, const std::vector<std::string>& fields) {
  CsvTable table;
  std::vector<std::string_view> lines;
  for (std::string_view l : detail::split_lines(text)) {
    if (!trim(l).empty()) lines.push_back(l);
  }
  std::size_t first_row = 0;
  if (fields.empty()) {
    if (lines.empty()) return fail(Errc::parse, "nvidia-smi CSV output is empty (expected a header line)");
    for (const std::string& cell : split_cells(lines[0])) {
      std::string f;
      std::string u;
      split_header(cell, f, u);
      table.fields.push_back(std::move(f));
      table.units.push_back(std::move(u));
    }
    first_row = 1;
  } else {
    table.fields = fields;
    table.units.assign(fields.size(), std::string());
  }
  const std::size_t n = table.fields.size();
  // The only free-text columns; a ", " inside them splits the cell.
  std::size_t free_text = n;
  for (std::string_view name : {"process_name", "name", "gpu_name"}) {
    for (std::size_t i = 0; i < n && free_text == n; ++i) {
      if (table.fields[i] == name) free_text = i;
    }
  }
  for (std::size_t li = first_row; li < lines.size(); ++li) {
    std::vector<std::string> cells = split_cells(lines[li]);
    if (cells.size() == 1 && n > 1) {  // a message, not a row
      table.other_lines.push_back(detail::one_line(lines[li]));
      continue;
    }
    if (cells.size() > n && free_text < n) {
      std::size_t extra = cells.size() - n;
      std::string joined = cells[free_text];
      for (std::size_t k = 1; k <= extra; ++k) joined += ", " + cells[free_text + k];
      cells.erase(cells.begin() + static_cast<std::ptrdiff_t>(free_text) + 1,
                  cells.begin() + static_cast<std::ptrdiff_t>(free_text + extra) + 1);
      cells[free_text] = std::move(joined);
    }
    if (cells.size() != n) {
      return fail(Errc::parse,
                  fmt::format("nvidia-smi CSV line {} has {} cells, expected {} ({}): \"{}\"", li + 1, cells.size(), n,
                              fields.empty() ? "one per header field" : "one per queried field",
                              detail::one_line(lines[li], 120)));
    }
    table.rows.push_back(std::move(cells));
  }
  // A header alone (or, with noheader, nothing) is a valid answer: no processes, no retired pages.
  return table;
}

namespace {

// One CSV row, looked up by field name (several spellings accepted).
class Row {
 public:
  Row(const CsvTable& t, const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < t.fields.size(); ++i) cells_[t.fields[i]] = cells[i];
  }
  const std::string* get(std::initializer_list<std::string_view> names) const {
    for (std::string_view n : names) {
      if (auto it = cells_.find(std::string(n)); it != cells_.end()) return &it->second;
    }
    return nullptr;
  }
  bool has_prefix(std::string_view prefix) const {
    auto it = cells_.lower_bound(std::string(prefix));
    return it != cells_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
  }
  const std::map<std::string, std::string>& cells() const { return cells_; }

  Reported<std::string> text(std::initializer_list<std::string_view> names) const {
    const std::string* c = get(names);
    return c ? parse_text(*c) : Reported<std::string>{};
  }
  Reported<std::int64_t> int64(std::initializer_list<std::string_view> names, std::string_view unit = {}) const {
    const std::string* c = get(names);
    return c ? parse_integer(*c, unit) : Reported<std::int64_t>{};
  }
  Reported<int> integer(std::initializer_list<std::string_view> names, std::string_view unit = {}) const {
    Reported<std::int64_t> v = int64(names, unit);
    if (!v) return Reported<int>::absent(v.absence());
    if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
      return Reported<int>::absent(Absence::invalid);
    }
    return static_cast<int>(*v);
  }
  Reported<double> number(std::initializer_list<std::string_view> names, std::string_view unit) const {
    const std::string* c = get(names);
    return c ? parse_number(*c, unit) : Reported<double>{};
  }
  Reported<bool> flag(std::initializer_list<std::string_view> names) const {
    const std::string* c = get(names);
    return c ? parse_flag(*c) : Reported<bool>{};
  }

 private:
  std::map<std::string, std::string> cells_;
};

// NVML's clocks event reason bits (nvmlClocksEventReason*), for the ".active" bitmask column.
constexpr std::pair<std::uint64_t, std::string_view> kReasonBits[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clocks_setting"},
};

Reported<std::vector<std::string>> reasons_of(const Row& row) {
  std::vector<std::string> active;
  bool any = false;
  std::optional<Absence> why;
  for (std::string_view prefix : {"clocks_event_reasons.", "clocks_throttle_reasons."}) {
    for (const auto& [field, value] : row.cells()) {
      if (field.compare(0, prefix.size(), prefix) != 0) continue;
      std::string name = field.substr(prefix.size());
      if (name == "supported" || name == "active") continue;
      Reported<bool> on = parse_flag(value);
      if (!on) {
        if (!why) why = on.absence();
        continue;
      }
      any = true;
      if (*on) active.push_back(name);
    }
    if (any) return active;
  }
  // Only the bitmask was queried.
  for (std::string_view f : {"clocks_event_reasons.active", "clocks_throttle_reasons.active"}) {
    if (const std::string* mask = row.get({f})) {
      Reported<std::int64_t> bits = parse_integer(*mask);
      if (!bits) return Reported<std::vector<std::string>>::absent(bits.absence());
      return clocks_event_reason_names(static_cast<std::uint64_t>(*bits));
    }
  }
  if (why) return Reported<std::vector<std::string>>::absent(*why);
  return {};
}

GpuInfo gpu_of(const Row& r, int row_index) {
  GpuInfo g;
  Reported<int> index = r.integer({"index"});
  g.index = index ? *index : row_index;
  g.uuid = r.text({"uuid", "gpu_uuid"});
  g.product_name = r.text({"name", "gpu_name"});
  g.pci_bus_id = r.text({"pci.bus_id", "gpu_bus_id"});
  g.serial = r.text({"serial", "gpu_serial"});
  g.vbios_version = r.text({"vbios_version"});
  g.compute_capability = r.text({"compute_cap"});
  g.driver_version = r.text({"driver_version"});
  g.persistence_mode_enabled = r.flag({"persistence_mode"});
  g.pcie.gen_current = r.integer({"pcie.link.gen.current", "pcie.link.gen.gpucurrent"});
  g.pcie.gen_max = r.integer({"pcie.link.gen.max"});
  g.pcie.width_current = r.integer({"pcie.link.width.current"});
  g.pcie.width_max = r.integer({"pcie.link.width.max"});
  g.compute_mode = r.text({"compute_mode"});
  g.mig.current_enabled = r.flag({"mig.mode.current"});
  g.mig.pending_enabled = r.flag({"mig.mode.pending"});

  g.memory.total_mib = r.int64({"memory.total"}, "MiB");
  g.memory.used_mib = r.int64({"memory.used"}, "MiB");
  g.memory.free_mib = r.int64({"memory.free"}, "MiB");
  g.memory.reserved_mib = r.int64({"memory.reserved"}, "MiB");

  g.utilization.gpu_percent = r.integer({"utilization.gpu"}, "%");
  g.utilization.memory_percent = r.integer({"utilization.memory"}, "%");
  g.utilization.encoder_percent = r.integer({"utilization.encoder"}, "%");
  g.utilization.decoder_percent = r.integer({"utilization.decoder"}, "%");

  g.temperature.gpu_c = r.integer({"temperature.gpu"}, "C");
  g.temperature.memory_c = r.integer({"temperature.memory"}, "C");
  g.temperature.tlimit_margin_c = r.integer({"temperature.gpu.tlimit"}, "C");

  g.power.draw_w = r.number({"power.draw"}, "W");
  g.power.draw_average_w = r.number({"power.draw.average"}, "W");
  g.power.draw_instant_w = r.number({"power.draw.instant"}, "W");
  g.power.limit_w = r.number({"enforced.power.limit", "power.limit"}, "W");
  g.power.requested_limit_w = r.number({"power.limit"}, "W");
  g.power.default_limit_w = r.number({"power.default_limit"}, "W");
  g.power.min_limit_w = r.number({"power.min_limit"}, "W");
  g.power.max_limit_w = r.number({"power.max_limit"}, "W");

  if (r.has_prefix("clocks.")) {
    Clocks c;
    c.graphics_mhz = r.integer({"clocks.current.graphics", "clocks.gr"}, "MHz");
    c.sm_mhz = r.integer({"clocks.current.sm", "clocks.sm"}, "MHz");
    c.memory_mhz = r.integer({"clocks.current.memory", "clocks.mem"}, "MHz");
    c.video_mhz = r.integer({"clocks.current.video", "clocks.video"}, "MHz");
    c.max_graphics_mhz = r.integer({"clocks.max.graphics", "clocks.max.gr"}, "MHz");
    c.max_sm_mhz = r.integer({"clocks.max.sm"}, "MHz");
    c.max_memory_mhz = r.integer({"clocks.max.memory", "clocks.max.mem"}, "MHz");
    g.clocks = c;
  }

  g.ecc.enabled = r.flag({"ecc.mode.current"});
  g.ecc.pending_enabled = r.flag({"ecc.mode.pending"});
  g.ecc.volatile_counts.corrected = r.int64({"ecc.errors.corrected.volatile.total"});
  g.ecc.volatile_counts.uncorrected = r.int64({"ecc.errors.uncorrected.volatile.total"});
  g.ecc.aggregate_counts.corrected = r.int64({"ecc.errors.corrected.aggregate.total"});
  g.ecc.aggregate_counts.uncorrected = r.int64({"ecc.errors.uncorrected.aggregate.total"});

  g.retired_pages.single_bit_count = r.int64({"retired_pages.single_bit_ecc.count", "retired_pages.sbe"});
  g.retired_pages.double_bit_count = r.int64({"retired_pages.double_bit.count", "retired_pages.dbe"});
  g.retired_pages.pending = r.flag({"retired_pages.pending"});

  g.remapped_rows.correctable = r.int64({"remapped_rows.correctable"});
  g.remapped_rows.uncorrectable = r.int64({"remapped_rows.uncorrectable"});
  g.remapped_rows.pending = r.flag({"remapped_rows.pending"});
  g.remapped_rows.failure = r.flag({"remapped_rows.failure"});

  g.clocks_event_reasons = reasons_of(r);
  g.fan_speed_percent = r.integer({"fan.speed"}, "%");
  g.performance_state = r.text({"pstate"});
  return g;
}

}  // namespace

std::vector<std::string> clocks_event_reason_names(std::uint64_t mask) {
  std::vector<std::string> active;
  for (const auto& [bit, name] : kReasonBits) {
    if ((mask & bit) != 0) active.emplace_back(name);
  }
  return active;
}

std::vector<GpuInfo> gpus_from_query_gpu_csv(const CsvTable& table) {
  std::vector<GpuInfo> out;
  int i = 0;
  for (const auto& cells : table.rows) out.push_back(gpu_of(Row(table, cells), i++));
  return out;
}

Result<std::vector<GpuInfo>> parse_query_gpu_csv(std::string_view text, const std::vector<std::string>& fields) {
  GPUCTL_TRY_ASSIGN(CsvTable table, parse_nvidia_smi_csv(text, fields));
  return gpus_from_query_gpu_csv(table);
}

Result<std::vector<ComputeApp>> parse_query_compute_apps_csv(std::string_view text,
                                                             const std::vector<std::string>& fields) {
  GPUCTL_TRY_ASSIGN(CsvTable table, parse_nvidia_smi_csv(text, fields));
  std::vector<ComputeApp> out;
  for (const auto& cells : table.rows) {
    Row r(table, cells);
    ComputeApp app;
    app.gpu_uuid = r.text({"gpu_uuid", "uuid"});
    app.gpu_bus_id = r.text({"gpu_bus_id", "pci.bus_id"});
    app.gpu_name = r.text({"gpu_name", "name"});
    app.process.pid = r.int64({"pid"});
    app.process.name = r.text({"process_name", "name"});
    app.process.used_memory_mib = r.int64({"used_gpu_memory", "used_memory"}, "MiB");
    out.push_back(std::move(app));
  }
  return out;
}

Result<std::vector<RetiredPageRecord>> parse_query_retired_pages_csv(std::string_view text,
                                                                     const std::vector<std::string>& fields) {
  GPUCTL_TRY_ASSIGN(CsvTable table, parse_nvidia_smi_csv(text, fields));
  std::vector<RetiredPageRecord> out;
  for (const auto& cells : table.rows) {
    Row r(table, cells);
    RetiredPageRecord rec;
    rec.gpu_uuid = r.text({"gpu_uuid", "uuid"});
    rec.gpu_bus_id = r.text({"gpu_bus_id", "pci.bus_id"});
    rec.gpu_name = r.text({"gpu_name", "name"});
    rec.gpu_serial = r.text({"gpu_serial", "serial"});
    rec.address = r.text({"retired_pages.address"});
    rec.timestamp = r.text({"retired_pages.timestamp"});
    rec.cause = r.text({"retired_pages.cause"});
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace gpuctl::gpu
