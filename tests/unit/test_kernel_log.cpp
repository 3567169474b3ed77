// The kernel-log reader over real captures (fixtures/kernel-log and nvidia-smi-errors; SOURCES.md
// says where each came from) and the time prefixes of journalctl and dmesg.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/xid.hpp"

using namespace gpuctl::gpu;
using gpuctl::testing::fixture;

TEST_CASE("kernel_log: dmesg Xid and SXid lines, with their follow-ups", "[kernel_log]") {
  auto ev = parse_kernel_log(fixture("kernel-log/gpud__sxid-readme__dmesg-xid-79-sxid-20034.log"));
  REQUIRE(ev.size() == 10);  // Xid 79, fallen off the bus, 8 SXid lines
  CHECK(ev[0].kind == KernelLogEventKind::xid);
  CHECK(ev[0].code == 79);
  CHECK(ev[0].pci_bus_id == "0000:91:00.0");
  CHECK_FALSE(ev[0].pid);  // pid='<unknown>'
  CHECK_FALSE(ev[0].process_name);
  CHECK(ev[0].message == "GPU has fallen off the bus.");
  CHECK(ev[0].time_text == "6781741.548779");
  CHECK(ev[0].monotonic_s == Approx(6781741.548779));
  CHECK(ev[0].line_number == 3);
  CHECK(ev[1].kind == KernelLogEventKind::fallen_off_bus);
  CHECK(ev[2].kind == KernelLogEventKind::sxid);
  CHECK(ev[2].device == "nvidia-nvswitch1");
  CHECK(ev[2].pci_bus_id == "0000:06:00.0");
  CHECK(ev[2].code == 20034);
  CHECK(ev[2].sxid_fatal == true);
  CHECK(ev[2].message == "Fatal, Link 48 LTSSM Fault Up");
  CHECK_FALSE(ev[4].sxid_fatal);  // "Severity 1 Engine instance 60 ..."
  CHECK(ev[2].line ==
        "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up");
}

TEST_CASE("kernel_log: dmesg -T keeps the local time as printed; pid and name", "[kernel_log]") {
  auto ev = parse_kernel_log(fixture("kernel-log/issue__akash-support-244__dmesg-T-xid-43-31-94.log"));
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].time_text == "Wed Jul 31 23:14:18 2024");
  CHECK_FALSE(ev[0].monotonic_s);
  CHECK_FALSE(ev[0].unix_time_s);
  CHECK(ev[0].pid == 1045242);
  CHECK(ev[0].process_name == "pt_main_thread");
  CHECK(ev[2].code == 31);
  CHECK(ev[2].process_name == "python3.10");
  CHECK(ev[3].code == 94);
  CHECK_FALSE(ev[3].pid);
  CHECK(ev[3].message == "Contained: SM (0x1). RST: No, D-RST: No");
}

TEST_CASE("kernel_log: ISO times (dmesg --time-format iso, talosctl, journalctl short-iso)", "[kernel_log]") {
  auto sx = parse_kernel_log(fixture("kernel-log/gpud-pr-338__dmesg-decode-iso__sxid-12028-data.log"));
  REQUIRE(sx.size() == 1);
  CHECK(sx[0].time_text == "2025-01-25T10:34:54,859532+00:00");
  CHECK(sx[0].unix_time_s == 1737801294);
  CHECK(sx[0].code == 12028);
  CHECK_FALSE(sx[0].sxid_fatal);
  auto talos =
      parse_kernel_log(fixture("kernel-log/issue__open-gpu-kernel-modules-446__talos-kern-xid-154-reset-required.log"));
  REQUIRE(talos.size() == 1);
  CHECK(talos[0].code == 154);
  CHECK(talos[0].recovery_action == GpuRecoveryAction::gpu_reset);
  CHECK(talos[0].unix_time_s == 1776893451);
  // journalctl -k -o short-iso prints "+0000" (see journalctl(1), OUTPUT FORMATS); the Xid text is
  // the talos capture's.
  auto iso = parse_kernel_log(
      "2026-04-22T21:30:51+0000 node-1 kernel: NVRM: Xid (PCI:0000:0b:00): 154, GPU recovery "
      "action changed from 0x0 (None) to 0x2 (Node Reboot Required)");
  REQUIRE(iso.size() == 1);
  CHECK(iso[0].unix_time_s == 1776893451);
  CHECK(iso[0].recovery_action == GpuRecoveryAction::node_reboot);
}

TEST_CASE("kernel_log: journalctl's default and short-precise prefixes", "[kernel_log]") {
  auto ev =
      parse_kernel_log(fixture("kernel-log/issue__open-gpu-kernel-modules-1150__journal-xid-45-after-149-145.log"));
  REQUIRE(ev.size() == 7);
  CHECK(ev[0].code == 45);
  CHECK(ev[0].pci_bus_id == "0000:DC:00.0");
  CHECK(ev[0].message == "Ch 00000001 caused by previous Xid 149");
  CHECK(ev[0].time_text.empty());
  auto precise = parse_kernel_log(
      "Feb 14 05:03:41.123456 gpu-1 kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has "
      "fallen off the bus.");
  REQUIRE(precise.size() == 1);
  CHECK(precise[0].time_text == "Feb 14 05:03:41.123456");
  CHECK_FALSE(precise[0].unix_time_s);
}

TEST_CASE("kernel_log: the multi-line fallen-off-bus form and RmInitAdapter", "[kernel_log]") {
  auto ev = parse_kernel_log(fixture("nvidia-smi-errors/issue__dmesg-gpu-fallen-off-bus-no-xid.log"));
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == KernelLogEventKind::fallen_off_bus);
  CHECK(ev[0].pci_bus_id == "0000:B3:00.0");
  auto rm = parse_kernel_log(fixture("nvidia-smi-errors/issue__dmesg-rminitadapter-gsp-failed.log"));
  REQUIRE_FALSE(rm.empty());
  CHECK(rm[0].kind == KernelLogEventKind::rm_init_adapter_failed);
  CHECK(rm[0].pci_bus_id.has_value());
}

TEST_CASE("kernel_log: NVLink5 and GSP captures, and lines that only look alike", "[kernel_log]") {
  auto nv = parse_kernel_log(fixture("kernel-log/gpud-pr-1160__xid-144-149-nvlink5.log"));
  REQUIRE(nv.size() == 3);
  CHECK(nv[1].code == 149);
  auto gsp = parse_kernel_log(fixture("nvidia-smi-errors/gpud__dmesg-with-xid-119.log"));
  REQUIRE(gsp.size() == 5);
  CHECK(gsp[0].process_name == "nvidia-smi");
  CHECK(gsp[0].pid == 2024380);
  CHECK(parse_kernel_log("NVRM: Xid (PCI:0000:01:00): garbled\nNVRM: Xid\nnvidia-nvswitch0: SXid (x").empty());
  CHECK(parse_kernel_log(fixture("nvidia-smi-errors/gpud__kmsg-1.log")).empty());
  nlohmann::json j = nv[0];
  CHECK(j["code"] == 144);
}

TEST_CASE("kernel_log: a flood keeps the newest events", "[kernel_log]") {
  std::string log;
  for (std::size_t i = 0; i < kMaxKernelLogEvents + 5; ++i) log += "NVRM: Xid (PCI:0000:01:00): 13, x\n";
  auto ev = parse_kernel_log(log);
  CHECK(ev.size() == kMaxKernelLogEvents);
  CHECK(ev.back().line_number == static_cast<int>(kMaxKernelLogEvents + 5));
}
