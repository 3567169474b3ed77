// `--query-gpu`, `--query-compute-apps` and `--query-retired-pages` CSV: every file in
// fixtures/nvidia-smi-csv. MOCK/SYNTHETIC files (azhpc mock, EESSI "does-not-exist", the second
// row of the nvidia_gpu_exporter query) are checked for structure only, not as real hardware.
// The nvidia_gpu_exporter captures mask UUIDs/serials ("GPU-00000000-...", "0000000000000").
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
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

std::vector<GpuInfo> gpus(const std::string& rel, const std::vector<std::string>& fields = {}) {
  INFO(rel);
  auto r = parse_query_gpu_csv(read_fixture("nvidia-smi-csv/" + rel), fields);
  REQUIRE(r.has_value());
  return *r;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

const std::string kMasked = "GPU-00000000-0000-0000-0000-000000000000";

}  // namespace

TEST_CASE("gpu::parse_query_gpu_csv: header without units (azhpc MOCK)", "[nvidia-smi]") {
  auto g = gpus("azhpc__MOCK__query-gpu-index-serial-retired-pages-remapped.csv");
  REQUIRE(g.size() == 4);
  CHECK(g[2].index == 2);
  CHECK(g[2].serial == std::string("0000000000003"));
  CHECK(g[2].pci_bus_id == std::string("0000000A:00:00.0"));
  CHECK(g[2].retired_pages.double_bit_count == 0);
  CHECK(g[2].retired_pages.single_bit_count == 0);
  CHECK(g[2].remapped_rows.failure.absence() == Absence::not_available);
  CHECK(g[3].pci_bus_id == std::string("0000000D:00:00.0"));
  CHECK(g[0].memory.total_mib.absence() == Absence::missing);  // not queried
}

TEST_CASE("gpu::parse_query_gpu_csv: noheader (EESSI 4x A100, SYNTHETIC unknown GPU)", "[nvidia-smi]") {
  const std::vector<std::string> fields{"gpu_name", "count", "driver_version", "compute_cap"};
  auto g = gpus("eessi__4x-a100__query-name-count-driver-computecap__noheader.csv", fields);
  REQUIRE(g.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(g[i].index == static_cast<int>(i));  // no index column: numbered by row
    CHECK(g[i].product_name == std::string("NVIDIA A100-SXM4-80GB"));
    CHECK(g[i].driver_version == std::string("545.23.08"));
    CHECK(g[i].compute_capability == std::string("8.0"));
  }
  auto s = gpus("eessi__SYNTHETIC-unknown-gpu__noheader.csv", fields);
  REQUIRE(s.size() == 1);
  CHECK(s[0].product_name == std::string("NVIDIA does-not-exist"));
  CHECK(s[0].driver_version == std::string("000.00.00"));
  CHECK(s[0].compute_capability == std::string("0.1"));
}

TEST_CASE("gpu::parse_query_gpu_csv: [Not Supported] with a header (GTX 650)", "[nvidia-smi]") {
  auto table =
      parse_nvidia_smi_csv(read_fixture("nvidia-smi-csv/issue__header__utilization-gpu-NotSupported__gtx650.csv"));
  REQUIRE(table);
  CHECK(table->fields == std::vector<std::string>{"utilization.gpu"});
  CHECK(table->units == std::vector<std::string>{"%"});
  auto g = gpus("issue__header__utilization-gpu-NotSupported__gtx650.csv");
  REQUIRE(g.size() == 1);
  CHECK(g[0].utilization.gpu_percent.absence() == Absence::not_supported);
  auto m = gpus("issue__header__utilization-memory-NotSupported__gtx650.csv");
  REQUIRE(m.size() == 1);
  CHECK(m[0].utilization.memory_percent.absence() == Absence::not_supported);
}

