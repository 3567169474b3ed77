// Maps an `nvidia-smi -q` tree (XML or text) onto the GPU model. Each field lists the paths it is
// found at across schema versions and the text form; the first path with a value wins.
#include <initializer_list>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "gpu/util.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"

namespace gpuctl::gpu {

namespace {

using Paths = std::initializer_list<std::string_view>;

// Resolves `path` under `base`. When a section on the way is present but is itself "N/A" (e.g.
// <remapped_rows>N/A</remapped_rows>), its fields are absent for the same reason, not "missing".
const NvsmiNode* resolve(const NvsmiNode* base, std::string_view path, std::optional<Absence>& inherited) {
  const NvsmiNode* cur = base;
  while (cur != nullptr && !path.empty()) {
    std::size_t slash = path.find('/');
    const NvsmiNode* next = cur->child(path.substr(0, slash));
    if (next == nullptr) {
      if (cur != base && cur->children.empty() && !inherited) inherited = absence_of(cur->value);
      return nullptr;
    }
    cur = next;
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
  }
  return cur;
}

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

Reported<int> narrow(const Reported<std::int64_t>& v) {
  if (!v) return Reported<int>::absent(v.absence());
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return Reported<int>::absent(Absence::invalid);
  }
  return static_cast<int>(*v);
}

auto text_of() {
  return [](std::string_view s) { return parse_text(s); };
}
// R610 appends " [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]" to the
// driver and CUDA versions; the version is what comes before.
auto version_of() {
  return [](std::string_view s) {
    std::size_t bracket = s.find(" [");
    return parse_text(bracket == std::string_view::npos ? s : s.substr(0, bracket));
  };
}
auto int64_of(std::string_view unit = {}) {
  return [unit](std::string_view s) { return parse_integer(s, unit); };
}
auto int_of(std::string_view unit = {}) {
  return [unit](std::string_view s) { return narrow(parse_integer(s, unit)); };
}
auto number_of(std::string_view unit) {
  return [unit](std::string_view s) { return parse_number(s, unit); };
}
auto flag_of() {
  return [](std::string_view s) { return parse_flag(s); };
}

const NvsmiNode* first_child(const NvsmiNode* base, Paths paths) {
  if (base == nullptr) return nullptr;
  for (std::string_view p : paths) {
    if (const NvsmiNode* n = base->find(p)) return n;
  }
  return nullptr;
}

MemoryUsage memory_of(const NvsmiNode* section) {
  MemoryUsage m;
  m.total_mib = pick(section, {"total"}, int64_of("MiB"));
  m.used_mib = pick(section, {"used"}, int64_of("MiB"));
  m.free_mib = pick(section, {"free"}, int64_of("MiB"));
  m.reserved_mib = pick(section, {"reserved"}, int64_of("MiB"));
  return m;
}

// Sums counters that newer schemas split into parts (SRAM + DRAM, parity + SEC-DED).
Reported<std::int64_t> sum_of(const NvsmiNode* section, Paths parts) {
  if (section == nullptr) return {};
  std::int64_t total = 0;
  bool any = false;
  std::optional<Absence> why;
  for (std::string_view p : parts) {
    Reported<std::int64_t> v = pick(section, {p}, int64_of());
    if (v) {
      total += *v;
      any = true;
    } else if (!why && v.absence() != Absence::missing) {
      why = v.absence();
    }
  }
  if (any) return total;
  if (why) return Reported<std::int64_t>::absent(*why);
  if (section->children.empty()) {
    if (auto a = absence_of(section->value)) return Reported<std::int64_t>::absent(*a);
  }
  return {};
}

EccCounts ecc_counts_of(const NvsmiNode* section) {
  EccCounts c;
  if (section == nullptr) return c;
  if (section->child("single_bit") != nullptr || section->child("double_bit") != nullptr) {
    // Pre-Ampere schema: per-unit counters with a total.
    c.corrected = pick(section, {"single_bit/total"}, int64_of());
    c.uncorrected = pick(section, {"double_bit/total"}, int64_of());
    return c;
  }
  c.corrected = sum_of(section, {"sram_correctable", "dram_correctable"});
  c.uncorrected = sum_of(section, {"sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                                   "sram_uncorrectable_sec_ded", "dram_uncorrectable"});
  return c;
}

std::string reason_name(std::string_view key) {
  for (std::string_view prefix : {"clocks_event_reason_", "clocks_throttle_reason_"}) {
    if (key.substr(0, prefix.size()) == prefix) {
      key.remove_prefix(prefix.size());
      break;
    }
  }
  if (key == "idle") return "gpu_idle";                                 // text form
  if (key == "display_clock_setting") return "display_clocks_setting";  // text form
  return std::string(key);
}

void collect_active(const NvsmiNode& n, std::vector<std::string>& out) {
  for (const auto& c : n.children) {
    Reported<bool> active = parse_flag(c.value);
    if (active && *active) out.push_back(reason_name(c.key));
    collect_active(c, out);
  }
}

Reported<std::vector<std::string>> reasons_of(const NvsmiNode& gpu) {
  const NvsmiNode* section = first_child(&gpu, {"clocks_event_reasons", "clocks_throttle_reasons"});
  if (section == nullptr) return {};
  if (section->children.empty()) {
    return Reported<std::vector<std::string>>::absent(absence_of(section->value).value_or(Absence::invalid));
  }
  std::vector<std::string> active;
  collect_active(*section, active);
  return active;
}

std::vector<GpuProcess> processes_of(const NvsmiNode& gpu) {
  std::vector<GpuProcess> out;
  const NvsmiNode* section = gpu.child("processes");
  if (section == nullptr) return out;
  for (const NvsmiNode* p : section->children_named("process_info")) {  // XML
    GpuProcess proc;
    proc.pid = pick(p, {"pid"}, int64_of());
    proc.type = pick(p, {"type"}, text_of());
    proc.name = pick(p, {"process_name"}, text_of());
    proc.used_memory_mib = pick(p, {"used_memory"}, int64_of("MiB"));
    proc.gpu_instance_id = pick(p, {"gpu_instance_id"}, int_of());
    proc.compute_instance_id = pick(p, {"compute_instance_id"}, int_of());
    out.push_back(std::move(proc));
  }
  // Text: "GPU instance ID" and "Compute instance ID" precede each "Process ID" (which holds the
  // process' Type/Name/Used GPU Memory as children).
  Reported<int> gi;
  Reported<int> ci;
  for (const auto& c : section->children) {
    if (c.key == "gpu_instance_id") {
      gi = narrow(parse_integer(c.value));
    } else if (c.key == "compute_instance_id") {
      ci = narrow(parse_integer(c.value));
    } else if (c.key == "process_id") {
      GpuProcess proc;
      proc.pid = parse_integer(c.value);
      proc.type = pick(&c, {"type"}, text_of());
      proc.name = pick(&c, {"name", "process_name"}, text_of());
      proc.used_memory_mib = pick(&c, {"used_gpu_memory", "used_memory"}, int64_of("MiB"));
      proc.gpu_instance_id = gi;
      proc.compute_instance_id = ci;
      out.push_back(std::move(proc));
      gi = {};
      ci = {};
    }
  }
  return out;
}

std::vector<MigDevice> mig_devices_of(const NvsmiNode& gpu) {
  std::vector<const NvsmiNode*> nodes;
  if (const NvsmiNode* list = gpu.child("mig_devices")) nodes = list->children_named("mig_device");  // XML
  if (nodes.empty()) nodes = gpu.children_named("mig_device");                                    // text
  std::vector<MigDevice> out;
  for (const NvsmiNode* d : nodes) {
    MigDevice m;
    m.index = pick(d, {"index"}, int_of());
    m.gpu_instance_id = pick(d, {"gpu_instance_id"}, int_of());
    m.compute_instance_id = pick(d, {"compute_instance_id"}, int_of());
    m.multiprocessor_count = pick(d, {"device_attributes/shared/multiprocessor_count"}, int_of());
    m.memory = memory_of(first_child(d, {"fb_memory_usage", "shared_fb_memory_usage"}));
    if (const NvsmiNode* bar1 = first_child(d, {"bar1_memory_usage", "shared_bar1_memory", "shared_bar1_memory_usage"})) {
      m.bar1 = memory_of(bar1);
    }
    out.push_back(std::move(m));
  }
  return out;
}

GpuInfo gpu_of(const NvsmiNode& g, int index) {
  GpuInfo gpu;
  gpu.index = index;
  gpu.uuid = pick(&g, {"uuid", "gpu_uuid"}, text_of());
  gpu.product_name = pick(&g, {"product_name"}, text_of());
  gpu.product_brand = pick(&g, {"product_brand"}, text_of());
  gpu.product_architecture = pick(&g, {"product_architecture"}, text_of());
  gpu.pci_bus_id = pick(&g, {"pci/pci_bus_id", "pci/bus_id", "@id"}, text_of());
  if (!gpu.pci_bus_id && g.key == "gpu" && !g.value.empty()) gpu.pci_bus_id = parse_text(g.value);  // text header
  gpu.serial = pick(&g, {"serial", "serial_number"}, text_of());
  gpu.vbios_version = pick(&g, {"vbios_version"}, text_of());
  gpu.minor_number = pick(&g, {"minor_number"}, int_of());
  gpu.persistence_mode_enabled = pick(&g, {"persistence_mode"}, flag_of());
  gpu.compute_mode = pick(&g, {"compute_mode"}, text_of());

  gpu.mig.current_enabled = pick(&g, {"mig_mode/current_mig", "mig_mode/current"}, flag_of());
  gpu.mig.pending_enabled = pick(&g, {"mig_mode/pending_mig", "mig_mode/pending"}, flag_of());
  gpu.mig.devices = mig_devices_of(g);

  gpu.virtualization.mode = pick(&g, {"gpu_virtualization_mode/virtualization_mode"}, text_of());
  gpu.virtualization.host_vgpu_mode = pick(&g, {"gpu_virtualization_mode/host_vgpu_mode"}, text_of());
  gpu.virtualization.licensed_product_name =
      pick(&g, {"vgpu_software_licensed_product/licensed_product_name", "vgpu_software_licensed_product/product_name"},
           text_of());
  gpu.virtualization.license_status = pick(&g, {"vgpu_software_licensed_product/license_status"}, text_of());

  gpu.memory = memory_of(g.child("fb_memory_usage"));
  if (const NvsmiNode* bar1 = g.child("bar1_memory_usage")) gpu.bar1 = memory_of(bar1);

  const NvsmiNode* u = g.child("utilization");
  gpu.utilization.gpu_percent = pick(u, {"gpu_util", "gpu"}, int_of("%"));
  gpu.utilization.memory_percent = pick(u, {"memory_util", "memory"}, int_of("%"));
  gpu.utilization.encoder_percent = pick(u, {"encoder_util", "encoder"}, int_of("%"));
  gpu.utilization.decoder_percent = pick(u, {"decoder_util", "decoder"}, int_of("%"));

  const NvsmiNode* t = g.child("temperature");
  gpu.temperature.gpu_c = pick(t, {"gpu_temp", "gpu_current_temp"}, int_of("C"));
  gpu.temperature.memory_c = pick(t, {"memory_temp", "memory_current_temp"}, int_of("C"));
  gpu.temperature.slowdown_threshold_c = pick(t, {"gpu_temp_slow_threshold", "gpu_slowdown_temp"}, int_of("C"));
  gpu.temperature.shutdown_threshold_c = pick(t, {"gpu_temp_max_threshold", "gpu_shutdown_temp"}, int_of("C"));
  gpu.temperature.max_operating_c = pick(t, {"gpu_temp_max_gpu_threshold", "gpu_max_operating_temp"}, int_of("C"));
  gpu.temperature.target_c = pick(t, {"gpu_target_temperature"}, int_of("C"));
  gpu.temperature.tlimit_margin_c = pick(t, {"gpu_temp_tlimit", "gpu_t_limit_temp"}, int_of("C"));
  gpu.temperature.slowdown_tlimit_offset_c =
      pick(t, {"gpu_temp_slow_tlimit_threshold", "gpu_slowdown_t_limit_temp"}, int_of("C"));
  gpu.temperature.shutdown_tlimit_offset_c =
      pick(t, {"gpu_temp_max_tlimit_threshold", "gpu_shutdown_t_limit_temp"}, int_of("C"));

  // v12 (R535) renamed <power_readings> to <gpu_power_readings>; R570 split the draw.
  const NvsmiNode* p = first_child(&g, {"gpu_power_readings", "power_readings"});
  gpu.power.draw_average_w = pick(p, {"average_power_draw"}, number_of("W"));
  gpu.power.draw_instant_w = pick(p, {"instant_power_draw", "instantaneous_power_draw"}, number_of("W"));
  gpu.power.draw_w = pick(p, {"power_draw", "average_power_draw", "instant_power_draw", "instantaneous_power_draw"},
                          number_of("W"));
  gpu.power.limit_w = pick(p, {"enforced_power_limit", "current_power_limit", "power_limit"}, number_of("W"));
  gpu.power.requested_limit_w = pick(p, {"requested_power_limit", "power_limit"}, number_of("W"));
  gpu.power.default_limit_w = pick(p, {"default_power_limit"}, number_of("W"));
  gpu.power.min_limit_w = pick(p, {"min_power_limit"}, number_of("W"));
  gpu.power.max_limit_w = pick(p, {"max_power_limit"}, number_of("W"));

  const NvsmiNode* clocks = g.child("clocks");
  const NvsmiNode* max_clocks = g.child("max_clocks");
  if (clocks != nullptr || max_clocks != nullptr) {
    Clocks c;
    c.graphics_mhz = pick(clocks, {"graphics_clock", "graphics"}, int_of("MHz"));
    c.sm_mhz = pick(clocks, {"sm_clock", "sm"}, int_of("MHz"));
    c.memory_mhz = pick(clocks, {"mem_clock", "memory"}, int_of("MHz"));
    c.video_mhz = pick(clocks, {"video_clock", "video"}, int_of("MHz"));
    c.max_graphics_mhz = pick(max_clocks, {"graphics_clock", "graphics"}, int_of("MHz"));
    c.max_sm_mhz = pick(max_clocks, {"sm_clock", "sm"}, int_of("MHz"));
    c.max_memory_mhz = pick(max_clocks, {"mem_clock", "memory"}, int_of("MHz"));
    gpu.clocks = c;
  }

  gpu.ecc.enabled = pick(&g, {"ecc_mode/current_ecc", "ecc_mode/current"}, flag_of());
  gpu.ecc.pending_enabled = pick(&g, {"ecc_mode/pending_ecc", "ecc_mode/pending"}, flag_of());
  gpu.ecc.volatile_counts = ecc_counts_of(g.find("ecc_errors/volatile"));
  gpu.ecc.aggregate_counts = ecc_counts_of(g.find("ecc_errors/aggregate"));

  gpu.retired_pages.single_bit_count =
      pick(&g, {"retired_pages/multiple_single_bit_retirement/retired_count", "retired_pages/single_bit_ecc"},
           int64_of());
  gpu.retired_pages.double_bit_count =
      pick(&g, {"retired_pages/double_bit_retirement/retired_count", "retired_pages/double_bit_ecc"}, int64_of());
  gpu.retired_pages.pending = pick(&g,
                                   {"retired_pages/pending_retirement", "retired_pages/pending_blacklist",
                                    "retired_pages/pending_page_retirement", "retired_pages/pending_page_blacklist"},
                                   flag_of());

  gpu.remapped_rows.correctable =
      pick(&g, {"remapped_rows/remapped_row_corr", "remapped_rows/correctable_error"}, int64_of());
  gpu.remapped_rows.uncorrectable =
      pick(&g, {"remapped_rows/remapped_row_unc", "remapped_rows/uncorrectable_error"}, int64_of());
  gpu.remapped_rows.pending = pick(&g, {"remapped_rows/remapped_row_pending", "remapped_rows/pending"}, flag_of());
  gpu.remapped_rows.failure =
      pick(&g, {"remapped_rows/remapped_row_failure", "remapped_rows/remapping_failure_occurred"}, flag_of());

  gpu.clocks_event_reasons = reasons_of(g);
  gpu.fan_speed_percent = pick(&g, {"fan_speed"}, int_of("%"));
  gpu.performance_state = pick(&g, {"performance_state"}, text_of());
  gpu.processes = processes_of(g);
  return gpu;
}

}  // namespace

NvidiaSmiLog nvidia_smi_log_from_tree(const NvsmiNode& root) {
  NvidiaSmiLog log;
  log.timestamp = pick(&root, {"timestamp"}, text_of());
  log.driver_version = pick(&root, {"driver_version", "kmd_version"}, version_of());
  log.cuda_version = pick(&root, {"cuda_version", "cuda_umd_version"}, version_of());
  log.attached_gpus = pick(&root, {"attached_gpus"}, int_of());
  int index = 0;
  for (const NvsmiNode* g : root.children_named("gpu")) {
    GpuInfo gpu = gpu_of(*g, index++);
    gpu.driver_version = log.driver_version;
    gpu.cuda_version = log.cuda_version;
    log.gpus.push_back(std::move(gpu));
  }
  return log;
}

Result<NvidiaSmiLog> parse_nvidia_smi_xml(std::string_view xml) {
  GPUCTL_TRY_ASSIGN(XmlTree tree, parse_nvidia_smi_xml_tree(xml));
  NvidiaSmiLog log = nvidia_smi_log_from_tree(tree.root);
  if (tree.schema_version > 0) log.schema_version = tree.schema_version;
  if (log.gpus.empty() && !log.driver_version) {
    return fail(Errc::parse, "nvidia-smi -q -x output has no <gpu> element and no driver version");
  }
  detail::attach_warning_lines(log, tree.outside_text);
  return log;
}

Result<NvidiaSmiLog> parse_nvidia_smi_query_text(std::string_view text) {
  GPUCTL_TRY_ASSIGN(NvsmiNode root, parse_nvidia_smi_query_text_tree(text));
  NvidiaSmiLog log = nvidia_smi_log_from_tree(root);
  if (log.attached_gpus && *log.attached_gpus > static_cast<int>(log.gpus.size())) {
    log.warnings.push_back(fmt::format("nvidia-smi reports {} attached GPUs but the output has {} GPU sections "
                                       "(the output looks truncated)",
                                       *log.attached_gpus, log.gpus.size()));
  }
  // Warning lines nvidia-smi prints next to its output ("WARNING: infoROM is corrupted at gpu ..."),
  // attached in one call: it indexes the GPUs by bus id once.
  std::string warnings;
  for (std::string_view line : detail::split_lines(text)) {
    if (detail::trim(line).substr(0, 8) == "WARNING:") warnings.append(line).push_back('\n');
  }
  detail::attach_warning_lines(log, warnings);
  return log;
}

}  // namespace gpuctl::gpu

namespace gpuctl::gpu::detail {

// Attaches warning lines nvidia-smi printed around its output to the GPU they name.
void attach_warning_lines(NvidiaSmiLog& log, std::string_view text) {
  std::unordered_map<std::string, std::vector<GpuInfo*>> by_bus;  // not a scan of the GPUs per line
  for (GpuInfo& gpu : log.gpus) {
    if (!gpu.pci_bus_id) continue;
    if (auto bus = canonical_pci_bus_id(*gpu.pci_bus_id)) by_bus[*bus].push_back(&gpu);
  }
  for (std::string_view line : detail::split_lines(text)) {
    line = detail::trim(line);
    if (line.empty()) continue;
    std::string clean = detail::one_line(line);
    NvsmiDiagnosis d = classify_nvidia_smi_run(std::nullopt, line, {});
    auto it = d.pci_bus_id ? by_bus.find(*d.pci_bus_id) : by_bus.end();
    if (it == by_bus.end()) {
      log.warnings.push_back(std::move(clean));
      continue;
    }
    for (GpuInfo* gpu : it->second) gpu->warnings.push_back(clean);
  }
}

}  // namespace gpuctl::gpu::detail
