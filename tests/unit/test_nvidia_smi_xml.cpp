// `nvidia-smi -q -x` across schema versions v10..v13: every file in fixtures/nvidia-smi-xml is
// checked against values read from the file itself. Notes from SOURCES.md are taken into account:
// the v10 file is HAND-TRIMMED (no driver version), several telegraf files carry anonymised
// UUIDs ("GPU-12345678-aaaa-...", the same UUID on both GPUs of the 2x RTX 2080 file) and
// "REDACTED" serials, which is what is asserted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

using namespace gpuctl::gpu;

using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::fixture_path;
using gpuctl::testing::read_file;
using gpuctl::testing::read_fixture;

namespace {

NvidiaSmiLog xml(const std::string& file) {
  auto log = parse_nvidia_smi_xml(read_fixture("nvidia-smi-xml/" + file));
  INFO(file);
  REQUIRE(log.has_value());
  return *log;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

constexpr const char* kMissing = nullptr;

// GPU 0 of each file. Values read from the fixture (see the summary in the report); "kNone"
// means the file says N/A / not supported, or does not have the element.
struct XmlCase {
  const char* file;
  int schema;  // 0: no DOCTYPE
  const char* driver;
  const char* cuda;
  std::size_t gpus;
  const char* uuid;
  const char* product;
  const char* bus_id;
  long long mem_total, mem_used, mem_free;
  int temp_c;
  double draw_w, limit_w;  // < 0: not reported
  int ecc;                 // -1 not reported, 0 disabled, 1 enabled
  int fan;                 // -1 not reported
  const char* pstate;
  std::size_t processes;
  const char* reasons;  // active clocks event reasons, comma-joined; nullptr: not reported
};

const XmlCase kCases[] = {
    {"datakit__gtx-1050__515.65.01__no-xml-decl.xml", 0, "515.65.01", "11.7", 1,
     "GPU-06e04616-0ed5-4069-5ebc-345349a0d4f3", "NVIDIA GeForce GTX 1050", "00000000:01:00.0", 4096, 65, 3974, 44, -1,
     -1, -1, -1, "P3", 2, "gpu_idle"},
    {"datakit__tesla-v100-pcie-32gb__460.39__v11.xml", 11, "460.39", "11.2", 1,
     "GPU-e77ce5d8-8b63-c936-3c1b-839d45bcd0f2", "Tesla V100-PCIE-32GB", "00000000:21:01.0", 32510, 12311, 20199, 66,
     170.16, 250.0, 1, -1, "P0", 4, ""},
    {"netdata__a100-sxm4-40gb-mig__510.47.03__v11.xml", 11, "510.47.03", "11.6", 1,
     "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a", "NVIDIA A100-SXM4-40GB", "00000000:00:04.0", 40960, 38, 40315, 36,
     66.92, 400.0, 1, -1, "P0", 0, ""},
    {"netdata__rtx-2080-windows__516.59__v11.xml", 11, "516.59", "11.7", 1, "GPU-fbd55ed4-1eec-4423-0a47-ad594b4333e3",
     "NVIDIA GeForce RTX 2080", "00000000:0A:00.0", 8192, 862, 7147, 29, 14.50, 275.0, -1, 37, "P8", 26, "gpu_idle"},
    {"netdata__rtx-3060-laptop__515.65.01__v11.xml", 11, "515.65.01", "11.7", 1,
     "GPU-473d8d0f-d462-185c-6b36-6fc23e23e571", "NVIDIA GeForce RTX 3060 Laptop GPU", "00000000:01:00.0", 6144, 5,
     5940, 45, 8.70, -1, -1, -1, "P8", 1, "gpu_idle"},
    {"netdata__rtx-4090__535.86.05__v12.xml", 12, "535.86.05", "12.2", 1, "GPU-71d1acc2-662d-2166-bf9f-65272d2fc437",
     "NVIDIA GeForce RTX 4090", "00000000:84:00.0", 24564, 2, 24214, 40, 26.84, 450.0, 0, 0, "P8", 0, "gpu_idle"},
    {"netdata__tesla-p100-pcie-16gb__510.47.03__v11.xml", 11, "510.47.03", "11.6", 1,
     "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e", "Tesla P100-PCIE-16GB", "00000000:00:04.0", 16384, 0, 16280, 38, 26.16,
     250.0, 1, -1, "P0", 0, "gpu_idle"},
    {"telegraf__2x-rtx-2070__590.44.01__v13.xml", 13, "590.44.01", "13.1", 2,
     "GPU-12345678-aaaa-bbbb-cccc-0123456789ab", "NVIDIA GeForce RTX 2070", "00000000:01:00.0", 8192, 1, 7786, 14, 9.23,
     175.0, -1, 35, "P8", 0, "gpu_idle"},
    {"telegraf__2x-rtx-2080__590.44.01__v13.xml", 13, "590.44.01", "13.1", 2,
     "GPU-12345678-aaaa-bbbb-cccc-0123456789ab", "NVIDIA GeForce RTX 2080", "00000000:01:00.0", 8192, 1, 7786, 15, 1.00,
     215.0, -1, 31, "P8", 0, "gpu_idle"},
    {"telegraf__a10g__515.105.01__v11.xml", 11, "515.105.01", "11.7", 1, "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94",
     "NVIDIA A10G", "00000000:00:1E.0", 23028, 22, 22569, 17, 25.58, 300.0, 1, 0, "P8", 1, "gpu_idle"},
    {"telegraf__grid-p4-1q-vgpu__513.46__v11.xml", 11, "513.46", "11.6", 1, "GPU-1b1ea7c7-1c4b-ed49-1c72-26c65f2dd207",
     "GRID P4-1Q", "00000000:00:0B.0", 1024, 807, 106, 0, -1, -1, -1, -1, "P8", 13, kMissing},
    {"telegraf__gt-1030__470.74__v11.xml", 11, "470.74", "11.4", 1, "GPU-857c6374-f681-cf3a-f99f-9063a87b8ac0",
     "NVIDIA GeForce GT 1030", "00000000:2D:00.0", 1998, 875, 1123, 36, -1, 30.0, -1, 35, "P0", 10, "gpu_idle"},
    {"telegraf__gtx-1070-ti__trimmed__v10.xml", 10, kMissing, kMissing, 1, "GPU-f9ba66fc-a7f5-94c5-da19-019ef2f9c665",
     "GeForce GTX 1070 Ti", "00000000:01:00.0", 4096, 42, 4054, 39, -1, -1, -1, 100, "P8", 0, kMissing},
    {"telegraf__gtx-1660-ti-graphics-device__418.43.xml", 0, "418.43", "10.1", 1,
     "GPU-304a277d-3545-63b8-3a36-dfde3c992989", "Graphics Device", "00000000:43:00.0", 5912, 0, 5912, 40, 8.93, 130.0,
     -1, 0, "P8", 0, "gpu_idle"},
    {"telegraf__quadro-p2000__525.125.06__v12.xml", 12, "525.125.06", "12.0", 1,
     "GPU-396caaed-39ca-3199-2e68-717cdb786ec6", "Quadro P2000", "00000000:17:00.0", 5120, 1, 5051, 34, 4.61, 75.0, -1,
     46, "P8", 0, "gpu_idle"},
    {"telegraf__quadro-p400__418.43.xml", 0, "418.43", "10.1", 1, "GPU-8f750be4-dfbc-23b9-b33f-da729a536494",
     "Quadro P400", "00000000:43:00.0", 1998, 0, 1998, 33, -1, -1, -1, 34, "P8", 0, "gpu_idle"},
    {"telegraf__rtx-3060__570.124.04__v12.xml", 12, "570.124.04", "12.8", 1, "GPU-d6889ff6-2523-9142-ca3c-1ca3f396a625",
     "NVIDIA GeForce RTX 3060", "00000000:2D:00.0", 12288, 116, 11806, 42, 11.60, 170.0, -1, 0, "P8", 0, "gpu_idle"},
    {"telegraf__rtx-3080-windows__536.40__v12.xml", 12, "536.40", "12.2", 1, "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4",
     "NVIDIA GeForce RTX 3080", "00000000:04:00.0", 10240, 1128, 8938, 31, 22.78, 336.0, -1, 0, "P8", 5, "gpu_idle"},
    {"telegraf__rtx-3080__595.58.03__v13.xml", 13, "595.58.03", "13.2", 1, "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4",
     "NVIDIA GeForce RTX 3080", "00000000:0C:00.0", 10240, 9184, 660, 27, 139.62, 320.0, -1, 0, "P2", 0, ""},
    {"telegraf__rtx-3090__525.147.05__v12.xml", 12, "525.147.05", "12.0", 1, "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
     "NVIDIA GeForce RTX 3090", "00000000:00:10.0", 24576, 1, 24258, 37, 27.23, 200.0, -1, 0, "P8", 0, "gpu_idle"},
    {"telegraf__rtx-3090__590.44.01__v13.xml", 13, "590.44.01", "13.1", 1, "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
     "NVIDIA GeForce RTX 3090", "00000000:09:00.0", 24576, 7, 24120, 32, 35.06, 350.0, -1, 0, "P8", 0, "sw_power_cap"},
    {"telegraf__rtx-4000-sff-ada__595.84__v13.xml", 13, "595.84", "13.2", 1, "GPU-37037c3f-65c8-ec4d-24a9-420204ad8026",
     "NVIDIA RTX 4000 SFF Ada Generation", "00000000:06:00.0", 20475, 3534, 16482, 38, 8.81, 70.0, 0, 30, "P8", 4,
     "gpu_idle"},
    {"telegraf__tesla-t4__512.78__v11.xml", 11, "512.78", "11.6", 1, "GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124",
     "Tesla T4", "00000000:01:00.0", 15360, 276, 14882, 31, 13.08, 70.0, 1, -1, "P8", 15, "gpu_idle"},
    {"telegraf__tesla-t4__515.105.01__v11.xml", 11, "515.105.01", "11.7", 1, "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
     "Tesla T4", "00000000:00:1E.0", 15360, 1032, 13939, 40, 26.78, 70.0, 1, -1, "P0", 2, ""},
    {"vertex__gtx-1070-ti__470.82.00__v11-full.xml", 11, "470.82.00", "11.4", 1,
     "GPU-0a6f6ce9-a8af-8c8c-b329-c5338f155fb1", "NVIDIA GeForce GTX 1070 Ti", "00000000:09:00.0", 8116, 1027, 7089, 39,
     17.22, 180.0, -1, 0, "P8", 4, "gpu_idle"},
};

}  // namespace

TEST_CASE("gpu::parse_nvidia_smi_xml reads every fixture, schema v10..v13", "[nvidia-smi]") {
  for (const XmlCase& c : kCases) {
    SECTION(c.file) {
      NvidiaSmiLog log = xml(c.file);
      if (c.schema == 0) {
        CHECK_FALSE(log.schema_version.has_value());
      } else {
        CHECK(log.schema_version == c.schema);
      }
      if (c.driver) {
        CHECK(log.driver_version == std::string(c.driver));
        CHECK(log.cuda_version == std::string(c.cuda));
        CHECK(log.attached_gpus == static_cast<int>(c.gpus));
      } else {
        CHECK(log.driver_version.absence() == Absence::missing);
      }
      REQUIRE(log.gpus.size() == c.gpus);
      const GpuInfo& g = log.gpus[0];
      CHECK(g.index == 0);
      CHECK(g.uuid == std::string(c.uuid));
      CHECK(g.product_name == std::string(c.product));
      CHECK(g.pci_bus_id == std::string(c.bus_id));
      CHECK(g.driver_version.optional() == log.driver_version.optional());
      CHECK(g.memory.total_mib == c.mem_total);
      CHECK(g.memory.used_mib == c.mem_used);
      CHECK(g.memory.free_mib == c.mem_free);
      CHECK(g.temperature.gpu_c == c.temp_c);
      if (c.draw_w < 0) {
        CHECK_FALSE(g.power.draw_w.has_value());
      } else {
        REQUIRE(g.power.draw_w.has_value());
        CHECK(*g.power.draw_w == Approx(c.draw_w));
      }
      if (c.limit_w < 0) {
        CHECK_FALSE(g.power.limit_w.has_value());
      } else {
        REQUIRE(g.power.limit_w.has_value());
        CHECK(*g.power.limit_w == Approx(c.limit_w));
      }
      if (c.ecc < 0) {
        CHECK_FALSE(g.ecc.enabled.has_value());
      } else {
        CHECK(g.ecc.enabled == (c.ecc == 1));
      }
      if (c.fan < 0) {
        CHECK_FALSE(g.fan_speed_percent.has_value());
      } else {
        CHECK(g.fan_speed_percent == c.fan);
      }
      CHECK(g.performance_state == std::string(c.pstate));
      CHECK(g.processes.size() == c.processes);
      if (c.reasons) {
        REQUIRE(g.clocks_event_reasons.has_value());
        CHECK(joined(*g.clocks_event_reasons) == c.reasons);
      } else {
        CHECK_FALSE(g.clocks_event_reasons.has_value());
      }
    }
  }
}

TEST_CASE("gpu::parse_nvidia_smi_xml fixture list is complete", "[nvidia-smi]") {
  std::set<std::string> covered;
  for (const XmlCase& c : kCases) covered.insert(c.file);
  for (const auto& e : std::filesystem::directory_iterator(fixture_path("nvidia-smi-xml"))) {
    INFO(e.path().filename().string());
    CHECK(covered.count(e.path().filename().string()) == 1);
  }
}

TEST_CASE("gpu::parse_nvidia_smi_xml: MIG devices (A100, v11)", "[nvidia-smi]") {
  NvidiaSmiLog log = xml("netdata__a100-sxm4-40gb-mig__510.47.03__v11.xml");
  const GpuInfo& g = log.gpus.at(0);
  CHECK(g.mig.current_enabled == true);
  CHECK(g.mig.pending_enabled == true);
  REQUIRE(g.mig.devices.size() == 2);
  const MigDevice& d0 = g.mig.devices[0];
  CHECK(d0.index == 0);
  CHECK(d0.gpu_instance_id == 1);
  CHECK(d0.compute_instance_id == 0);
  CHECK(d0.multiprocessor_count == 42);
  CHECK(d0.memory.total_mib == 19968);
  CHECK(d0.memory.used_mib == 19);
  CHECK(d0.memory.free_mib == 19948);
  CHECK(d0.memory.reserved_mib == 0);
  REQUIRE(d0.bar1.has_value());
  CHECK(d0.bar1->total_mib == 32767);
  CHECK(g.mig.devices[1].index == 1);
  CHECK(g.mig.devices[1].gpu_instance_id == 2);
  // The XML has no profile names: they come from `nvidia-smi -L` (see merge_gpu_list).
  CHECK(d0.profile_name.absence() == Absence::missing);
  // Under MIG the whole-GPU utilization is N/A.
  CHECK(g.utilization.gpu_percent.absence() == Absence::not_available);
  CHECK(g.serial == std::string("1324321002473"));
  CHECK(g.vbios_version == std::string("92.00.45.00.03"));
  CHECK(g.product_brand == std::string("NVIDIA"));
  CHECK(g.product_architecture == std::string("Ampere"));
  CHECK(g.persistence_mode_enabled == false);
  CHECK(g.virtualization.mode == std::string("Pass-Through"));
  CHECK(g.temperature.memory_c == 44);
  CHECK(g.temperature.slowdown_threshold_c == 89);
  CHECK(g.temperature.shutdown_threshold_c == 92);
  CHECK(g.temperature.max_operating_c == 85);
  // ECC (SRAM/DRAM schema): aggregate 0, volatile N/A.
  CHECK(g.ecc.aggregate_counts.corrected == 0);
  CHECK(g.ecc.aggregate_counts.uncorrected == 0);
  CHECK(g.ecc.volatile_counts.corrected.absence() == Absence::not_available);
  // <remapped_rows>N/A</remapped_rows>: every field is N/A, not "missing".
  CHECK(g.remapped_rows.pending.absence() == Absence::not_available);
  CHECK(g.remapped_rows.uncorrectable.absence() == Absence::not_available);
  CHECK(g.retired_pages.double_bit_count.absence() == Absence::not_available);
  REQUIRE(g.clocks.has_value());
  CHECK(g.clocks->graphics_mhz == 1410);
  CHECK(g.clocks->memory_mhz == 1215);
  CHECK(g.clocks->max_graphics_mhz == 1410);
  CHECK(g.clocks->video_mhz == 1275);
  REQUIRE(g.bar1.has_value());
  CHECK(g.bar1->total_mib == 65536);
  CHECK(g.memory.reserved_mib == 605);
}

TEST_CASE("gpu::parse_nvidia_smi_xml: pre-Ampere ECC, retired pages and processes (V100)", "[nvidia-smi]") {
  const GpuInfo g = xml("datakit__tesla-v100-pcie-32gb__460.39__v11.xml").gpus.at(0);
  // single_bit/double_bit schema: corrected = single_bit/total, uncorrected = double_bit/total.
  CHECK(g.ecc.volatile_counts.corrected == 0);
  CHECK(g.ecc.volatile_counts.uncorrected == 0);
  CHECK(g.ecc.aggregate_counts.corrected == 0);
  CHECK(g.ecc.aggregate_counts.uncorrected == 0);
  CHECK(g.retired_pages.single_bit_count == 0);
  CHECK(g.retired_pages.double_bit_count == 0);
  CHECK(g.retired_pages.pending == false);
  CHECK(g.serial == std::string("0324418086185"));
  CHECK(g.product_architecture.absence() == Absence::missing);  // R460 has no product_architecture
  REQUIRE(g.processes.size() == 4);
  CHECK(g.processes[0].pid == 4027538);
  CHECK(g.processes[0].name == std::string("mtopen-plugin:worker"));
  CHECK(g.processes[0].type == std::string("C"));
  CHECK(g.processes[0].used_memory_mib == 3214);
  CHECK(g.processes[0].gpu_instance_id.absence() == Absence::not_available);
  CHECK(g.processes[1].used_memory_mib == 3288);
  CHECK(g.utilization.gpu_percent == 91);
  CHECK(g.utilization.memory_percent == 47);
  CHECK(g.clocks_event_reasons->empty());
}

TEST_CASE("gpu::parse_nvidia_smi_xml: vGPU guest (GRID P4-1Q) and vGPU license on a T4", "[nvidia-smi]") {
  const GpuInfo g = xml("telegraf__grid-p4-1q-vgpu__513.46__v11.xml").gpus.at(0);
  CHECK(g.virtualization.mode == std::string("VGPU"));
  CHECK(g.virtualization.host_vgpu_mode.absence() == Absence::not_available);
  CHECK(g.virtualization.licensed_product_name == std::string("NVIDIA RTX Virtual Workstation"));
  CHECK(g.virtualization.license_status == std::string("Licensed (Expiry: 2022-9-22 6:57:30 GMT)"));
  CHECK(g.product_brand == std::string("NVIDIA RTX Virtual Workstation"));
  // <clocks_throttle_reasons>N/A</clocks_throttle_reasons>
  CHECK(g.clocks_event_reasons.absence() == Absence::not_available);
  CHECK(g.minor_number.absence() == Absence::not_available);
  CHECK(g.persistence_mode_enabled.absence() == Absence::not_available);
  REQUIRE(g.processes.size() == 13);
  CHECK(g.processes[0].pid == 1188);
  CHECK(g.processes[0].type == std::string("C+G"));
  CHECK(g.processes[0].name.absence() == Absence::not_available);  // empty <process_name>
  CHECK(g.processes[0].used_memory_mib.absence() == Absence::not_available);

  const GpuInfo t4 = xml("telegraf__tesla-t4__512.78__v11.xml").gpus.at(0);
  CHECK(t4.virtualization.mode == std::string("None"));
  CHECK(t4.virtualization.licensed_product_name == std::string("NVIDIA Virtual Applications"));
  CHECK(t4.virtualization.license_status == std::string("Licensed (Expiry: N/A)"));
  CHECK(t4.ecc.aggregate_counts.uncorrected == 0);
}

TEST_CASE("gpu::parse_nvidia_smi_xml: v12 power rename and T.Limit temperatures (RTX 4090, R535)", "[nvidia-smi]") {
  const GpuInfo g = xml("netdata__rtx-4090__535.86.05__v12.xml").gpus.at(0);
  // <gpu_power_readings><power_draw>: no average/instant split yet.
  CHECK(*g.power.draw_w == Approx(26.84));
  CHECK(g.power.draw_average_w.absence() == Absence::missing);
  CHECK(*g.power.requested_limit_w == Approx(450.0));
  CHECK(*g.power.min_limit_w == Approx(10.0));
  CHECK(*g.power.max_limit_w == Approx(600.0));
  // Ada: thresholds relative to T.Limit, no absolute slowdown/shutdown thresholds.
  CHECK(g.temperature.tlimit_margin_c == 43);
  CHECK(g.temperature.slowdown_tlimit_offset_c == -2);
  CHECK(g.temperature.shutdown_tlimit_offset_c == -7);
  CHECK(g.temperature.slowdown_threshold_c.absence() == Absence::missing);
  CHECK(g.temperature.target_c == 84);
  CHECK(g.ecc.enabled == false);
  CHECK(g.remapped_rows.correctable == 0);
  CHECK(g.remapped_rows.uncorrectable == 0);
  CHECK(g.remapped_rows.pending == false);
  CHECK(g.remapped_rows.failure == false);
  CHECK(g.product_architecture == std::string("Ada Lovelace"));
  CHECK(g.persistence_mode_enabled == true);
}

TEST_CASE("gpu::parse_nvidia_smi_xml: v13 (R590/R595) average/instant power, ECC parity/SEC-DED", "[nvidia-smi]") {
  const GpuInfo g = xml("telegraf__rtx-3080__595.58.03__v13.xml").gpus.at(0);
  CHECK(*g.power.draw_w == Approx(139.62));
  CHECK(*g.power.draw_average_w == Approx(139.62));
  CHECK(*g.power.draw_instant_w == Approx(142.33));
  CHECK(*g.power.requested_limit_w == Approx(320.0));
  CHECK(*g.power.default_limit_w == Approx(320.0));
  CHECK(*g.power.min_limit_w == Approx(100.0));
  CHECK(*g.power.max_limit_w == Approx(336.0));
  CHECK(g.serial == std::string("REDACTED"));  // redacted in the source
  CHECK(g.persistence_mode_enabled == false);
  CHECK(g.memory.reserved_mib == 397);
  REQUIRE(g.bar1.has_value());
  CHECK(g.bar1->used_mib == 9218);
  CHECK(g.utilization.gpu_percent == 65);
  CHECK(g.utilization.memory_percent == 9);
  CHECK(g.ecc.volatile_counts.corrected.absence() == Absence::not_available);
  CHECK(g.ecc.aggregate_counts.uncorrected.absence() == Absence::not_available);
  CHECK(g.remapped_rows.failure.absence() == Absence::not_available);
  REQUIRE(g.clocks.has_value());
  CHECK(g.clocks->graphics_mhz == 1950);
  CHECK(g.clocks->sm_mhz == 1950);
  CHECK(g.clocks->memory_mhz == 9251);
  CHECK(g.clocks->video_mhz == 1710);
  CHECK(g.clocks->max_memory_mhz == 9501);
  CHECK(g.temperature.slowdown_threshold_c == 95);
  CHECK(g.temperature.shutdown_threshold_c == 98);
  CHECK(g.temperature.tlimit_margin_c.absence() == Absence::not_available);
  CHECK(g.mig.current_enabled.absence() == Absence::not_available);
  CHECK(g.mig.devices.empty());  // <mig_devices>None</mig_devices>

  // R570 v12 has the average/instant split too (and no power_draw).
  const GpuInfo r570 = xml("telegraf__rtx-3060__570.124.04__v12.xml").gpus.at(0);
  CHECK(*r570.power.draw_w == Approx(11.60));
  CHECK(*r570.power.draw_instant_w == Approx(11.63));

  // average N/A: draw falls back to the instant reading, as nvidia-smi's power.draw does.
  NvidiaSmiLog two = xml("telegraf__2x-rtx-2070__590.44.01__v13.xml");
  CHECK(two.gpus[0].power.draw_average_w.absence() == Absence::not_available);
  CHECK(*two.gpus[0].power.draw_w == Approx(9.23));
  const GpuInfo& second = two.gpus.at(1);
  CHECK(second.index == 1);
  CHECK(second.uuid == std::string("GPU-12345678-aaaa-bbbb-cccc-0123456789cd"));
  CHECK(second.pci_bus_id == std::string("00000000:02:00.0"));
  CHECK(second.minor_number == 1);
  CHECK(second.temperature.gpu_c == 13);
  CHECK(second.fan_speed_percent == 34);
  CHECK(*second.power.draw_w == Approx(11.82));

  // The 2x RTX 2080 capture was anonymised with the same UUID on both GPUs.
  NvidiaSmiLog dup = xml("telegraf__2x-rtx-2080__590.44.01__v13.xml");
  CHECK(dup.gpus[1].uuid == std::string("GPU-12345678-aaaa-bbbb-cccc-0123456789ab"));
  CHECK(dup.gpus[1].pci_bus_id == std::string("00000000:02:00.0"));
  CHECK(*dup.gpus[1].power.draw_w == Approx(1.62));
  CHECK(dup.gpus[1].fan_speed_percent == 32);
}

TEST_CASE("gpu::parse_nvidia_smi_xml: v13 remapped rows, processes (RTX 4000 SFF Ada)", "[nvidia-smi]") {
  const GpuInfo g = xml("telegraf__rtx-4000-sff-ada__595.84__v13.xml").gpus.at(0);
  CHECK(g.remapped_rows.correctable == 0);
  CHECK(g.remapped_rows.pending == false);
  CHECK(g.temperature.tlimit_margin_c == 49);
  REQUIRE(g.processes.size() == 4);
  CHECK(g.processes[0].name == std::string("cosmic-comp"));
  CHECK(g.processes[2].pid == 4937);
  CHECK(g.processes[2].name == std::string("python"));
  CHECK(g.processes[2].type == std::string("C"));
  CHECK(g.processes[2].used_memory_mib == 160);
  CHECK(g.product_brand == std::string("NVIDIA RTX"));
}

TEST_CASE("gpu::parse_nvidia_smi_xml: the hand-trimmed v10 file reports what it has", "[nvidia-smi]") {
  NvidiaSmiLog log = xml("telegraf__gtx-1070-ti__trimmed__v10.xml");
  const GpuInfo& g = log.gpus.at(0);
  // HAND-TRIMMED: no driver version, no serial, no pci_bus_id element (the <gpu id> gives it).
  CHECK(log.attached_gpus.absence() == Absence::missing);
  CHECK(g.serial.absence() == Absence::missing);
  CHECK(g.pci_bus_id == std::string("00000000:01:00.0"));
  CHECK(g.power.draw_w.absence() == Absence::not_available);
  CHECK(g.power.limit_w.absence() == Absence::missing);
  CHECK(g.ecc.enabled.absence() == Absence::missing);
  CHECK_FALSE(g.bar1.has_value());
  CHECK(g.compute_mode == std::string("Default"));
  REQUIRE(g.clocks.has_value());
  CHECK(g.clocks->graphics_mhz == 135);
  CHECK(g.clocks->max_graphics_mhz.absence() == Absence::missing);
}

TEST_CASE("gpu::parse_nvidia_smi_xml: Windows (WDDM) processes without memory", "[nvidia-smi]") {
  const GpuInfo g = xml("netdata__rtx-2080-windows__516.59__v11.xml").gpus.at(0);
  REQUIRE(g.processes.size() == 26);
  CHECK(g.processes[0].pid == 7724);
  CHECK(g.processes[0].type == std::string("C+G"));
  CHECK(g.processes[0].used_memory_mib.absence() == Absence::not_available);
  CHECK(g.processes[1].name.absence() == Absence::not_available);
  CHECK(g.minor_number.absence() == Absence::not_available);
  CHECK(g.persistence_mode_enabled.absence() == Absence::not_available);

  const GpuInfo gtx1050 = xml("datakit__gtx-1050__515.65.01__no-xml-decl.xml").gpus.at(0);
  CHECK(gtx1050.processes.at(1).name == std::string("/snap/firefox/1775/usr/lib/firefox/firefox"));
  CHECK(gtx1050.processes.at(0).used_memory_mib == 61);
  CHECK(gtx1050.persistence_mode_enabled == true);
}

TEST_CASE("gpu::parse_nvidia_smi_xml rejects what is not a usable document", "[nvidia-smi]") {
  std::string full = read_fixture("nvidia-smi-xml/telegraf__tesla-t4__515.105.01__v11.xml");
  SECTION("cut off") {
    auto r = parse_nvidia_smi_xml(std::string_view(full).substr(0, full.size() / 2));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == gpuctl::Errc::parse);
    CHECK(r.error().message.find("cut off") != std::string::npos);
  }
  SECTION("garbage") {
    auto r = parse_nvidia_smi_xml("\x01\x02 this is not xml \xff");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == gpuctl::Errc::parse);
  }
  SECTION("malformed inside") {
    std::string broken = full;
    broken.replace(broken.find("<fan_speed>"), 11, "<fan_speed <");
    auto r = parse_nvidia_smi_xml(broken);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("not well-formed") != std::string::npos);
  }
  SECTION("empty document") { CHECK_FALSE(parse_nvidia_smi_xml("<nvidia_smi_log></nvidia_smi_log>")); }
  SECTION("a warning after the document is attached to the GPU it names") {
    std::string with_warning = full + "WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n";
    auto r = parse_nvidia_smi_xml(with_warning);
    REQUIRE(r);
    REQUIRE(r->gpus.at(0).warnings.size() == 1);
    CHECK(r->gpus[0].warnings[0] == "WARNING: infoROM is corrupted at gpu 0000:00:1E.0");
    CHECK(r->warnings.empty());
  }
}

