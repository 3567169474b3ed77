// The text forms: `nvidia-smi -L` (with MIG lines), `nvidia-smi -q` and the default table, from
// fixtures/nvidia-smi-text. Notes from SOURCES.md: the gpud-mock "HAND-EDITED" file only flips
// HW Slowdown / HW Power Brake Slowdown to Active; the gpud "truncated-invalid" file is cut on
// purpose; the -d MEMORY Windows paste is truncated; nvidia_gpu_exporter identifiers are masked.
// nvlink/topo/dmon/pmon/--version/--help captures are not parsed by gpuctl (not needed for the
// GPU model); the full multi-section captures repeat the per-section files that are tested.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

using namespace gpuctl::gpu;

using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::fixture_path;
using gpuctl::testing::read_file;
using gpuctl::testing::read_fixture;

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

NvidiaSmiLog query_text(const std::string& rel) {
  INFO(rel);
  auto r = parse_nvidia_smi_query_text(read_fixture("nvidia-smi-text/" + rel));
  REQUIRE(r.has_value());
  return *r;
}

NvidiaSmiLog table(const std::string& rel) {
  INFO(rel);
  auto r = parse_nvidia_smi_table(read_fixture(rel));
  REQUIRE(r.has_value());
  return *r;
}

const std::string kMasked = "GPU-00000000-0000-0000-0000-000000000000";
const std::string kSections = "nvidia_gpu_exporter-sections/";

}  // namespace

// --- -L ---

TEST_CASE("gpu::parse_nvidia_smi_list: H100 with 7 MIG devices (CRLF)", "[nvidia-smi]") {
  GpuList l = parse_nvidia_smi_list(read_fixture("nvidia-smi-text/nvidia-docs__nvidia-smi-L__h100-mig-7x1g.10gb.txt"));
  REQUIRE(l.gpus.size() == 1);
  CHECK(l.other_lines.empty());
  const ListedGpu& g = l.gpus[0];
  CHECK(g.index == 0);
  CHECK(g.name == "NVIDIA H100 80GB HBM3");
  CHECK(g.uuid == std::string("GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4"));
  REQUIRE(g.mig_devices.size() == 7);
  for (std::size_t i = 0; i < 7; ++i) {
    CHECK(g.mig_devices[i].device_index == static_cast<int>(i));
    CHECK(g.mig_devices[i].profile_name == std::string("1g.10gb"));
  }
  CHECK(g.mig_devices[0].uuid == std::string("MIG-3f6f389f-b0cc-5e5c-8e32-eaa8fd067902"));
  CHECK(g.mig_devices[6].uuid == std::string("MIG-981c86e9-3607-57d7-9426-295347e4b925"));
  CHECK(g.mig_devices[6].gpu_instance_id.absence() == Absence::missing);  // R470+ UUIDs carry no ids
}

TEST_CASE("gpu::parse_nvidia_smi_list: mixed MIG profiles", "[nvidia-smi]") {
  GpuList l = parse_nvidia_smi_list(read_fixture("nvidia-smi-text/nvidia-docs__nvidia-smi-L__h100-mig-mixed.txt"));
  REQUIRE(l.gpus.size() == 1);
  REQUIRE(l.gpus[0].mig_devices.size() == 4);
  std::vector<std::string> profiles;
  for (const auto& m : l.gpus[0].mig_devices) profiles.push_back(*m.profile_name);
  CHECK(joined(profiles) == "3g.40gb,2g.20gb,1g.10gb,1g.10gb");
  CHECK(l.gpus[0].mig_devices[1].uuid == std::string("MIG-56c30729-347f-5dd6-8da0-c3cc59e969e0"));
}

