// JSON for the GPU model: camelCase keys, units in the key, null for values not reported.
#include <nlohmann/json.hpp>

#include "gpu/util.hpp"
#include "gpuctl/gpu/gpu_info.hpp"

namespace gpuctl::gpu {

namespace {

using nlohmann::json;

template <class T>
json js(const Reported<T>& r) {
  if (!r) return nullptr;
  if constexpr (std::is_same_v<T, std::string>) {
    return detail::sanitize(*r);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    json a = json::array();
    for (const auto& s : *r) a.push_back(detail::sanitize(s));
    return a;
  } else {
    return *r;
  }
}

json strings(const std::vector<std::string>& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(detail::sanitize(s));
  return a;
}

template <class T>
json optional_object(const std::optional<T>& v) {
  if (!v) return nullptr;
  return json(*v);
}

json counts(const EccCounts& c) { return {{"corrected", js(c.corrected)}, {"uncorrected", js(c.uncorrected)}}; }

json clocks_json(const Clocks& c) {
  return {{"graphicsMHz", js(c.graphics_mhz)},
          {"smMHz", js(c.sm_mhz)},
          {"memoryMHz", js(c.memory_mhz)},
          {"videoMHz", js(c.video_mhz)},
          {"maxGraphicsMHz", js(c.max_graphics_mhz)},
          {"maxSmMHz", js(c.max_sm_mhz)},
          {"maxMemoryMHz", js(c.max_memory_mhz)}};
}

}  // namespace

void to_json(json& j, const MemoryUsage& v) {
  j = {{"totalMiB", js(v.total_mib)},
       {"usedMiB", js(v.used_mib)},
       {"freeMiB", js(v.free_mib)},
       {"reservedMiB", js(v.reserved_mib)}};
}

void to_json(json& j, const MigDevice& v) {
  j = {{"index", js(v.index)},
       {"gpuInstanceId", js(v.gpu_instance_id)},
       {"computeInstanceId", js(v.compute_instance_id)},
       {"profileName", js(v.profile_name)},
       {"uuid", js(v.uuid)},
       {"multiprocessorCount", js(v.multiprocessor_count)},
       {"memory", v.memory},
       {"bar1", optional_object(v.bar1)}};
}

void to_json(json& j, const GpuProcess& v) {
  j = {{"pid", js(v.pid)},
       {"type", js(v.type)},
       {"name", js(v.name)},
       {"usedMemoryMiB", js(v.used_memory_mib)},
       {"gpuInstanceId", js(v.gpu_instance_id)},
       {"computeInstanceId", js(v.compute_instance_id)}};
}

void to_json(json& j, const GpuInfo& v) {
  json mig_devices = json::array();
  for (const auto& d : v.mig.devices) mig_devices.push_back(d);
  json processes = json::array();
  for (const auto& p : v.processes) processes.push_back(p);
  j = {
      {"index", v.index >= 0 ? json(v.index) : json(nullptr)},
      {"uuid", js(v.uuid)},
      {"productName", js(v.product_name)},
      {"productBrand", js(v.product_brand)},
      {"productArchitecture", js(v.product_architecture)},
      {"pciBusId", js(v.pci_bus_id)},
      {"serial", js(v.serial)},
      {"vbiosVersion", js(v.vbios_version)},
      {"computeCapability", js(v.compute_capability)},
      {"driverVersion", js(v.driver_version)},
      {"cudaVersion", js(v.cuda_version)},
      {"minorNumber", js(v.minor_number)},
      {"persistenceModeEnabled", js(v.persistence_mode_enabled)},
      {"computeMode", js(v.compute_mode)},
      {"pcie",
       {{"genCurrent", js(v.pcie.gen_current)},
        {"genMax", js(v.pcie.gen_max)},
        {"widthCurrent", js(v.pcie.width_current)},
        {"widthMax", js(v.pcie.width_max)}}},
      {"fabric", {{"state", js(v.fabric.state)}, {"status", js(v.fabric.status)}}},
      {"mig",
       {{"currentEnabled", js(v.mig.current_enabled)},
        {"pendingEnabled", js(v.mig.pending_enabled)},
        {"devices", mig_devices}}},
      {"virtualization",
       {{"mode", js(v.virtualization.mode)},
        {"hostVgpuMode", js(v.virtualization.host_vgpu_mode)},
        {"licensedProductName", js(v.virtualization.licensed_product_name)},
        {"licenseStatus", js(v.virtualization.license_status)}}},
      {"memory", v.memory},
      {"bar1", optional_object(v.bar1)},
      {"utilization",
       {{"gpuPercent", js(v.utilization.gpu_percent)},
        {"memoryPercent", js(v.utilization.memory_percent)},
        {"encoderPercent", js(v.utilization.encoder_percent)},
        {"decoderPercent", js(v.utilization.decoder_percent)}}},
      {"temperature",
       {{"gpuC", js(v.temperature.gpu_c)},
        {"memoryC", js(v.temperature.memory_c)},
        {"slowdownThresholdC", js(v.temperature.slowdown_threshold_c)},
        {"shutdownThresholdC", js(v.temperature.shutdown_threshold_c)},
        {"maxOperatingC", js(v.temperature.max_operating_c)},
        {"targetC", js(v.temperature.target_c)},
        {"tlimitMarginC", js(v.temperature.tlimit_margin_c)},
        {"slowdownTlimitOffsetC", js(v.temperature.slowdown_tlimit_offset_c)},
        {"shutdownTlimitOffsetC", js(v.temperature.shutdown_tlimit_offset_c)}}},
      {"power",
       {{"drawW", js(v.power.draw_w)},
        {"drawAverageW", js(v.power.draw_average_w)},
        {"drawInstantW", js(v.power.draw_instant_w)},
        {"limitW", js(v.power.limit_w)},
        {"requestedLimitW", js(v.power.requested_limit_w)},
        {"defaultLimitW", js(v.power.default_limit_w)},
        {"minLimitW", js(v.power.min_limit_w)},
        {"maxLimitW", js(v.power.max_limit_w)}}},
      {"clocks", v.clocks ? clocks_json(*v.clocks) : json(nullptr)},
      {"ecc",
       {{"enabled", js(v.ecc.enabled)},
        {"pendingEnabled", js(v.ecc.pending_enabled)},
        {"volatile", counts(v.ecc.volatile_counts)},
        {"aggregate", counts(v.ecc.aggregate_counts)}}},
      {"retiredPages",
       {{"singleBitCount", js(v.retired_pages.single_bit_count)},
        {"doubleBitCount", js(v.retired_pages.double_bit_count)},
        {"pending", js(v.retired_pages.pending)}}},
      {"remappedRows",
       {{"correctable", js(v.remapped_rows.correctable)},
        {"uncorrectable", js(v.remapped_rows.uncorrectable)},
        {"pending", js(v.remapped_rows.pending)},
        {"failure", js(v.remapped_rows.failure)}}},
      {"clocksEventReasons", js(v.clocks_event_reasons)},
      {"fanSpeedPercent", js(v.fan_speed_percent)},
      {"performanceState", js(v.performance_state)},
      {"processes", processes},
      {"warnings", strings(v.warnings)},
  };
}

void to_json(json& j, const NvidiaSmiLog& v) {
  json gpus = json::array();
  for (const auto& g : v.gpus) gpus.push_back(g);
  j = {{"timestamp", js(v.timestamp)},          {"driverVersion", js(v.driver_version)},
       {"cudaVersion", js(v.cuda_version)},     {"attachedGpus", js(v.attached_gpus)},
       {"schemaVersion", js(v.schema_version)}, {"gpus", gpus},
       {"warnings", strings(v.warnings)}};
}

}  // namespace gpuctl::gpu