TEST_CASE("gpu::to_json(GpuInfo): camelCase, units in keys, null when not reported", "[nvidia-smi]") {
  const GpuInfo g = xml("telegraf__rtx-3080__595.58.03__v13.xml").gpus.at(0);
  nlohmann::json j = g;
  CHECK(j["index"] == 0);
  CHECK(j["uuid"] == "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4");
  CHECK(j["productName"] == "NVIDIA GeForce RTX 3080");
  CHECK(j["pciBusId"] == "00000000:0C:00.0");
  CHECK(j["driverVersion"] == "595.58.03");
  CHECK(j["cudaVersion"] == "13.2");
  CHECK(j["memory"]["totalMiB"] == 10240);
  CHECK(j["bar1"]["totalMiB"] == 16384);
  CHECK(j["power"]["drawW"].get<double>() == Approx(139.62));
  CHECK(j["temperature"]["gpuC"] == 27);
  CHECK(j["temperature"]["tlimitMarginC"].is_null());
  CHECK(j["ecc"]["enabled"].is_null());
  CHECK(j["ecc"]["volatile"]["uncorrected"].is_null());
  CHECK(j["mig"]["currentEnabled"].is_null());
  CHECK(j["mig"]["devices"].empty());
  CHECK(j["clocks"]["graphicsMHz"] == 1950);
  CHECK(j["clocksEventReasons"] == nlohmann::json::array());
  CHECK(j["fanSpeedPercent"] == 0);
  CHECK(j["persistenceModeEnabled"] == false);
  CHECK(j["processes"].is_array());

  const GpuInfo mig = xml("netdata__a100-sxm4-40gb-mig__510.47.03__v11.xml").gpus.at(0);
  nlohmann::json m = mig;
  CHECK(m["mig"]["currentEnabled"] == true);
  CHECK(m["mig"]["devices"][0]["gpuInstanceId"] == 1);
  CHECK(m["mig"]["devices"][0]["memory"]["totalMiB"] == 19968);
  CHECK(m["mig"]["devices"][0]["profileName"].is_null());

  const GpuInfo vgpu = xml("telegraf__grid-p4-1q-vgpu__513.46__v11.xml").gpus.at(0);
  nlohmann::json v = vgpu;
  CHECK(v["clocksEventReasons"].is_null());
  CHECK(v["virtualization"]["mode"] == "VGPU");
  CHECK(v["clocks"].is_object());

  NvidiaSmiLog log = xml("telegraf__2x-rtx-2070__590.44.01__v13.xml");
  nlohmann::json l = log;
  CHECK(l["schemaVersion"] == 13);
  CHECK(l["gpus"].size() == 2);
  CHECK(l["attachedGpus"] == 2);
  CHECK_NOTHROW(l.dump());
}