TEST_CASE("gpu::parse_nvidia_smi_list: nvidia_gpu_exporter captures", "[nvidia-smi]") {
  struct Case {
    const char* file;
    const char* name;
    const char* mig;  // profiles, comma-joined
  };
  const Case cases[] = {
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__nvidia-smi-L.txt", "NVIDIA GeForce RTX 2080 SUPER", ""},
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__nvidia-smi-L.txt", "NVIDIA GeForce RTX 2080 SUPER", ""},
      {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__nvidia-smi-L.txt", "NVIDIA GeForce RTX 4080 SUPER", ""},
      {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__nvidia-smi-L.txt", "NVIDIA H100 80GB HBM3", ""},
      {"linux-x86_64__nvidia-h100-mig__590.48.01__nvidia-smi-L.txt", "NVIDIA H100 80GB HBM3",
       "3g.40gb,2g.20gb,1g.10gb,1g.10gb"},
      {"linux-x86_64__nvidia-h200-mig__590.48.01__nvidia-smi-L.txt", "NVIDIA H200",
       "1c.3g.71gb,2c.3g.71gb,2g.35gb,1g.18gb,1g.18gb"},
      {"linux-x86_64__nvidia-l40s__595.80__nvidia-smi-L.txt", "NVIDIA L40S", ""},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__nvidia-smi-L.txt", "NVIDIA GeForce RTX 2080 SUPER", ""},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__nvidia-smi-L.txt", "NVIDIA GeForce RTX 2080 SUPER", ""},
  };
  for (const Case& c : cases) {
    SECTION(c.file) {
      GpuList l = parse_nvidia_smi_list(read_fixture(cat("nvidia-smi-text/", kSections, c.file)));
      REQUIRE(l.gpus.size() == 1);
      CHECK(l.other_lines.empty());
      CHECK(l.gpus[0].index == 0);
      CHECK(l.gpus[0].name == c.name);
      CHECK(l.gpus[0].uuid == kMasked);
      std::vector<std::string> profiles;
      for (const auto& m : l.gpus[0].mig_devices) profiles.push_back(*m.profile_name);
      CHECK(joined(profiles) == c.mig);
    }
  }
}

TEST_CASE("gpu::parse_nvidia_smi_list: pre-R470 MIG UUIDs and error lines", "[nvidia-smi]") {
  GpuList l = parse_nvidia_smi_list(
      "GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
      "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0)\n"
      "Unable to determine the device handle for GPU 0000:07:00.0: Unknown Error\n"
      "GPU 2: A100-SXM4-40GB (UUID: GPU-aaaaaaaa-d33d-2b2c-524d-9e3d8d2b8a77)\n");
  REQUIRE(l.gpus.size() == 2);
  CHECK(l.gpus[1].index == 2);
  REQUIRE(l.gpus[0].mig_devices.size() == 1);
  CHECK(l.gpus[0].mig_devices[0].gpu_instance_id == 7);
  CHECK(l.gpus[0].mig_devices[0].compute_instance_id == 0);
  REQUIRE(l.other_lines.size() == 1);
  CHECK(l.other_lines[0].find("0000:07:00.0") != std::string::npos);
}

TEST_CASE("gpu::merge_gpu_list adds MIG profile names to the XML's MIG devices", "[nvidia-smi]") {
  auto log = parse_nvidia_smi_xml(read_fixture("nvidia-smi-xml/netdata__a100-sxm4-40gb-mig__510.47.03__v11.xml"));
  REQUIRE(log);
  GpuInfo g = log->gpus.at(0);
  GpuList l = parse_nvidia_smi_list(
      "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-27b94a00-ed54-5c24-b1fd-1054085de32a)\n"
      "  MIG 3g.20gb     Device  0: (UUID: MIG-11111111-b0cc-5e5c-8e32-eaa8fd067902)\n"
      "  MIG 3g.20gb     Device  1: (UUID: MIG-22222222-b0cc-5e5c-8e32-eaa8fd067902)\n");
  REQUIRE(merge_gpu_list(g, l));
  CHECK(g.mig.devices[0].profile_name == std::string("3g.20gb"));
  CHECK(g.mig.devices[1].uuid == std::string("MIG-22222222-b0cc-5e5c-8e32-eaa8fd067902"));
  CHECK(g.mig.devices[1].gpu_instance_id == 2);  // the XML's ids are kept
  GpuInfo other;
  other.index = 5;
  other.uuid = std::string("GPU-not-listed");
  CHECK_FALSE(merge_gpu_list(other, l));
}

// --- -q text ---

TEST_CASE("gpu::parse_nvidia_smi_query_text: A10 (R535) with a pending row remap", "[nvidia-smi]") {
  NvidiaSmiLog log = query_text("gpud__nvidia-smi-q__a10__535.129.03.txt");
  CHECK(log.driver_version == std::string("535.129.03"));
  CHECK(log.cuda_version == std::string("12.2"));
  CHECK(log.attached_gpus == 1);
  REQUIRE(log.gpus.size() == 1);
  const GpuInfo& g = log.gpus[0];
  CHECK(g.pci_bus_id == std::string("00000000:07:00.0"));
  CHECK(g.product_name == std::string("NVIDIA A10"));
  CHECK(g.product_architecture == std::string("Ampere"));
  CHECK(g.uuid == std::string("GPU-73d12ef7-f589-f867-4259-c7090ab44736"));
  CHECK(g.serial == std::string("1324521052681"));
  CHECK(g.vbios_version == std::string("94.02.5C.00.04"));
  CHECK(g.persistence_mode_enabled == true);
  CHECK(g.mig.current_enabled.absence() == Absence::not_available);
  CHECK(g.memory.total_mib == 23028);
  CHECK(g.memory.reserved_mib == 512);
  CHECK(g.memory.used_mib == 4);
  CHECK(g.memory.free_mib == 22511);
  REQUIRE(g.bar1);
  CHECK(g.bar1->total_mib == 32768);
  CHECK(g.utilization.gpu_percent == 0);
  CHECK(g.ecc.enabled == true);
  CHECK(g.ecc.volatile_counts.uncorrected == 0);
  CHECK(g.remapped_rows.correctable == 0);
  CHECK(g.remapped_rows.uncorrectable == 4);
  CHECK(g.remapped_rows.pending == true);
  CHECK(g.remapped_rows.failure == false);
  CHECK(g.retired_pages.single_bit_count.absence() == Absence::not_available);
  CHECK(g.temperature.gpu_c == 33);
  CHECK(g.temperature.shutdown_threshold_c == 101);
  CHECK(g.temperature.slowdown_threshold_c == 98);
  CHECK(g.temperature.max_operating_c == 91);
  CHECK(*g.power.draw_w == Approx(43.89));
  CHECK(*g.power.limit_w == Approx(150.0));
  CHECK(*g.power.min_limit_w == Approx(100.0));
  REQUIRE(g.clocks);
  CHECK(g.clocks->graphics_mhz == 225);
  CHECK(g.clocks->max_graphics_mhz == 1695);
  REQUIRE(g.clocks_event_reasons);
  CHECK(joined(*g.clocks_event_reasons) == "gpu_idle");
  CHECK(g.fan_speed_percent == 0);
  CHECK(g.performance_state == std::string("P8"));
  CHECK(g.processes.empty());  // "Processes : None"
  CHECK(g.virtualization.mode == std::string("Pass-Through"));
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: gpud captures", "[nvidia-smi]") {
  SECTION("8x H100, 535.161.08: HW slowdown and power brake active on every GPU") {
    NvidiaSmiLog log = query_text("gpud__nvidia-smi-q__8x-h100-80gb-hbm3__535.161.08.txt");
    CHECK(log.driver_version == std::string("535.161.08"));
    REQUIRE(log.gpus.size() == 8);
    CHECK(log.warnings.empty());
    CHECK(log.gpus[0].pci_bus_id == std::string("00000000:19:00.0"));
    CHECK(log.gpus[1].pci_bus_id == std::string("00000000:3B:00.0"));
    CHECK(log.gpus[7].index == 7);
    CHECK(log.gpus[0].uuid == std::string("GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"));
    CHECK(log.gpus[0].memory.total_mib == 81559);
    CHECK(log.gpus[0].temperature.gpu_c == 29);
    CHECK(*log.gpus[0].power.draw_w == Approx(67.74));
    for (const GpuInfo& g : log.gpus) {
      REQUIRE(g.clocks_event_reasons);
      CHECK(joined(*g.clocks_event_reasons) == "hw_slowdown,hw_power_brake_slowdown");
    }
  }
  SECTION("8x H100, 535.183.01 (pass-through VM)") {
    NvidiaSmiLog log = query_text("gpud__nvidia-smi-q__8x-h100-80gb-hbm3__535.183.01.txt");
    REQUIRE(log.gpus.size() == 8);
    CHECK(log.gpus[0].pci_bus_id == std::string("00000000:53:00.0"));
    CHECK(log.gpus[0].uuid == std::string("GPU-566e6f65-c38e-b12f-4824-6944218668b9"));
    CHECK(log.gpus[0].temperature.gpu_c == 36);
    std::size_t processes = 0;
    int brake = 0;
    for (const GpuInfo& g : log.gpus) {
      processes += g.processes.size();
      for (const auto& r : g.clocks_event_reasons.value_or({})) brake += r == "hw_power_brake_slowdown";
    }
    CHECK(processes == 1);
    CHECK(brake == 1);
  }
  SECTION("truncated on purpose: says 8 GPUs, has part of one") {
    NvidiaSmiLog log = query_text("gpud__nvidia-smi-q__8x-h100__535.183.01__truncated-invalid.txt");
    CHECK(log.attached_gpus == 8);
    REQUIRE(log.gpus.size() == 1);
    REQUIRE(log.warnings.size() == 1);
    CHECK(log.warnings[0].find("truncated") != std::string::npos);
    CHECK(log.gpus[0].memory.total_mib.absence() == Absence::missing);
  }
  SECTION("8x RTX 4090 (a, b)") {
    NvidiaSmiLog a = query_text("gpud__nvidia-smi-q__8x-rtx-4090__535.154.05__a.txt");
    NvidiaSmiLog b = query_text("gpud__nvidia-smi-q__8x-rtx-4090__535.154.05__b.txt");
    REQUIRE(a.gpus.size() == 8);
    REQUIRE(b.gpus.size() == 8);
    CHECK(a.gpus[0].uuid == std::string("GPU-988008fc-0059-17f4-9001-0ab4143e0e63"));
    CHECK(b.gpus[0].uuid == std::string("GPU-6b7298f4-721f-9e24-a277-9ec909ba76f0"));
    CHECK(a.gpus[0].temperature.tlimit_margin_c == 52);
    CHECK(a.gpus[0].temperature.shutdown_tlimit_offset_c == -7);
    CHECK(a.gpus[0].temperature.slowdown_tlimit_offset_c == -2);
    CHECK(a.gpus[0].ecc.enabled == false);
    CHECK(*a.gpus[0].power.draw_w == Approx(17.11));
    std::size_t pa = 0;
    std::size_t pb = 0;
    for (const auto& g : a.gpus) pa += g.processes.size();
    for (const auto& g : b.gpus) pb += g.processes.size();
    CHECK(pa == 8);
    CHECK(pb == 3);
  }
  SECTION("TITAN V, 560.35.03") {
    NvidiaSmiLog log = query_text("gpud__nvidia-smi-q__titan-v__560.35.03.txt");
    CHECK(log.cuda_version == std::string("12.6"));
    REQUIRE(log.gpus.size() == 1);
    const GpuInfo& g = log.gpus[0];
    CHECK(g.product_name == std::string("NVIDIA TITAN V"));
    CHECK(g.memory.total_mib == 12288);
    CHECK(g.temperature.shutdown_threshold_c == 100);
    CHECK(g.remapped_rows.pending.absence() == Absence::not_available);  // "Remapped Rows : N/A"
    CHECK(g.processes.size() == 3);
  }
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: gpud mock A10 and its HAND-EDITED slowdown copy", "[nvidia-smi]") {
  NvidiaSmiLog normal = query_text("gpud-mock__nvidia-smi-q__a10__550.127.05.txt");
  NvidiaSmiLog edited = query_text("gpud-mock__nvidia-smi-q__a10__550.127.05__HAND-EDITED-hw-slowdown-active.txt");
  REQUIRE(normal.gpus.size() == 1);
  REQUIRE(edited.gpus.size() == 1);
  CHECK(normal.driver_version == std::string("550.127.05"));
  CHECK(normal.gpus[0].uuid == std::string("GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d"));
  CHECK(*normal.gpus[0].power.draw_w == Approx(21.30));
  CHECK(joined(*normal.gpus[0].clocks_event_reasons) == "gpu_idle");
  // Only the two flags were edited by hand, so only they differ.
  CHECK(joined(*edited.gpus[0].clocks_event_reasons) == "gpu_idle,hw_slowdown,hw_power_brake_slowdown");
  CHECK(edited.gpus[0].memory.total_mib.optional() == normal.gpus[0].memory.total_mib.optional());
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: Azure ND A100 v4 (R460, domain-numbered bus ids)", "[nvidia-smi]") {
  NvidiaSmiLog log = query_text("azhpc__nvidia-smi-q__8x-a100-sxm4-40gb__460.32.03__azure-ndv4.txt");
  CHECK(log.driver_version == std::string("460.32.03"));
  CHECK(log.cuda_version == std::string("11.2"));
  REQUIRE(log.gpus.size() == 8);
  CHECK(log.gpus[0].pci_bus_id == std::string("00000001:00:00.0"));
  CHECK(log.gpus[1].pci_bus_id == std::string("00000002:00:00.0"));
  CHECK(log.gpus[0].product_name == std::string("A100-SXM4-40GB"));
  CHECK(log.gpus[0].product_brand == std::string("Tesla"));
  CHECK(log.gpus[0].uuid == std::string("GPU-b01e9f90-c60c-4ad1-2052-154833662357"));
  CHECK(log.gpus[0].serial == std::string("1323120035212"));
  CHECK(log.gpus[0].mig.current_enabled == false);
  CHECK(log.gpus[0].memory.total_mib == 40536);
  CHECK(log.gpus[0].temperature.gpu_c == 41);
  CHECK(*log.gpus[0].power.draw_w == Approx(55.63));
  CHECK(log.gpus[0].remapped_rows.failure == false);
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: -d subsets from issues (truncated pastes)", "[nvidia-smi]") {
  NvidiaSmiLog util = query_text("issue__nvidia-smi-i0-q-d-UTILIZATION__375.66.txt");
  CHECK(util.driver_version == std::string("375.66"));
  CHECK(util.cuda_version.absence() == Absence::missing);  // R375 prints none
  REQUIRE(util.gpus.size() == 1);
  CHECK(util.gpus[0].pci_bus_id == std::string("0000:01:00.0"));
  CHECK(util.gpus[0].utilization.gpu_percent == 38);
  CHECK(util.gpus[0].utilization.memory_percent == 3);
  CHECK(util.gpus[0].product_name.absence() == Absence::missing);

  NvidiaSmiLog mem = query_text("issue__nvidia-smi-q-d-MEMORY__rtx2080-windows-560.70__truncated.txt");
  CHECK(mem.driver_version == std::string("560.70"));
  REQUIRE(mem.gpus.size() == 1);
  CHECK(mem.gpus[0].memory.total_mib == 8192);
  CHECK(mem.gpus[0].memory.reserved_mib == 203);
  CHECK(mem.gpus[0].memory.used_mib == 659);
  CHECK(mem.gpus[0].memory.free_mib == 7331);
  CHECK_FALSE(mem.gpus[0].bar1);  // cut off at the BAR1 header
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: nvidia_gpu_exporter -q sections (R590..R610)", "[nvidia-smi]") {
  struct Case {
    const char* file;
    const char* driver;
    const char* name;
    long long total;
    int temp;
    std::size_t mig;
    std::size_t processes;
  };
  const Case cases[] = {
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__idle__nvidia-smi-q.txt", "595.71.05",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 40, 0, 2},
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__load__nvidia-smi-q.txt", "595.71.05",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 45, 0, 4},
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__idle__nvidia-smi-q.txt", "610.57.04",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 33, 0, 2},
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__load__nvidia-smi-q.txt", "610.57.04",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 38, 0, 4},
      {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__idle__nvidia-smi-q.txt", "595.71.05",
       "NVIDIA GeForce RTX 4080 SUPER", 16376, 43, 0, 5},
      {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__load__nvidia-smi-q.txt", "595.71.05",
       "NVIDIA GeForce RTX 4080 SUPER", 16376, 45, 0, 7},
      {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle__nvidia-smi-q.txt", "590.48.01", "NVIDIA H100 80GB HBM3",
       81559, 41, 0, 0},
      {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__nvidia-smi-q.txt", "590.48.01", "NVIDIA H100 80GB HBM3",
       81559, 59, 0, 3},
      {"linux-x86_64__nvidia-h100-mig__590.48.01__idle__nvidia-smi-q.txt", "590.48.01", "NVIDIA H100 80GB HBM3", 81559,
       42, 4, 0},
      {"linux-x86_64__nvidia-h100-mig__590.48.01__load__nvidia-smi-q.txt", "590.48.01", "NVIDIA H100 80GB HBM3", 81559,
       53, 4, 3},
      {"linux-x86_64__nvidia-h200-mig__590.48.01__idle__nvidia-smi-q.txt", "590.48.01", "NVIDIA H200", 143771, 28, 5,
       0},
      {"linux-x86_64__nvidia-h200-mig__590.48.01__load__nvidia-smi-q.txt", "590.48.01", "NVIDIA H200", 143771, 36, 5,
       3},
      {"linux-x86_64__nvidia-l40s__595.80__idle__nvidia-smi-q.txt", "595.80", "NVIDIA L40S", 46068, 64, 0, 0},
      {"linux-x86_64__nvidia-l40s__595.80__load__nvidia-smi-q.txt", "595.80", "NVIDIA L40S", 46068, 54, 0, 2},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__idle__nvidia-smi-q.txt", "591.86",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 40, 0, 10},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__load__nvidia-smi-q.txt", "591.86",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 45, 0, 12},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__idle__nvidia-smi-q.txt", "610.62",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 39, 0, 19},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__load__nvidia-smi-q.txt", "610.62",
       "NVIDIA GeForce RTX 2080 SUPER", 8192, 44, 0, 21},
  };
  for (const Case& c : cases) {
    SECTION(c.file) {
      NvidiaSmiLog log = query_text(kSections + c.file);
      // R610 appends "[Deprecated; ... Use KMD Version instead]" to the driver version.
      CHECK(log.driver_version == std::string(c.driver));
      REQUIRE(log.gpus.size() == 1);
      const GpuInfo& g = log.gpus[0];
      CHECK(g.product_name == std::string(c.name));
      CHECK(g.uuid == kMasked);
      CHECK(g.memory.total_mib == c.total);
      CHECK(g.temperature.gpu_c == c.temp);
      CHECK(g.mig.devices.size() == c.mig);
      CHECK(g.processes.size() == c.processes);
    }
  }
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: MIG devices and MIG processes in text (H100, R590)", "[nvidia-smi]") {
  NvidiaSmiLog log = query_text(kSections + "linux-x86_64__nvidia-h100-mig__590.48.01__load__nvidia-smi-q.txt");
  const GpuInfo& g = log.gpus.at(0);
  CHECK(g.mig.current_enabled == true);
  REQUIRE(g.mig.devices.size() == 4);
  CHECK(g.mig.devices[0].gpu_instance_id == 2);
  CHECK(g.mig.devices[1].gpu_instance_id == 3);
  CHECK(g.mig.devices[2].gpu_instance_id == 9);
  CHECK(g.mig.devices[3].gpu_instance_id == 10);
  CHECK(g.mig.devices[0].multiprocessor_count == 60);
  CHECK(g.mig.devices[0].memory.total_mib == 40448);
  CHECK(g.mig.devices[0].memory.used_mib == 11091);
  REQUIRE(g.mig.devices[0].bar1);
  CHECK(g.mig.devices[0].bar1->total_mib == 24739);
  CHECK(*g.power.draw_average_w == Approx(432.21));
  CHECK(*g.power.draw_instant_w == Approx(444.72));
  CHECK(*g.power.draw_w == Approx(432.21));
  REQUIRE(g.processes.size() == 3);
  CHECK(g.processes[0].pid == 21180);
  CHECK(g.processes[0].gpu_instance_id == 2);
  CHECK(g.processes[0].compute_instance_id == 0);
  CHECK(g.processes[0].type == std::string("C"));
  CHECK(g.processes[0].name == std::string("/root/tools/memhog"));
  CHECK(g.processes[0].used_memory_mib == 2296);
  CHECK(g.processes[2].name == std::string("./gpu_burn"));

  GpuList l = parse_nvidia_smi_list(
      read_fixture("nvidia-smi-text/" + kSections + "linux-x86_64__nvidia-h100-mig__590.48.01__nvidia-smi-L.txt"));
  GpuInfo merged = g;
  REQUIRE(merge_gpu_list(merged, l));
  CHECK(merged.mig.devices[0].profile_name == std::string("3g.40gb"));
  CHECK(merged.mig.devices[3].profile_name == std::string("1g.10gb"));
}