TEST_CASE("gpu::parse_query_gpu_csv: noheader,nounits, [N/A] vs [Not Supported] fan", "[nvidia-smi]") {
  const std::vector<std::string> fields{"memory.total", "memory.free",     "memory.used",       "temperature.gpu",
                                        "fan.speed",    "utilization.gpu", "utilization.memory"};
  for (const char* file : {"issue__noheader-nounits__fan-NA__new-driver.csv",
                           "issue__noheader-nounits__fan-NotSupported__old-driver.csv"}) {
    SECTION(file) {
      auto g = gpus(file, fields);
      REQUIRE(g.size() == 1);
      CHECK(g[0].memory.total_mib == 2004);
      CHECK(g[0].memory.free_mib == 2004);
      CHECK(g[0].memory.used_mib == 0);
      CHECK(g[0].temperature.gpu_c == 44);
      CHECK(g[0].utilization.gpu_percent == 0);
      CHECK(g[0].utilization.memory_percent == 0);
      CHECK(g[0].fan_speed_percent.absence() == (std::string(file).find("NotSupported") != std::string::npos
                                                     ? Absence::not_supported
                                                     : Absence::not_available));
    }
  }
}

TEST_CASE("gpu::parse_query_gpu_csv: noheader with units on Windows (GTX 770)", "[nvidia-smi]") {
  const std::vector<std::string> fields{"gpu_name",
                                        "utilization.gpu",
                                        "utilization.memory",
                                        "temperature.gpu",
                                        "power.draw",
                                        "power.limit",
                                        "fan.speed",
                                        "pstate",
                                        "clocks.current.graphics",
                                        "clocks.current.memory",
                                        "power.max_limit",
                                        "power.default_limit"};
  auto g = gpus("issue__noheader-with-units__gtx770-many-NotSupported__windows.csv", fields);
  REQUIRE(g.size() == 1);
  CHECK(g[0].product_name == std::string("GeForce GTX 770"));
  CHECK(g[0].utilization.gpu_percent.absence() == Absence::not_supported);
  CHECK(g[0].temperature.gpu_c == 52);
  CHECK(g[0].power.draw_w.absence() == Absence::not_supported);
  CHECK(g[0].power.max_limit_w.absence() == Absence::not_supported);
  CHECK(g[0].fan_speed_percent == 52);  // "52 %"
  CHECK(g[0].performance_state == std::string("P0"));
  REQUIRE(g[0].clocks.has_value());
  CHECK(g[0].clocks->graphics_mhz.absence() == Absence::not_supported);
}

TEST_CASE("gpu::parse_query_gpu_csv: header with units, no trailing newline (netdata P100)", "[nvidia-smi]") {
  auto g = gpus("netdata__tesla-p100__query-gpu.csv");
  REQUIRE(g.size() == 1);
  CHECK(g[0].product_name == std::string("Tesla P100-PCIE-16GB"));
  CHECK(g[0].uuid == std::string("GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"));
  CHECK(g[0].fan_speed_percent.absence() == Absence::not_available);
  CHECK(g[0].performance_state == std::string("P0"));
  CHECK(g[0].memory.reserved_mib == 103);
  CHECK(g[0].memory.used_mib == 0);
  CHECK(g[0].memory.free_mib == 16280);
  CHECK(g[0].temperature.gpu_c == 37);
  CHECK(*g[0].power.draw_w == Approx(28.16));
  REQUIRE(g[0].clocks);
  CHECK(g[0].clocks->graphics_mhz == 405);
  CHECK(g[0].clocks->sm_mhz == 405);
  CHECK(g[0].clocks->memory_mhz == 715);
  CHECK(g[0].clocks->video_mhz == 835);
}

TEST_CASE("gpu::parse_query_gpu_csv: nvidia_gpu_exporter query (row 2 SYNTHETIC)", "[nvidia-smi]") {
  auto g = gpus("nvidia_gpu_exporter__query-with-synthetic-row.csv");
  REQUIRE(g.size() == 2);
  CHECK(g[0].index == 0);
  CHECK(g[0].uuid == std::string("GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"));
  CHECK(g[0].product_name == std::string("NVIDIA GeForce RTX 2080 SUPER"));
  CHECK(g[0].vbios_version == std::string("90.04.7a.40.73"));
  CHECK(g[0].driver_version == std::string("466.63"));
  CHECK(g[0].fan_speed_percent == 38);
  CHECK(g[0].memory.used_mib == 575);
  CHECK(g[0].pci_bus_id == std::string("00000000:01:00.0"));
  CHECK(g[0].serial.absence() == Absence::not_available);
  CHECK(g[0].compute_capability == std::string("7.5"));
  CHECK(g[1].index == 1);  // the hand-made row
  CHECK(g[1].product_name == std::string("Some Other GPU"));
}

