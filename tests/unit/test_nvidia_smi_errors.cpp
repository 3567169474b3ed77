// Failure classification and kernel-log events, from fixtures/nvidia-smi-errors (every file).
// Notes from SOURCES.md: the azhpc infoROM warning may have been appended by hand (its bus id
// format differs from the table's); the EESSI no-devices file is a fake nvidia-smi's stdout with
// exit code 6; the Windows gpu-is-lost paste is console-wrapped; the NVIDIA docs' infoROM block is
// a table followed by the warning and the exit code 14.
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"

using namespace gpuctl::gpu;

using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::fixture_path;
using gpuctl::testing::read_file;
using gpuctl::testing::read_fixture;

namespace {

std::string err(const std::string& file) { return read_fixture("nvidia-smi-errors/" + file); }

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("gpu::classify_nvidia_smi_run: real nvidia-smi messages", "[nvidia-smi]") {
  struct Case {
    const char* file;
    std::optional<int> rc;
    NvsmiErrorKind kind;
    const char* bus_id;  // canonical, or nullptr
    const char* quoted;  // a piece of the decisive line the message must quote
  };
  const Case cases[] = {
      {"issue__nvidia-smi-failed-communicate-driver.txt", 9, NvsmiErrorKind::driver_not_loaded, nullptr,
       "couldn't communicate with the NVIDIA driver"},
      {"issue__nvml-driver-library-version-mismatch__ci-log.txt", 18, NvsmiErrorKind::driver_library_mismatch, nullptr,
       "Failed to initialize NVML: Driver/library version mismatch"},
      {"issue__nvml-driver-library-version-mismatch__old.txt", std::nullopt, NvsmiErrorKind::driver_library_mismatch,
       nullptr, "Driver/library version mismatch"},
      {"issue__gpu-is-lost__linux.txt", 15, NvsmiErrorKind::gpu_lost, "0000:02:00.0", "GPU is lost"},
      {"issue__gpu-is-lost__windows-console-wrapped.txt", std::nullopt, NvsmiErrorKind::gpu_lost, "0000:03:00.0",
       "GPU is lost"},
      {"issue__device-handle-unknown-error.txt", 255, NvsmiErrorKind::gpu_lost, "0000:0B:00.0", "Unknown Error"},
      {"issue__device-handle-not-found.txt", std::nullopt, NvsmiErrorKind::gpu_lost, "0000:01:00.0", "Not Found"},
      {"eessi__no-devices-were-found__exit6.txt", 6, NvsmiErrorKind::no_devices, nullptr, "No devices were found"},
      {"issue__no-devices-were-found__with-syslog.txt", std::nullopt, NvsmiErrorKind::no_devices, nullptr,
       "No devices were found"},
      {"nvidia-docs__nvml-insufficient-permissions-selinux.txt", 4, NvsmiErrorKind::insufficient_permissions, nullptr,
       "Insufficient Permissions"},
      {"nvidia-docs__nvml-unknown-error-container-lost-gpu.txt", 255, NvsmiErrorKind::nvml_unknown_error, nullptr,
       "Failed to initialize NVML: Unknown Error"},
      {"azhpc__nvidia-smi-table__8x-v100__460.32.03__WARNING-infoROM-corrupted.txt", 0,
       NvsmiErrorKind::inforom_corrupted, "0008:00:00.0", "infoROM is corrupted at gpu 0008:00:00.0"},
      {"nvidia-docs__nvidia-smi-infoROM-corrupted-rc14__validator-log.txt", 14, NvsmiErrorKind::inforom_corrupted,
       "0000:0B:00.0", "infoROM is corrupted at gpu 0000:0B:00.0"},
  };
  for (const Case& c : cases) {
    SECTION(c.file) {
      // nvidia-smi prints these on stdout or stderr depending on version; try both.
      for (bool on_stderr : {false, true}) {
        std::string text = err(c.file);
        NvsmiDiagnosis d =
            on_stderr ? classify_nvidia_smi_run(c.rc, "", text) : classify_nvidia_smi_run(c.rc, text, "");
        CHECK(d.kind == c.kind);
        CHECK(d.exit_code == c.rc);
        INFO(d.message);
        CHECK(contains(d.message, c.quoted));
        CHECK(d.message.find('\n') == std::string::npos);
        CHECK(contains(d.excerpt, c.quoted));
        if (c.bus_id) {
          CHECK(d.pci_bus_id == std::string(c.bus_id));
          CHECK(contains(d.message, c.bus_id));
        } else {
          CHECK_FALSE(d.pci_bus_id);
        }
        CHECK(d.warning_only == (c.kind == NvsmiErrorKind::inforom_corrupted));
      }
    }
  }
}

TEST_CASE("gpu::classify_nvidia_smi_run: details of the decisive line", "[nvidia-smi]") {
  NvsmiDiagnosis ci = classify_nvidia_smi_run(18, err("issue__nvml-driver-library-version-mismatch__ci-log.txt"), "");
  CHECK(contains(ci.message, "NVML library version: 550.144"));
  NvsmiDiagnosis wrapped =
      classify_nvidia_smi_run(std::nullopt, err("issue__gpu-is-lost__windows-console-wrapped.txt"), "");
  CHECK(contains(wrapped.excerpt, "the system to recover this GPU"));  // the console's line wrap is kept
  NvsmiDiagnosis lost = classify_nvidia_smi_run(15, "", err("issue__gpu-is-lost__linux.txt"));
  CHECK(contains(lost.message, "(exit 15: The GPU has fallen off the bus or has otherwise become inaccessible)"));
  CHECK(contains(lost.message, "GPU 0000:02:00.0 does not answer"));
}

TEST_CASE("gpu::classify_nvidia_smi_run: nvidia-smi missing, exit codes alone, ok", "[nvidia-smi]") {
  CHECK(classify_nvidia_smi_run(127, "", "sh: 1: nvidia-smi: not found\n").kind == NvsmiErrorKind::nvidia_smi_missing);
  CHECK(classify_nvidia_smi_run(127, "", "bash: nvidia-smi: command not found\n").kind ==
        NvsmiErrorKind::nvidia_smi_missing);
  CHECK(classify_nvidia_smi_run(127, "", "").kind == NvsmiErrorKind::nvidia_smi_missing);
  CHECK(classify_nvidia_smi_run(126, "", "sh: 1: nvidia-smi: Permission denied\n").kind ==
        NvsmiErrorKind::insufficient_permissions);
  CHECK(classify_nvidia_smi_run(std::nullopt, "", "/bin/sh: nvidia-smi: No such file or directory").kind ==
        NvsmiErrorKind::nvidia_smi_missing);
  CHECK(classify_nvidia_smi_run(0, "<nvidia_smi_log/>", "").kind == NvsmiErrorKind::ok);
  CHECK(classify_nvidia_smi_run(std::nullopt, "", "").kind == NvsmiErrorKind::ok);
  NvsmiDiagnosis other = classify_nvidia_smi_run(42, "", "something odd\n");
  CHECK(other.kind == NvsmiErrorKind::unknown_error);
  CHECK(contains(other.message, "something odd"));
  CHECK(contains(other.message, "(exit 42)"));
  CHECK(classify_nvidia_smi_run(12, "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", "").kind ==
        NvsmiErrorKind::driver_not_loaded);
}

TEST_CASE("gpu::nvidia_smi_exit_code_meaning matches the man page's RETURN VALUE table", "[nvidia-smi]") {
  // Maps each code the man page lists to a kind for when nvidia-smi printed nothing useful.
  const std::map<int, NvsmiErrorKind> expected{
      {0, NvsmiErrorKind::ok},
      {2, NvsmiErrorKind::unknown_error},
      {3, NvsmiErrorKind::unknown_error},
      {4, NvsmiErrorKind::insufficient_permissions},
      {6, NvsmiErrorKind::no_devices},
      {8, NvsmiErrorKind::unknown_error},
      {9, NvsmiErrorKind::driver_not_loaded},
      {10, NvsmiErrorKind::unknown_error},
      {12, NvsmiErrorKind::driver_not_loaded},
      {13, NvsmiErrorKind::unknown_error},
      {14, NvsmiErrorKind::inforom_corrupted},
      {15, NvsmiErrorKind::gpu_lost},
      {255, NvsmiErrorKind::unknown_error},
  };
  std::istringstream in(err("nvidia-docs__nvidia-smi-return-codes-manpage.txt"));
  std::set<int> seen;
  for (std::string line; std::getline(in, line);) {
    std::size_t at = line.find("Return code ");
    if (at == std::string::npos || at + 12 >= line.size() || !std::isdigit(static_cast<unsigned char>(line[at + 12]))) {
      continue;  // prose ("Return code reflects whether ...")
    }
    std::string rest = line.substr(at + 12);
    int code = std::stoi(rest);
    std::string meaning = rest.substr(rest.find(" - ") + 3);
    INFO(line);
    CHECK(nvidia_smi_exit_code_meaning(code) == meaning);
    REQUIRE(expected.count(code) == 1);
    NvsmiDiagnosis d = classify_nvidia_smi_run(code, "", "");
    CHECK(d.kind == expected.at(code));
    if (code != 0) CHECK(contains(d.message, meaning));
    seen.insert(code);
  }
  CHECK(seen.size() == expected.size());
  CHECK(nvidia_smi_exit_code_meaning(7).empty());
}

TEST_CASE("gpu: the infoROM warning comes with good output, which is kept", "[nvidia-smi]") {
  SECTION("azhpc 8x V100 table: the warning names GPU 7 in another bus id spelling") {
    auto log =
        parse_nvidia_smi_table(err("azhpc__nvidia-smi-table__8x-v100__460.32.03__WARNING-infoROM-corrupted.txt"));
    REQUIRE(log);
    CHECK(log->driver_version == std::string("460.32.03"));
    REQUIRE(log->gpus.size() == 8);
    CHECK(log->gpus[0].product_name == std::string("Tesla V100-SXM2..."));
    CHECK(log->gpus[0].pci_bus_id == std::string("00000001:00:00.0"));
    CHECK(log->gpus[7].pci_bus_id == std::string("00000008:00:00.0"));
    CHECK(log->gpus[0].memory.total_mib == 32510);
    CHECK(*log->gpus[0].power.limit_w == Approx(300.0));
    CHECK(log->gpus[0].warnings.empty());
    REQUIRE(log->gpus[7].warnings.size() == 1);
    CHECK(log->gpus[7].warnings[0] == "WARNING: infoROM is corrupted at gpu 0008:00:00.0");
  }
  SECTION("NVIDIA docs: P100 table, warning, exit code 14") {
    auto log = parse_nvidia_smi_table(err("nvidia-docs__nvidia-smi-infoROM-corrupted-rc14__validator-log.txt"));
    REQUIRE(log);
    CHECK(log->driver_version == std::string("470.82.01"));
    REQUIRE(log->gpus.size() == 1);
    CHECK(log->gpus[0].product_name == std::string("Tesla P100-PCIE..."));
    CHECK(log->gpus[0].persistence_mode_enabled == true);
    CHECK(log->gpus[0].pci_bus_id == std::string("00000000:0B:00.0"));
    CHECK(log->gpus[0].temperature.gpu_c == 42);
    CHECK(log->gpus[0].memory.total_mib == 16280);
    REQUIRE(log->gpus[0].warnings.size() == 1);
    CHECK(contains(log->gpus[0].warnings[0], "infoROM is corrupted at gpu 0000:0B:00.0"));
  }
}

TEST_CASE("gpu::parse_kernel_gpu_events: Xid lines and NVRM failures", "[nvidia-smi]") {
  SECTION("dmesg --decode --time-format=iso: 629 Xid 13 and 7 Xid 43") {
    auto ev = parse_kernel_gpu_events(err("gpud__dmesg-decode-iso__xid-13.log"));
    REQUIRE(ev.size() == 636);
    std::size_t xid13 = 0;
    std::size_t xid43 = 0;
    for (const auto& e : ev) {
      CHECK(e.kind == KernelGpuEventKind::xid);
      xid13 += e.xid == 13;
      xid43 += e.xid == 43;
    }
    CHECK(xid13 == 629);
    CHECK(xid43 == 7);
    const KernelGpuEvent& first = ev[0];
    CHECK(first.pci_bus_id == std::string("0000:38:00.0"));
    CHECK_FALSE(first.pid);  // pid='<unknown>'
    CHECK_FALSE(first.process_name);
    CHECK(first.message == "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address");
    CHECK(first.timestamp == "kern  :warn  : 2025-01-21T02:21:33,498559+00:00");
    CHECK(first.line_number == 1);
  }
  SECTION("dmesg -T: Xid 119 GSP RPC timeout") {
    auto ev = parse_kernel_gpu_events(err("gpud__dmesg-with-xid-119.log"));
    REQUIRE(ev.size() == 5);
    CHECK(ev[0].xid == 119);
    CHECK(ev[0].pci_bus_id == std::string("0000:9B:00.0"));
    CHECK(ev[0].pid == 2024380L);
    CHECK(ev[0].process_name == std::string("nvidia-smi"));
    CHECK(ev[0].timestamp == "[Sun Feb 23 16:24:18 2025]");
    CHECK(contains(ev[0].message, "Timeout after 6s of waiting for RPC response from GPU4 GSP!"));
    CHECK(ev[3].process_name == std::string("cache_mgr_main"));
  }
  SECTION("/dev/kmsg records without NVIDIA GPU events") {
    CHECK(parse_kernel_gpu_events(err("gpud__kmsg-1.log")).empty());
  }
  SECTION("fallen off the bus over three lines, then the probe failure") {
    auto ev = parse_kernel_gpu_events(err("issue__dmesg-gpu-fallen-off-bus-no-xid.log"));
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].kind == KernelGpuEventKind::fallen_off_bus);
    CHECK(ev[0].pci_bus_id == std::string("0000:B3:00.0"));
    CHECK(ev[0].line_number == 1);
    CHECK(ev[0].timestamp == "[ 1843.308145]");
    CHECK(contains(ev[0].message, "fallen off the bus"));
    CHECK(ev[1].kind == KernelGpuEventKind::probe_failed);
    // As nvidia-smi output it would read as a lost GPU too.
    CHECK(classify_nvidia_smi_run(std::nullopt, err("issue__dmesg-gpu-fallen-off-bus-no-xid.log"), "").kind ==
          NvsmiErrorKind::gpu_lost);
  }
  SECTION("nouveau owns the devices") {
    auto ev = parse_kernel_gpu_events(err("issue__dmesg-nvrm-probe-not-called-nouveau.log"));
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].kind == KernelGpuEventKind::probe_failed);
    CHECK(contains(ev[0].message, "was not called for 3 device(s)"));
  }
  SECTION("RmInitAdapter failed (GSP firmware, dmesg)") {
    auto ev = parse_kernel_gpu_events(err("issue__dmesg-rminitadapter-gsp-failed.log"));
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].kind == KernelGpuEventKind::rm_init_adapter_failed);
    CHECK(ev[0].pci_bus_id == std::string("0000:98:00.0"));
    CHECK(contains(ev[0].message, "(0x62:0x65:1792)"));
  }
  SECTION("RmInitAdapter failed (journalctl, followed by an oops)") {
    auto ev = parse_kernel_gpu_events(err("issue__journal-rminitadapter-failed-oops.log"));
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].pci_bus_id == std::string("0000:13:00.0"));
    CHECK(ev[0].timestamp == "Feb 09 15:47:06 debian kernel");
  }
  SECTION("syslog lines pasted after \"No devices were found\"") {
    auto ev = parse_kernel_gpu_events(err("issue__no-devices-were-found__with-syslog.txt"));
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].kind == KernelGpuEventKind::rm_init_adapter_failed);
    CHECK(ev[0].pci_bus_id == std::string("0000:01:00.0"));
  }
  SECTION("older Xid formats") {
    auto ev = parse_kernel_gpu_events(
        "[  12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "[  12.4] NVRM: Xid (0000:03:00): 31, Ch 00000010, engmask 00000101, intr 10000000\n");
    REQUIRE(ev.size() == 2);  // an Xid 79 is one event, not also a fallen_off_bus one
    CHECK(ev[0].xid == 79);
    CHECK(ev[0].pid == 1234L);
    CHECK(ev[0].message == "GPU has fallen off the bus.");
    CHECK(ev[1].xid == 31);
    CHECK(ev[1].pci_bus_id == std::string("0000:03:00.0"));
  }
}