TEST_CASE("gpu::parse_nvidia_smi_query_text: R610 and Windows details", "[nvidia-smi]") {
  NvidiaSmiLog log =
      query_text(kSections + "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__load__nvidia-smi-q.txt");
  CHECK(log.cuda_version == std::string("13.3"));
  const GpuInfo& g = log.gpus.at(0);
  REQUIRE_FALSE(g.processes.empty());
  CHECK(g.processes[0].pid == 2140);
  CHECK(g.processes[0].name == std::string("C:\\Windows\\System32\\dwm.exe"));
  // "Used GPU Memory : Not available in WDDM driver model"
  CHECK(g.processes[0].used_memory_mib.absence() == Absence::not_available);

  NvidiaSmiLog l40s = query_text(kSections + "linux-x86_64__nvidia-l40s__595.80__load__nvidia-smi-q.txt");
  const GpuInfo& x = l40s.gpus.at(0);
  CHECK(x.temperature.tlimit_margin_c == 34);
  CHECK(x.temperature.shutdown_tlimit_offset_c == -5);
  CHECK(*x.power.draw_average_w == Approx(110.24));
  CHECK(*x.power.limit_w == Approx(350.0));
}

TEST_CASE("gpu::parse_nvidia_smi_query_text rejects other text", "[nvidia-smi]") {
  CHECK_FALSE(parse_nvidia_smi_query_text("No devices were found\n"));
  CHECK_FALSE(parse_nvidia_smi_query_text(""));
}