TEST_CASE("gpu::parse_query_gpu_csv: all fields with units (vertex, Windows 471.11)", "[nvidia-smi]") {
  auto table = parse_nvidia_smi_csv(
      read_fixture("nvidia-smi-csv/vertex__rtx-2080-super-windows-471.11__query-gpu-all-fields-with-units.csv"));
  REQUIRE(table);
  CHECK(table->fields.size() == 115);
  auto g = gpus_from_query_gpu_csv(*table);
  REQUIRE(g.size() == 1);
  const GpuInfo& x = g[0];
  CHECK(x.driver_version == std::string("471.11"));
  CHECK(x.product_name == std::string("NVIDIA GeForce RTX 2080 SUPER"));
  CHECK(x.uuid == std::string("GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"));
  CHECK(x.pci_bus_id == std::string("00000000:0C:00.0"));
  CHECK(x.index == 0);
  CHECK(x.persistence_mode_enabled.absence() == Absence::not_available);
  CHECK(x.fan_speed_percent == 38);
  CHECK(x.performance_state == std::string("P8"));
  REQUIRE(x.clocks_event_reasons);
  CHECK(joined(*x.clocks_event_reasons) == "gpu_idle");  // clocks_throttle_reasons.* (pre-R535 names)
  CHECK(x.memory.total_mib == 8192);
  CHECK(x.memory.used_mib == 876);
  CHECK(x.memory.free_mib == 7316);
  CHECK(x.utilization.gpu_percent == 2);
  CHECK(x.utilization.memory_percent == 10);
  CHECK(x.ecc.enabled.absence() == Absence::not_available);
  CHECK(x.ecc.aggregate_counts.uncorrected.absence() == Absence::not_available);
  CHECK(x.temperature.gpu_c == 36);
  CHECK(x.temperature.memory_c.absence() == Absence::not_available);  // bare "N/A"
  CHECK(*x.power.draw_w == Approx(32.70));
  CHECK(*x.power.limit_w == Approx(250.0));
  CHECK(*x.power.min_limit_w == Approx(105.0));
  CHECK(*x.power.max_limit_w == Approx(350.0));
  REQUIRE(x.clocks);
  CHECK(x.clocks->graphics_mhz == 111);
  CHECK(x.clocks->memory_mhz == 267);
  CHECK(x.clocks->video_mhz == 539);
  CHECK(x.clocks->max_graphics_mhz == 2280);
  CHECK(x.clocks->max_memory_mhz == 7751);
  CHECK(x.mig.current_enabled.absence() == Absence::not_available);
}

