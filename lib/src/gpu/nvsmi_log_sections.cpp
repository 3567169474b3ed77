// The readers of an `nvidia-smi -q` tree's sections (memory, ECC counters, clock event reasons,
// processes, MIG devices), for XML and text trees alike.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/nvsmi_log_internal.hpp"

namespace gpuctl::gpu::detail {

namespace {

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

}  // namespace

MemoryUsage memory_of(const NvsmiNode* section) {
  MemoryUsage m;
  m.total_mib = pick(section, {"total"}, int64_of("MiB"));
  m.used_mib = pick(section, {"used"}, int64_of("MiB"));
  m.free_mib = pick(section, {"free"}, int64_of("MiB"));
  m.reserved_mib = pick(section, {"reserved"}, int64_of("MiB"));
  return m;
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
  if (nodes.empty()) nodes = gpu.children_named("mig_device");                                       // text
  std::vector<MigDevice> out;
  for (const NvsmiNode* d : nodes) {
    MigDevice m;
    m.index = pick(d, {"index"}, int_of());
    m.gpu_instance_id = pick(d, {"gpu_instance_id"}, int_of());
    m.compute_instance_id = pick(d, {"compute_instance_id"}, int_of());
    m.multiprocessor_count = pick(d, {"device_attributes/shared/multiprocessor_count"}, int_of());
    m.memory = memory_of(first_child(d, {"fb_memory_usage", "shared_fb_memory_usage"}));
    if (const NvsmiNode* bar1 =
            first_child(d, {"bar1_memory_usage", "shared_bar1_memory", "shared_bar1_memory_usage"})) {
      m.bar1 = memory_of(bar1);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace gpuctl::gpu::detail
