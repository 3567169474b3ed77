#pragma once
// The GPU data model gpuctl builds from nvidia-smi output (XML, CSV, `-q` text, the default table
// and `-L`), independent of which form or schema version it came from. Units are part of the field
// names (_mib, _c, _w, _mhz, _percent). Every value is a Reported<T>: a value, or why nvidia-smi
// did not give one. to_json() produces the stable JSON schema (camelCase keys, null for values the
// GPU did not report).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/gpu/reported.hpp"

namespace gpuctl::gpu {

struct MemoryUsage {
  Reported<std::int64_t> total_mib;
  Reported<std::int64_t> used_mib;
  Reported<std::int64_t> free_mib;
  Reported<std::int64_t> reserved_mib;  // v11+ XML; absent for BAR1 and old drivers
};

struct MigDevice {
  Reported<int> index;                 // MIG device index within its parent GPU
  Reported<int> gpu_instance_id;       // GI id
  Reported<int> compute_instance_id;   // CI id
  Reported<std::string> profile_name;  // "1g.10gb", "3g.40gb": from `nvidia-smi -L` (the XML does not carry it)
  Reported<std::string> uuid;          // "MIG-..." from `nvidia-smi -L`
  Reported<int> multiprocessor_count;
  MemoryUsage memory;
  std::optional<MemoryUsage> bar1;
};

struct MigInfo {
  Reported<bool> current_enabled;  // N/A on GPUs without MIG support
  Reported<bool> pending_enabled;  // differs from current until the GPU is reset
  std::vector<MigDevice> devices;
};

// vGPU: set on vGPU guests (virtualization mode "VGPU") and hosts ("Host VGPU").
struct VirtualizationInfo {
  Reported<std::string> mode;            // "None", "Pass-Through", "VGPU", "Host VGPU"
  Reported<std::string> host_vgpu_mode;  // "SR-IOV", "Non SR-IOV"
  Reported<std::string> licensed_product_name;
  Reported<std::string> license_status;  // "Licensed (Expiry: 2022-9-22 6:57:30 GMT)"
};

struct Utilization {
  Reported<int> gpu_percent;
  Reported<int> memory_percent;
  Reported<int> encoder_percent;
  Reported<int> decoder_percent;
};

struct Temperature {
  Reported<int> gpu_c;
  Reported<int> memory_c;
  Reported<int> slowdown_threshold_c;  // the GPU slows down above this
  Reported<int> shutdown_threshold_c;  // the GPU shuts down above this
  Reported<int> max_operating_c;       // "GPU Max Operating Temp"
  Reported<int> target_c;
  // Ada and newer (R535+) report thresholds relative to T.Limit instead of absolute values:
  Reported<int> tlimit_margin_c;           // degrees below T.Limit right now ("GPU T.Limit Temp")
  Reported<int> slowdown_tlimit_offset_c;  // e.g. -2: slowdown starts 2 C below T.Limit
  Reported<int> shutdown_tlimit_offset_c;  // e.g. -7
};

// Board power. Old schemas have <power_readings>; R535+ (v12) renamed it <gpu_power_readings>
// (plus <module_power_readings>); R570+ split power_draw into average/instant. draw_w follows
// nvidia-smi's own power.draw: the average where reported, else the instant reading.
struct Power {
  Reported<double> draw_w;
  Reported<double> draw_average_w;
  Reported<double> draw_instant_w;
  Reported<double> limit_w;            // enforced/current limit
  Reported<double> requested_limit_w;  // what was set with -pl (old schemas: power_limit)
  Reported<double> default_limit_w;
  Reported<double> min_limit_w;
  Reported<double> max_limit_w;
};

struct Clocks {
  Reported<int> graphics_mhz;
  Reported<int> sm_mhz;
  Reported<int> memory_mhz;
  Reported<int> video_mhz;
  Reported<int> max_graphics_mhz;
  Reported<int> max_sm_mhz;
  Reported<int> max_memory_mhz;
};

// ECC error counts, summed over the schema's components (single_bit/double_bit totals on
// pre-Ampere schemas; SRAM + DRAM, and SRAM parity + SEC-DED, on newer ones).
struct EccCounts {
  Reported<std::int64_t> corrected;
  Reported<std::int64_t> uncorrected;
};

struct Ecc {
  Reported<bool> enabled;          // current mode
  Reported<bool> pending_enabled;  // mode after the next reset
  EccCounts volatile_counts;       // since the last driver load
  EccCounts aggregate_counts;      // lifetime
};

// Page retirement (pre-Ampere data-center GPUs).
struct RetiredPages {
  Reported<std::int64_t> single_bit_count;
  Reported<std::int64_t> double_bit_count;
  Reported<bool> pending;  // a retirement waits for the next reset
};

// Row remapping (Ampere and newer).
struct RemappedRows {
  Reported<std::int64_t> correctable;
  Reported<std::int64_t> uncorrectable;
  Reported<bool> pending;  // a remap waits for the next reset
  Reported<bool> failure;  // remapping failed: the GPU needs service
};

// The GPU's PCIe link as negotiated now and at most. Idle GPUs lower the generation to save
// power, so only a narrower width (or a lower generation under load) means a degraded link.
struct PcieLink {
  Reported<int> gen_current;
  Reported<int> gen_max;  // the most the GPU and its slot can do together
  Reported<int> width_current;
  Reported<int> width_max;
};

// NVLink fabric registration (Hopper and newer on NVSwitch systems, R535+): "Completed" /
// "Success" once Fabric Manager has set the GPU up; "N/A" elsewhere.
struct FabricInfo {
  Reported<std::string> state;   // "N/A", "Not Started", "In Progress", "Completed"
  Reported<std::string> status;  // "N/A", "Success", or an error
};

struct GpuProcess {
  Reported<std::int64_t> pid;
  Reported<std::string> type;  // "C", "G", "C+G"
  Reported<std::string> name;
  Reported<std::int64_t> used_memory_mib;  // N/A under WDDM and on vGPU guests
  Reported<int> gpu_instance_id;           // MIG only
  Reported<int> compute_instance_id;       // MIG only
};

struct GpuInfo {
  int index = -1;  // nvidia-smi's index (order in a full query, or the N of `-i N`); -1 when unknown
  Reported<std::string> uuid;
  Reported<std::string> product_name;
  Reported<std::string> product_brand;
  Reported<std::string> product_architecture;  // R510+ ("Ampere", "Ada Lovelace")
  Reported<std::string> pci_bus_id;            // as nvidia-smi prints it ("00000000:0B:00.0")
  Reported<std::string> serial;
  Reported<std::string> vbios_version;
  Reported<std::string> compute_capability;  // "8.0": CSV (compute_cap) only
  Reported<std::string> driver_version;      // from the enclosing log; the same for every GPU of a node
  Reported<std::string> cuda_version;
  Reported<int> minor_number;  // /dev/nvidiaN
  Reported<bool> persistence_mode_enabled;
  Reported<std::string> compute_mode;  // "Default", "Exclusive_Process", "Prohibited"
  PcieLink pcie;
  FabricInfo fabric;
  MigInfo mig;
  VirtualizationInfo virtualization;
  MemoryUsage memory;  // framebuffer
  std::optional<MemoryUsage> bar1;
  Utilization utilization;
  Temperature temperature;
  Power power;
  std::optional<Clocks> clocks;
  Ecc ecc;
  RetiredPages retired_pages;
  RemappedRows remapped_rows;
  // Active clocks event (formerly "throttle") reasons, with the schema prefix removed:
  // "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
  // "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown",
  // "display_clocks_setting". Absent when nvidia-smi gave no reasons at all (e.g. "N/A" on vGPU).
  Reported<std::vector<std::string>> clocks_event_reasons;
  Reported<int> fan_speed_percent;
  Reported<std::string> performance_state;  // "P0".."P15"
  std::vector<GpuProcess> processes;
  // Problems nvidia-smi printed next to otherwise good data, e.g.
  // "WARNING: infoROM is corrupted at gpu 0000:0B:00.0".
  std::vector<std::string> warnings;
};

// One run of `nvidia-smi -q -x` (or `-q`, the table, or a CSV query), all GPUs it reported.
struct NvidiaSmiLog {
  Reported<std::string> timestamp;  // as printed, e.g. "Fri Apr 10 10:23:01 2026"
  Reported<std::string> driver_version;
  Reported<std::string> cuda_version;
  Reported<int> attached_gpus;   // what nvidia-smi says is attached (may exceed gpus.size())
  Reported<int> schema_version;  // from the XML DOCTYPE "nvsmi_device_vNN.dtd"
  std::vector<GpuInfo> gpus;
  std::vector<std::string> warnings;  // warnings not tied to one GPU
};

// JSON (camelCase keys; null for values that were not reported; strings are made valid UTF-8).
void to_json(nlohmann::json& j, const MemoryUsage& v);
void to_json(nlohmann::json& j, const MigDevice& v);
void to_json(nlohmann::json& j, const GpuProcess& v);
void to_json(nlohmann::json& j, const GpuInfo& v);
void to_json(nlohmann::json& j, const NvidiaSmiLog& v);

}  // namespace gpuctl::gpu