namespace {
struct ExporterGpu {
  const char* file;
  const char* driver;
  const char* name;
  const char* bus_id;
  long long total, used, free;
  int temp;
  double draw;
  int fan;  // -1: [N/A]
  const char* pstate;
  const char* reasons;
  int ecc;  // -1 not reported
  int mig;  // -1 not reported
};
const ExporterGpu kExporter[] = {
    {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__idle__query-gpu-all-fields.csv", "595.71.05",
     "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 214, 7571, 40, 39.32, 38, "P8", "sw_power_cap", -1, -1},
    {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__idle__query-gpu-all-fields.csv", "610.57.04",
     "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 211, 7582, 33, 39.17, 38, "P8", "gpu_idle", -1, -1},
    {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__idle__query-gpu-all-fields.csv", "595.71.05",
     "NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0", 16376, 596, 15348, 43, 26.20, 0, "P8", "gpu_idle", -1, -1},
    {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle__query-gpu-all-fields.csv", "590.48.01",
     "NVIDIA H100 80GB HBM3", "00000000:00:09.0", 81559, 0, 81081, 41, 69.85, -1, "P0", "gpu_idle", 1, 0},
    {"linux-x86_64__nvidia-h100-mig__590.48.01__idle__query-gpu-all-fields.csv", "590.48.01", "NVIDIA H100 80GB HBM3",
     "00000000:00:09.0", 81559, 59, 81022, 42, 71.15, -1, "P0", "gpu_idle", 1, 1},
    {"linux-x86_64__nvidia-h200-mig__590.48.01__idle__query-gpu-all-fields.csv", "590.48.01", "NVIDIA H200",
     "00000000:83:00.0", 143771, 55, 143103, 28, 78.28, -1, "P0", "gpu_idle", 1, 1},
    {"linux-x86_64__nvidia-l40s__595.80__idle__query-gpu-all-fields.csv", "595.80", "NVIDIA L40S", "00000000:01:00.0",
     46068, 0, 45460, 63, 144.97, -1, "P0", "", 1, -1},
    {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__idle__query-gpu-all-fields.csv", "591.86",
     "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 702, 7286, 40, 38.92, 37, "P8", "gpu_idle", -1, -1},
    {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__idle__query-gpu-all-fields.csv", "610.62",
     "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", 8192, 797, 7191, 40, 39.25, 38, "P8", "gpu_idle", -1, -1},
};
}  // namespace

TEST_CASE("gpu::parse_query_gpu_csv: nvidia_gpu_exporter all-fields captures (R590..R610)", "[nvidia-smi]") {
  for (const ExporterGpu& c : kExporter) {
    SECTION(c.file) {
      auto g = gpus(cat("nvidia_gpu_exporter-sections/", c.file));
      REQUIRE(g.size() == 1);
      const GpuInfo& x = g[0];
      CHECK(x.index == 0);
      CHECK(x.uuid == kMasked);
      CHECK(x.driver_version == std::string(c.driver));
      CHECK(x.product_name == std::string(c.name));
      CHECK(x.pci_bus_id == std::string(c.bus_id));
      CHECK(x.memory.total_mib == c.total);
      CHECK(x.memory.used_mib == c.used);
      CHECK(x.memory.free_mib == c.free);
      CHECK(x.temperature.gpu_c == c.temp);
      REQUIRE(x.power.draw_w);
      CHECK(*x.power.draw_w == Approx(c.draw));
      if (c.fan < 0) {
        CHECK(x.fan_speed_percent.absence() == Absence::not_available);
      } else {
        CHECK(x.fan_speed_percent == c.fan);
      }
      CHECK(x.performance_state == std::string(c.pstate));
      REQUIRE(x.clocks_event_reasons);
      CHECK(joined(*x.clocks_event_reasons) == c.reasons);
      if (c.ecc < 0) {
        CHECK_FALSE(x.ecc.enabled);
      } else {
        CHECK(x.ecc.enabled == (c.ecc == 1));
        CHECK(x.ecc.aggregate_counts.uncorrected == 0);
        CHECK(x.ecc.volatile_counts.corrected == 0);
      }
      if (c.mig < 0) {
        CHECK_FALSE(x.mig.current_enabled);
      } else {
        CHECK(x.mig.current_enabled == (c.mig == 1));
      }
    }
  }
}

TEST_CASE("gpu::parse_query_gpu_csv: R590+ details (H100: remapped rows, T.Limit, average/instant power)",
          "[nvidia-smi]") {
  auto h100 = gpus(
      "nvidia_gpu_exporter-sections/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle__query-gpu-all-fields.csv");
  const GpuInfo& x = h100.at(0);
  CHECK(x.remapped_rows.correctable == 0);
  CHECK(x.remapped_rows.uncorrectable == 0);
  CHECK(x.remapped_rows.pending == false);
  CHECK(x.remapped_rows.failure == false);
  CHECK(x.temperature.tlimit_margin_c == 46);
  CHECK(x.temperature.memory_c == 48);
  CHECK(*x.power.draw_average_w == Approx(69.85));
  CHECK(*x.power.draw_instant_w == Approx(69.62));
  CHECK(x.serial == std::string("0000000000000"));  // masked
  CHECK(x.persistence_mode_enabled == true);
  // The MIG capture: utilization is [N/A] under MIG, remapped rows too.
  auto mig =
      gpus("nvidia_gpu_exporter-sections/linux-x86_64__nvidia-h100-mig__590.48.01__idle__query-gpu-all-fields.csv");
  CHECK(mig.at(0).utilization.gpu_percent.absence() == Absence::not_available);
  CHECK(mig.at(0).remapped_rows.pending.absence() == Absence::not_available);
  // R595 deprecations come as "[Requested functionality has been deprecated]".
  auto l40s = gpus("nvidia_gpu_exporter-sections/linux-x86_64__nvidia-l40s__595.80__idle__query-gpu-all-fields.csv");
  REQUIRE(l40s.at(0).clocks);
  CHECK(l40s[0].utilization.gpu_percent == 100);
  CHECK(l40s[0].clocks->graphics_mhz == 2520);
}

TEST_CASE("gpu::parse_query_compute_apps_csv: nvidia_gpu_exporter captures", "[nvidia-smi]") {
  struct Case {
    const char* file;
    std::size_t rows;
    long long pid;
    const char* name;
    long long mib;  // -1: [N/A] (Windows WDDM)
  };
  const Case cases[] = {
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__load__query-compute-apps.csv", 2, 5268, "ffmpeg", 370},
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__load__query-compute-apps.csv", 2, 28512, "ffmpeg", 370},
      {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__load__query-compute-apps.csv", 3, 2165,
       "/usr/bin/kwin_wayland", 25},
      {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__query-compute-apps.csv", 3, 11327, "/root/tools/memhog",
       2566},
      {"linux-x86_64__nvidia-h100-mig__590.48.01__load__query-compute-apps.csv", 3, 21180, "/root/tools/memhog", 2296},
      {"linux-x86_64__nvidia-h200-mig__590.48.01__load__query-compute-apps.csv", 3, 12249, "/root/tools/memhog", 2194},
      {"linux-x86_64__nvidia-l40s__595.80__load__query-compute-apps.csv", 2, 20037, "ffmpeg", 538},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__load__query-compute-apps.csv", 12, 12444,
       "C:\\Windows\\SystemApps\\MicrosoftWindows.Client.CBS_cw5n1h2txyewy\\TextInputHost.exe", -1},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__load__query-compute-apps.csv", 21, 2140,
       "C:\\Windows\\System32\\dwm.exe", -1},
  };
  for (const Case& c : cases) {
    SECTION(c.file) {
      auto r = parse_query_compute_apps_csv(read_fixture(cat("nvidia-smi-csv/nvidia_gpu_exporter-sections/", c.file)));
      REQUIRE(r);
      REQUIRE(r->size() == c.rows);
      const ComputeApp& a = r->front();
      CHECK(a.process.pid == c.pid);
      CHECK(a.process.name == std::string(c.name));
      if (c.mib < 0) {
        CHECK(a.process.used_memory_mib.absence() == Absence::not_available);
      } else {
        CHECK(a.process.used_memory_mib == c.mib);
      }
      CHECK(a.gpu_uuid == kMasked);
      CHECK(a.gpu_bus_id.has_value());
      CHECK(a.gpu_name.has_value());
    }
  }
}

TEST_CASE("gpu::parse_query_retired_pages_csv: nvidia_gpu_exporter captures", "[nvidia-smi]") {
  // Every capture has two placeholder rows (no page retired): address and timestamp [N/A].
  struct Case {
    const char* file;
    const char* name;
    const char* bus_id;
  };
  const Case cases[] = {
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__idle__query-retired-pages.csv",
       "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0"},
      {"linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04__idle__query-retired-pages.csv",
       "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0"},
      {"linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__idle__query-retired-pages.csv",
       "NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0"},
      {"linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle__query-retired-pages.csv", "NVIDIA H100 80GB HBM3",
       "00000000:00:09.0"},
      {"linux-x86_64__nvidia-h100-mig__590.48.01__idle__query-retired-pages.csv", "NVIDIA H100 80GB HBM3",
       "00000000:00:09.0"},
      {"linux-x86_64__nvidia-h200-mig__590.48.01__idle__query-retired-pages.csv", "NVIDIA H200", "00000000:83:00.0"},
      {"linux-x86_64__nvidia-l40s__595.80__idle__query-retired-pages.csv", "NVIDIA L40S", "00000000:01:00.0"},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__idle__query-retired-pages.csv",
       "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0"},
      {"windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__idle__query-retired-pages.csv",
       "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0"},
  };
  for (const Case& c : cases) {
    SECTION(c.file) {
      auto r = parse_query_retired_pages_csv(read_fixture(cat("nvidia-smi-csv/nvidia_gpu_exporter-sections/", c.file)));
      REQUIRE(r);
      REQUIRE(r->size() == 2);
      CHECK((*r)[0].cause == std::string("Single Bit ECC"));
      CHECK((*r)[1].cause == std::string("Double Bit ECC"));
      CHECK((*r)[0].address.absence() == Absence::not_available);
      CHECK((*r)[0].timestamp.absence() == Absence::not_available);
      CHECK((*r)[0].gpu_name == std::string(c.name));
      CHECK((*r)[0].gpu_bus_id == std::string(c.bus_id));
      CHECK((*r)[0].gpu_uuid == kMasked);
    }
  }
}