// --- The default table ---

TEST_CASE("gpu::parse_nvidia_smi_table: layouts from R460 to R610", "[nvidia-smi]") {
  SECTION("R525: ERR! fan, E. Process compute mode, truncated name") {
    NvidiaSmiLog log = table("nvidia-smi-text/gpud__nvidia-smi-table__525.125.06.txt");
    CHECK(log.driver_version == std::string("525.125.06"));
    CHECK(log.cuda_version == std::string("12.0"));
    REQUIRE(log.gpus.size() == 1);
    const GpuInfo& g = log.gpus[0];
    CHECK(g.product_name == std::string("NVIDIA GeForce ..."));  // the table truncates names
    CHECK(g.persistence_mode_enabled == false);
    CHECK(g.pci_bus_id == std::string("00000000:01:00.0"));
    CHECK(g.fan_speed_percent.absence() == Absence::error);  // "ERR!"
    CHECK(g.temperature.gpu_c == 38);
    CHECK(g.performance_state == std::string("P5"));
    CHECK(*g.power.draw_w == Approx(49.0));
    CHECK(*g.power.limit_w == Approx(450.0));
    CHECK(g.memory.used_mib == 2021);
    CHECK(g.memory.total_mib == 23028);
    CHECK(g.compute_mode == std::string("E. Process"));
    CHECK(g.ecc.volatile_counts.uncorrected == 0);
  }
  SECTION("R550: 8x H100") {
    NvidiaSmiLog log = table("nvidia-smi-text/gpud__nvidia-smi-table__550.90.07.txt");
    CHECK(log.driver_version == std::string("550.90.07"));
    REQUIRE(log.gpus.size() == 8);
    CHECK(log.gpus[0].product_name == std::string("NVIDIA H100 80GB HBM3"));
    CHECK(log.gpus[0].pci_bus_id == std::string("00000000:19:00.0"));
    CHECK(log.gpus[1].pci_bus_id == std::string("00000000:3B:00.0"));
    CHECK(log.gpus[0].fan_speed_percent.absence() == Absence::not_available);
    CHECK(*log.gpus[0].power.draw_w == Approx(72.0));
    CHECK(log.gpus[0].mig.current_enabled == false);
    CHECK(log.gpus[7].index == 7);
  }
  SECTION("gpud mock A10 (R550) and the docs' T4 (R535, old layout)") {
    NvidiaSmiLog a10 = table("nvidia-smi-text/gpud-mock__nvidia-smi-table__a10__550.127.05.txt");
    REQUIRE(a10.gpus.size() == 1);
    CHECK(a10.gpus[0].fan_speed_percent == 0);
    CHECK(a10.gpus[0].temperature.gpu_c == 32);
    CHECK(a10.gpus[0].pci_bus_id == std::string("00000000:06:00.0"));
    NvidiaSmiLog t4 = table("nvidia-smi-text/nvidia-docs__nvidia-smi-table__tesla-t4__535.86.10.txt");
    CHECK(t4.driver_version == std::string("535.86.10"));
    REQUIRE(t4.gpus.size() == 1);
    CHECK(t4.gpus[0].product_name == std::string("Tesla T4"));
    CHECK(t4.gpus[0].persistence_mode_enabled == true);
    CHECK(t4.gpus[0].memory.total_mib == 15109);
    CHECK(*t4.gpus[0].power.draw_w == Approx(9.0));
    CHECK(t4.gpus[0].mig.current_enabled.absence() == Absence::not_available);
  }
  SECTION("nvidia_gpu_exporter tables (R590..R610: KMD Version header)") {
    struct Case {
      const char* file;
      const char* driver;
      long long used;
      int temp;
    };
    const Case cases[] = {
        {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__idle__nvidia-smi-table.txt", "595.71.05", 214, 40},
        {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__load__nvidia-smi-table.txt", "595.71.05", 819, 45},
        {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__idle__nvidia-smi-table.txt", "610.57.04", 211, 33},
        {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__load__nvidia-smi-table.txt", "610.57.04", 815, 38},
        {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__idle__nvidia-smi-table.txt", "595.71.05", 596, 43},
        {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__load__nvidia-smi-table.txt", "595.71.05", 1474, 45},
        {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle__nvidia-smi-table.txt", "590.48.01", 0, 41},
        {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__nvidia-smi-table.txt", "590.48.01", 19818, 59},
        {"linux-x86_64__nvidia-h100-mig__590.48.01__idle__nvidia-smi-table.txt", "590.48.01", 59, 42},
        {"linux-x86_64__nvidia-h100-mig__590.48.01__load__nvidia-smi-table.txt", "590.48.01", 11125, 52},
        {"linux-x86_64__nvidia-h200-mig__590.48.01__idle__nvidia-smi-table.txt", "590.48.01", 55, 28},
        {"linux-x86_64__nvidia-h200-mig__590.48.01__load__nvidia-smi-table.txt", "590.48.01", 16959, 36},
        {"linux-x86_64__nvidia-l40s__595.80__idle__nvidia-smi-table.txt", "595.80", 0, 64},
        {"linux-x86_64__nvidia-l40s__595.80__load__nvidia-smi-table.txt", "595.80", 1235, 54},
        {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__idle__nvidia-smi-table.txt", "591.86", 702, 40},
        {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__load__nvidia-smi-table.txt", "591.86", 1296, 45},
        {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__idle__nvidia-smi-table.txt", "610.62", 797, 39},
        {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__load__nvidia-smi-table.txt", "610.62", 1366, 44},
    };
    for (const Case& c : cases) {
      INFO(c.file);
      NvidiaSmiLog log = table(cat("nvidia-smi-text/", kSections, c.file));
      CHECK(log.driver_version == std::string(c.driver));
      REQUIRE(log.gpus.size() == 1);  // the MIG-device and process tables are not GPUs
      CHECK(log.gpus[0].memory.used_mib == c.used);
      CHECK(log.gpus[0].temperature.gpu_c == c.temp);
    }
  }
  SECTION("MIG: utilization N/A, MIG M. Enabled") {
    NvidiaSmiLog log = table(
        cat("nvidia-smi-text/", kSections, "linux-x86_64__nvidia-h100-mig__590.48.01__load__nvidia-smi-table.txt"));
    CHECK(log.gpus.at(0).utilization.gpu_percent.absence() == Absence::not_available);
    CHECK(log.gpus.at(0).mig.current_enabled == true);
    CHECK(*log.gpus.at(0).power.draw_w == Approx(432.0));
  }
  SECTION("not a table") { CHECK_FALSE(parse_nvidia_smi_table("No devices were found\n")); }
}

// --- The vertex multi-command captures: "# nvidia-smi <cmd>" sections ---

namespace {
std::map<std::string, std::string> capture_sections(const std::string& text) {
  std::map<std::string, std::string> out;
  std::string current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# nvidia-smi ", 0) == 0) {
      current = line.substr(13, line.find(' ', 13) == std::string::npos ? std::string::npos : line.find(' ', 13) - 13);
      current = current.substr(0, current.find('='));
      continue;
    }
    if (!current.empty()) out[current] += line + "\n";
  }
  return out;
}
}  // namespace

TEST_CASE("gpu parsers on the vertex multi-command captures (Ubuntu 465.27, Windows 466.63)", "[nvidia-smi]") {
  struct Case {
    const char* file;
    const char* driver;
    long long total, used;
    int temp;
    double draw;
    const char* persistence;  // "false" or "n/a"
  };
  const Case cases[] = {
      {"vertex__rtx-2080-super__ubuntu-465.27__multi-command-capture.txt", "465.27", 7979, 344, 32, 30.37, "false"},
      {"vertex__rtx-2080-super__win10-466.63__multi-command-capture.txt", "466.63", 8192, 856, 35, 31.12, "n/a"},
  };
  for (const Case& c : cases) {
    SECTION(c.file) {
      auto sections = capture_sections(read_fixture(cat("nvidia-smi-text/", c.file)));
      REQUIRE(sections.count("--list-gpus") == 1);
      REQUIRE(sections.count("--query-gpu") == 1);
      GpuList l = parse_nvidia_smi_list(sections["--list-gpus"]);
      REQUIRE(l.gpus.size() == 1);
      CHECK(l.gpus[0].uuid == std::string("GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"));
      CHECK(l.gpus[0].name == "NVIDIA GeForce RTX 2080 SUPER");
      auto g = parse_query_gpu_csv(sections["--query-gpu"]);
      REQUIRE(g);
      REQUIRE(g->size() == 1);
      const GpuInfo& x = g->front();
      CHECK(x.driver_version == std::string(c.driver));
      CHECK(x.uuid == std::string("GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"));
      CHECK(x.memory.total_mib == c.total);
      CHECK(x.memory.used_mib == c.used);
      CHECK(x.temperature.gpu_c == c.temp);
      CHECK(*x.power.draw_w == Approx(c.draw));
      CHECK(x.fan_speed_percent == 38);
      CHECK(x.performance_state == std::string("P8"));
      if (std::string(c.persistence) == "false") {
        CHECK(x.persistence_mode_enabled == false);
      } else {
        CHECK(x.persistence_mode_enabled.absence() == Absence::not_available);
      }
    }
  }
}

TEST_CASE("gpu text fixtures: every -L, -q and table file is covered", "[nvidia-smi]") {
  // Files this test suite reads (by name pattern) and those gpuctl does not parse on purpose.
  const std::string root = fixture_path("nvidia-smi-text/");
  std::size_t list = 0;
  std::size_t query = 0;
  std::size_t tables = 0;
  std::set<std::string> other;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::string rel = e.path().string().substr(root.size());
    if (rel.find("nvidia-smi-L") != std::string::npos) {
      ++list;
    } else if (rel.find("nvidia-smi-q") != std::string::npos || rel.find("-q-d-") != std::string::npos) {
      ++query;
    } else if (rel.find("nvidia-smi-table") != std::string::npos) {
      ++tables;
    } else {
      other.insert(rel);
    }
  }
  CHECK(list == 11);    // 2 docs + 9 exporter
  CHECK(query == 30);   // 12 top-level (gpud, gpud-mock, azhpc, issues) + 18 exporter
  CHECK(tables == 22);  // 4 top-level + 18 exporter
  for (const std::string& rel : other) {
    INFO(rel);
    bool known = rel.find("vertex__") == 0 || rel.find("nvidia_gpu_exporter-captures-full/") == 0 ||
                 rel.find("nvlink") != std::string::npos || rel.find("topo-m") != std::string::npos ||
                 rel.find("dmon") != std::string::npos || rel.find("pmon") != std::string::npos ||
                 rel.find("version") != std::string::npos || rel.find("help-query-gpu") != std::string::npos;
    CHECK(known);
  }
}