TEST_CASE("gpu: every nvidia-smi-errors fixture is covered", "[nvidia-smi]") {
  const std::set<std::string> covered{
      "azhpc__nvidia-smi-table__8x-v100__460.32.03__WARNING-infoROM-corrupted.txt",
      "eessi__no-devices-were-found__exit6.txt",
      "gpud__dmesg-decode-iso__xid-13.log",
      "gpud__dmesg-with-xid-119.log",
      "gpud__kmsg-1.log",
      "issue__device-handle-not-found.txt",
      "issue__device-handle-unknown-error.txt",
      "issue__dmesg-gpu-fallen-off-bus-no-xid.log",
      "issue__dmesg-nvrm-probe-not-called-nouveau.log",
      "issue__dmesg-rminitadapter-gsp-failed.log",
      "issue__gpu-is-lost__linux.txt",
      "issue__gpu-is-lost__windows-console-wrapped.txt",
      "issue__journal-rminitadapter-failed-oops.log",
      "issue__no-devices-were-found__with-syslog.txt",
      "issue__nvidia-smi-failed-communicate-driver.txt",
      "issue__nvml-driver-library-version-mismatch__ci-log.txt",
      "issue__nvml-driver-library-version-mismatch__old.txt",
      "nvidia-docs__nvidia-smi-infoROM-corrupted-rc14__validator-log.txt",
      "nvidia-docs__nvidia-smi-return-codes-manpage.txt",
      "nvidia-docs__nvml-insufficient-permissions-selinux.txt",
      "nvidia-docs__nvml-unknown-error-container-lost-gpu.txt",
  };
  for (const auto& e : std::filesystem::directory_iterator(fixture_path("nvidia-smi-errors"))) {
    INFO(e.path().filename().string());
    CHECK(covered.count(e.path().filename().string()) == 1);
  }
}

TEST_CASE("gpu::to_json(NvsmiDiagnosis, KernelGpuEvent)", "[nvidia-smi]") {
  nlohmann::json d = classify_nvidia_smi_run(15, err("issue__gpu-is-lost__linux.txt"), "");
  CHECK(d["kind"] == "gpu_lost");
  CHECK(d["pciBusId"] == "0000:02:00.0");
  CHECK(d["exitCode"] == 15);
  CHECK(d["warningOnly"] == false);
  nlohmann::json e = parse_kernel_gpu_events(err("gpud__dmesg-with-xid-119.log")).at(0);
  CHECK(e["kind"] == "xid");
  CHECK(e["xid"] == 119);
  CHECK(e["pid"] == 2024380);
  CHECK(e["processName"] == "nvidia-smi");
  // Garbage bytes never make the JSON invalid.
  nlohmann::json g = classify_nvidia_smi_run(3, "\xff\xfe bad \x01 bytes", "");
  CHECK_NOTHROW(g.dump());
}