TEST_CASE("gpu::parse_nvidia_smi_csv: every CSV fixture is covered", "[nvidia-smi]") {
  std::set<std::string> covered{
      "azhpc__MOCK__query-gpu-index-serial-retired-pages-remapped.csv",
      "eessi__4x-a100__query-name-count-driver-computecap__noheader.csv",
      "eessi__SYNTHETIC-unknown-gpu__noheader.csv",
      "issue__header__utilization-gpu-NotSupported__gtx650.csv",
      "issue__header__utilization-memory-NotSupported__gtx650.csv",
      "issue__noheader-nounits__fan-NA__new-driver.csv",
      "issue__noheader-nounits__fan-NotSupported__old-driver.csv",
      "issue__noheader-with-units__gtx770-many-NotSupported__windows.csv",
      "netdata__tesla-p100__query-gpu.csv",
      "nvidia_gpu_exporter__query-with-synthetic-row.csv",
      "vertex__rtx-2080-super-windows-471.11__query-gpu-all-fields-with-units.csv",
  };
  for (const auto& c : kExporter) covered.insert(cat("nvidia_gpu_exporter-sections/", c.file));
  const std::string root = fixture_path("nvidia-smi-csv/");
  std::size_t compute = 0;
  std::size_t retired = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::string rel = e.path().string().substr(root.size());
    if (rel.find("query-compute-apps") != std::string::npos) {
      ++compute;  // covered by the compute-apps test's table
    } else if (rel.find("query-retired-pages.csv") != std::string::npos) {
      ++retired;  // covered by the retired-pages test's table
    } else {
      INFO(rel);
      CHECK(covered.count(rel) == 1);
    }
  }
  CHECK(compute == 9);
  CHECK(retired == 9);
}

