// Maps an `nvidia-smi -q` tree (XML or text) onto the GPU model. Each field lists the paths it is
// found at across schema versions and the text form; the first path with a value wins. The
// sections' readers are in nvsmi_log_sections.cpp.
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "gpu/nvsmi_log_internal.hpp"
#include "gpu/util.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"

namespace gpuctl::gpu {

namespace detail {

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

Reported<int> narrow(const Reported<std::int64_t>& v) {
  if (!v) return Reported<int>::absent(v.absence());
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return Reported<int>::absent(Absence::invalid);
  }
  return static_cast<int>(*v);
}

const NvsmiNode* first_child(const NvsmiNode* base, Paths paths) {
  if (base == nullptr) return nullptr;
  for (std::string_view p : paths) {
    if (const NvsmiNode* n = base->find(p)) return n;
  }
  return nullptr;
}

}  // namespace detail

namespace {

using detail::ecc_counts_of;
using detail::first_child;
using detail::flag_of;
using detail::int64_of;
using detail::int_of;
using detail::memory_of;
using detail::mig_devices_of;
using detail::number_of;
using detail::pick;
using detail::processes_of;
using detail::reasons_of;
using detail::text_of;
using detail::version_of;

// Identity and modes: UUID, product, bus id, serial, VBIOS, minor number, persistence and compute mode.
void read_identity(const NvsmiNode& g, GpuInfo& gpu) {
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
}

MigInfo mig_of(const NvsmiNode& g) {
  MigInfo mig;
  mig.current_enabled = pick(&g, {"mig_mode/current_mig", "mig_mode/current"}, flag_of());
  mig.pending_enabled = pick(&g, {"mig_mode/pending_mig", "mig_mode/pending"}, flag_of());
  mig.devices = mig_devices_of(g);
  return mig;
}

VirtualizationInfo virtualization_of(const NvsmiNode& g) {
  VirtualizationInfo v;
  v.mode = pick(&g, {"gpu_virtualization_mode/virtualization_mode"}, text_of());
  v.host_vgpu_mode = pick(&g, {"gpu_virtualization_mode/host_vgpu_mode"}, text_of());
  v.licensed_product_name =
      pick(&g, {"vgpu_software_licensed_product/licensed_product_name", "vgpu_software_licensed_product/product_name"},
           text_of());
  v.license_status = pick(&g, {"vgpu_software_licensed_product/license_status"}, text_of());
  return v;
}

Utilization utilization_of(const NvsmiNode* u) {
  Utilization out;
  out.gpu_percent = pick(u, {"gpu_util", "gpu"}, int_of("%"));
  out.memory_percent = pick(u, {"memory_util", "memory"}, int_of("%"));
  out.encoder_percent = pick(u, {"encoder_util", "encoder"}, int_of("%"));
  out.decoder_percent = pick(u, {"decoder_util", "decoder"}, int_of("%"));
  return out;
}

Temperature temperature_of(const NvsmiNode* t) {
  Temperature out;
  out.gpu_c = pick(t, {"gpu_temp", "gpu_current_temp"}, int_of("C"));
  out.memory_c = pick(t, {"memory_temp", "memory_current_temp"}, int_of("C"));
  out.slowdown_threshold_c = pick(t, {"gpu_temp_slow_threshold", "gpu_slowdown_temp"}, int_of("C"));
  out.shutdown_threshold_c = pick(t, {"gpu_temp_max_threshold", "gpu_shutdown_temp"}, int_of("C"));
  out.max_operating_c = pick(t, {"gpu_temp_max_gpu_threshold", "gpu_max_operating_temp"}, int_of("C"));
  out.target_c = pick(t, {"gpu_target_temperature"}, int_of("C"));
  out.tlimit_margin_c = pick(t, {"gpu_temp_tlimit", "gpu_t_limit_temp"}, int_of("C"));
  out.slowdown_tlimit_offset_c = pick(t, {"gpu_temp_slow_tlimit_threshold", "gpu_slowdown_t_limit_temp"}, int_of("C"));
  out.shutdown_tlimit_offset_c = pick(t, {"gpu_temp_max_tlimit_threshold", "gpu_shutdown_t_limit_temp"}, int_of("C"));
  return out;
}

// v12 (R535) renamed <power_readings> to <gpu_power_readings>; R570 split the draw.
Power power_of(const NvsmiNode& g) {
  const NvsmiNode* p = first_child(&g, {"gpu_power_readings", "power_readings"});
  Power out;
  out.draw_average_w = pick(p, {"average_power_draw"}, number_of("W"));
  out.draw_instant_w = pick(p, {"instant_power_draw", "instantaneous_power_draw"}, number_of("W"));
  out.draw_w =
      pick(p, {"power_draw", "average_power_draw", "instant_power_draw", "instantaneous_power_draw"}, number_of("W"));
  out.limit_w = pick(p, {"enforced_power_limit", "current_power_limit", "power_limit"}, number_of("W"));
  out.requested_limit_w = pick(p, {"requested_power_limit", "power_limit"}, number_of("W"));
  out.default_limit_w = pick(p, {"default_power_limit"}, number_of("W"));
  out.min_limit_w = pick(p, {"min_power_limit"}, number_of("W"));
  out.max_limit_w = pick(p, {"max_power_limit"}, number_of("W"));
  return out;
}

std::optional<Clocks> clocks_of(const NvsmiNode& g) {
  const NvsmiNode* clocks = g.child("clocks");
  const NvsmiNode* max_clocks = g.child("max_clocks");
  if (clocks == nullptr && max_clocks == nullptr) return std::nullopt;
  Clocks c;
  c.graphics_mhz = pick(clocks, {"graphics_clock", "graphics"}, int_of("MHz"));
  c.sm_mhz = pick(clocks, {"sm_clock", "sm"}, int_of("MHz"));
  c.memory_mhz = pick(clocks, {"mem_clock", "memory"}, int_of("MHz"));
  c.video_mhz = pick(clocks, {"video_clock", "video"}, int_of("MHz"));
  c.max_graphics_mhz = pick(max_clocks, {"graphics_clock", "graphics"}, int_of("MHz"));
  c.max_sm_mhz = pick(max_clocks, {"sm_clock", "sm"}, int_of("MHz"));
  c.max_memory_mhz = pick(max_clocks, {"mem_clock", "memory"}, int_of("MHz"));
  return c;
}

Ecc ecc_of(const NvsmiNode& g) {
  Ecc ecc;
  ecc.enabled = pick(&g, {"ecc_mode/current_ecc", "ecc_mode/current"}, flag_of());
  ecc.pending_enabled = pick(&g, {"ecc_mode/pending_ecc", "ecc_mode/pending"}, flag_of());
  ecc.volatile_counts = ecc_counts_of(g.find("ecc_errors/volatile"));
  ecc.aggregate_counts = ecc_counts_of(g.find("ecc_errors/aggregate"));
  return ecc;
}

RetiredPages retired_pages_of(const NvsmiNode& g) {
  RetiredPages r;
  r.single_bit_count = pick(
      &g, {"retired_pages/multiple_single_bit_retirement/retired_count", "retired_pages/single_bit_ecc"}, int64_of());
  r.double_bit_count =
      pick(&g, {"retired_pages/double_bit_retirement/retired_count", "retired_pages/double_bit_ecc"}, int64_of());
  r.pending = pick(&g,
                   {"retired_pages/pending_retirement", "retired_pages/pending_blacklist",
                    "retired_pages/pending_page_retirement", "retired_pages/pending_page_blacklist"},
                   flag_of());
  return r;
}

RemappedRows remapped_rows_of(const NvsmiNode& g) {
  RemappedRows r;
  r.correctable = pick(&g, {"remapped_rows/remapped_row_corr", "remapped_rows/correctable_error"}, int64_of());
  r.uncorrectable = pick(&g, {"remapped_rows/remapped_row_unc", "remapped_rows/uncorrectable_error"}, int64_of());
  r.pending = pick(&g, {"remapped_rows/remapped_row_pending", "remapped_rows/pending"}, flag_of());
  r.failure = pick(&g, {"remapped_rows/remapped_row_failure", "remapped_rows/remapping_failure_occurred"}, flag_of());
  return r;
}

// XML: pci/pci_gpu_link_info/{pcie_gen/*_link_gen, link_widths/*_link_width}; text: PCI / GPU
// Link Info / {PCIe Generation, Link Width} / {Max, Current}.
PcieLink pcie_of(const NvsmiNode& g) {
  const NvsmiNode* link = first_child(g.child("pci"), {"pci_gpu_link_info", "gpu_link_info"});
  PcieLink out;
  out.gen_current = pick(link, {"pcie_gen/current_link_gen", "pcie_generation/current"}, int_of());
  out.gen_max = pick(link, {"pcie_gen/max_link_gen", "pcie_generation/max"}, int_of());
  out.width_current = pick(link, {"link_widths/current_link_width", "link_width/current"}, int_of("x"));
  out.width_max = pick(link, {"link_widths/max_link_width", "link_width/max"}, int_of("x"));
  return out;
}

FabricInfo fabric_of(const NvsmiNode& g) {
  FabricInfo out;
  out.state = pick(&g, {"fabric/state"}, text_of());
  out.status = pick(&g, {"fabric/status"}, text_of());
  return out;
}

GpuInfo gpu_of(const NvsmiNode& g, int index) {
  GpuInfo gpu;
  gpu.index = index;
  read_identity(g, gpu);
  gpu.pcie = pcie_of(g);
  gpu.fabric = fabric_of(g);
  gpu.mig = mig_of(g);
  gpu.virtualization = virtualization_of(g);
  gpu.memory = memory_of(g.child("fb_memory_usage"));
  if (const NvsmiNode* bar1 = g.child("bar1_memory_usage")) gpu.bar1 = memory_of(bar1);
  gpu.utilization = utilization_of(g.child("utilization"));
  gpu.temperature = temperature_of(g.child("temperature"));
  gpu.power = power_of(g);
  gpu.clocks = clocks_of(g);
  gpu.ecc = ecc_of(g);
  gpu.retired_pages = retired_pages_of(g);
  gpu.remapped_rows = remapped_rows_of(g);
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
    log.warnings.push_back(
        fmt::format("nvidia-smi reports {} attached GPUs but the output has {} GPU sections "
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