TEST_CASE("gpu::parse_text/parse_integer/parse_number/parse_flag", "[nvidia-smi]") {
  CHECK(parse_integer("10240 MiB", "MiB") == 10240);
  CHECK(parse_integer("10240", "MiB") == 10240);
  CHECK(parse_integer("-7 C", "C") == -7);
  CHECK(parse_integer("0x0000000000000004") == 4);
  CHECK(parse_integer("10 GiB", "MiB").absence() == Absence::invalid);
  CHECK(parse_integer("1.5 MiB", "MiB").absence() == Absence::invalid);
  CHECK(parse_integer("[N/A]").absence() == Absence::not_available);
  CHECK(parse_integer("N/A").absence() == Absence::not_available);
  CHECK(parse_integer("[Not Supported]").absence() == Absence::not_supported);
  CHECK(parse_integer("[Unknown Error]").absence() == Absence::error);
  CHECK(parse_integer("[GPU is lost]").absence() == Absence::error);
  CHECK(parse_integer("ERR!").absence() == Absence::error);
  CHECK(parse_text("Requested functionality has been deprecated").absence() == Absence::deprecated);
  CHECK(parse_text("[Requested functionality has been deprecated]").absence() == Absence::deprecated);
  CHECK(parse_text("Not available in WDDM driver model").absence() == Absence::not_available);
  CHECK(parse_text("  Tesla T4 ") == std::string("Tesla T4"));
  CHECK(*parse_number("139.62 W", "W") == Approx(139.62));
  CHECK(*parse_number("32.70", "W") == Approx(32.70));
  CHECK(parse_number("12 MHz", "W").absence() == Absence::invalid);
  CHECK(parse_flag("Enabled") == true);
  CHECK(parse_flag("Not Active") == false);
  CHECK(parse_flag("Active") == true);
  CHECK(parse_flag("maybe").absence() == Absence::invalid);
  CHECK(canonical_pci_bus_id("00000000:0B:00.0") == std::string("0000:0B:00.0"));
  CHECK(canonical_pci_bus_id("0000:0b:00.0") == std::string("0000:0B:00.0"));
  CHECK(canonical_pci_bus_id("PCI:0000:38:00") == std::string("0000:38:00.0"));
  CHECK(canonical_pci_bus_id("00000001:00:00.0") == std::string("0001:00:00.0"));
  CHECK(canonical_pci_bus_id("100000000:00:00.0") == std::nullopt);
  CHECK(canonical_pci_bus_id("GPU-1234") == std::nullopt);
}