TEST_CASE("gpu::parse_nvidia_smi_csv: edge cases", "[nvidia-smi]") {
  SECTION("a comma inside a process name is put back") {
    auto r = parse_query_compute_apps_csv(
        "pid, process_name, used_gpu_memory [MiB]\n42, python train.py --a=1, --b=2, 100 MiB\n");
    REQUIRE(r);
    REQUIRE(r->size() == 1);
    CHECK((*r)[0].process.name == std::string("python train.py --a=1, --b=2"));
    CHECK((*r)[0].process.used_memory_mib == 100);
  }
  SECTION("a row with too few cells is an error") {
    auto r = parse_nvidia_smi_csv("index, uuid, memory.total [MiB]\n0, GPU-x\n");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == gpuctl::Errc::parse);
    CHECK(r.error().message.find("line 2 has 2 cells, expected 3") != std::string::npos);
  }
  SECTION("messages between rows are kept aside") {
    auto r = parse_nvidia_smi_csv(
        "index, uuid\n0, GPU-a\nUnable to determine the device handle for GPU 0000:02:00.0: Unknown Error\n2, GPU-c\n");
    REQUIRE(r);
    CHECK(r->rows.size() == 2);
    REQUIRE(r->other_lines.size() == 1);
    CHECK(r->other_lines[0].find("device handle") != std::string::npos);
  }
  SECTION("header only, empty noheader output") {
    auto h = parse_query_compute_apps_csv("pid, process_name, used_gpu_memory [MiB]\n");
    REQUIRE(h);
    CHECK(h->empty());
    auto n = parse_query_gpu_csv("", {"index"});
    REQUIRE(n);
    CHECK(n->empty());
    CHECK_FALSE(parse_nvidia_smi_csv(""));
  }
  SECTION("the clocks event reasons bitmask alone") {
    auto g = parse_query_gpu_csv("index, clocks_event_reasons.active\n0, 0x0000000000000084\n");
    REQUIRE(g);
    REQUIRE(g->at(0).clocks_event_reasons);
    CHECK(joined(*g->at(0).clocks_event_reasons) == "sw_power_cap,hw_power_brake_slowdown");
  }
  SECTION("per-field GPU errors") {
    auto g = parse_query_gpu_csv("index, temperature.gpu, power.draw [W]\n0, [Unknown Error], [GPU is lost]\n");
    REQUIRE(g);
    CHECK(g->at(0).temperature.gpu_c.absence() == Absence::error);
    CHECK(g->at(0).power.draw_w.absence() == Absence::error);
  }
}
