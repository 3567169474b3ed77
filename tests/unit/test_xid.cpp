// The Xid/SXid catalogue and the classifier, over real captures (fixtures/kernel-log, SOURCES.md).
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/xid.hpp"

using namespace gpuctl::gpu;

namespace {
std::string klog(const std::string& name) { return gpuctl::testing::fixture("kernel-log/" + name); }
const XidVerdict& for_gpu(const std::vector<XidVerdict>& vs, const std::string& id) {
  auto it = std::find_if(vs.begin(), vs.end(), [&](const XidVerdict& v) { return v.pci_bus_id == id; });
  REQUIRE(it != vs.end());
  return *it;
}
}  // namespace

TEST_CASE("xid: the catalogue is sorted, sourced and separates app-level from hardware codes", "[xid]") {
  auto rows = xid_catalog();
  REQUIRE(rows.size() > 40);
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1].code < rows[i].code);
  for (const XidInfo& r : rows) {
    CHECK_FALSE(r.source.empty());
    CHECK_FALSE(r.mnemonic.empty());
  }
  for (int code : {13, 31, 43, 45, 68, 109}) {
    CHECK(device_plugin_ignores(code));
    CHECK(find_xid(code)->severity == XidSeverity::application);
  }
  for (int code : {48, 62, 64, 74, 79, 92, 94, 95}) {
    CHECK_FALSE(device_plugin_ignores(code));
    CHECK(find_xid(code)->severity == XidSeverity::hardware);
  }
  CHECK(find_xid(79)->action == XidAction::restart_bm);
  CHECK(find_xid(48)->action == XidAction::reset_gpu);
  CHECK(find_xid(63)->action == XidAction::ignore);
  CHECK(find_xid(119)->severity == XidSeverity::driver);
  CHECK(find_xid(2) == nullptr);
  CHECK(to_string(XidAction::restart_app) == "RESTART_APP");
  CHECK(to_string(XidAction::contact_support) == "CONTACT_SUPPORT");
  auto sx = sxid_catalog();
  for (std::size_t i = 1; i < sx.size(); ++i) CHECK(sx[i - 1].code < sx[i].code);
  CHECK(find_sxid(20034)->fatal);
  CHECK_FALSE(find_sxid(20009)->fatal);
}

TEST_CASE("xid: Xid 154's stated recovery action, label first", "[xid]") {
  CHECK(parse_recovery_action("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)") ==
        GpuRecoveryAction::node_reboot);
  CHECK(parse_recovery_action("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)") ==
        GpuRecoveryAction::gpu_reset);
  CHECK(parse_recovery_action("GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)") ==
        GpuRecoveryAction::gpu_reset);
  CHECK(parse_recovery_action("changed from 0x2 (Node Reboot Required) to 0x0 (None)") == GpuRecoveryAction::none);
  CHECK(parse_recovery_action("changed from 0x0 to 0x4") == GpuRecoveryAction::drain_and_reset);
  CHECK_FALSE(parse_recovery_action("changed from 0x0 to 0x9"));
  CHECK_FALSE(parse_recovery_action("GPU recovery action changed"));
  CHECK(to_xid_action(GpuRecoveryAction::node_reboot) == XidAction::restart_bm);
}

TEST_CASE("xid: a GPU off the bus wants a reboot, fatal SXids on every NVSwitch too", "[xid]") {
  auto events = parse_kernel_log(klog("gpud__sxid-readme__dmesg-xid-79-sxid-20034.log"));
  auto vs = classify_xid_events(events);
  const XidVerdict& gpu = for_gpu(vs, "0000:91:00.0");
  CHECK_FALSE(gpu.nvswitch);
  CHECK(gpu.action == XidAction::restart_bm);
  CHECK(gpu.severity == XidSeverity::hardware);
  REQUIRE(gpu.counts.size() == 2);  // Xid 79 and the "fallen off the bus" line
  CHECK(gpu.counts[0].code == 79);
  CHECK(gpu.counts[1].kind == KernelLogEventKind::fallen_off_bus);
  for (const char* sw : {"0000:05:00.0", "0000:06:00.0", "0000:07:00.0"}) {
    const XidVerdict& v = for_gpu(vs, sw);
    CHECK(v.nvswitch);
    CHECK(v.action == XidAction::restart_bm);
  }
  // nvswitch0 printed two headlines of 20034 and two follow-up lines: the headlines count.
  CHECK(for_gpu(vs, "0000:05:00.0").counts.at(0).count == 2);
}

TEST_CASE("xid: application-level codes are info with restart the app, a contained ECC error is hardware", "[xid]") {
  auto vs = classify_xid_events(parse_kernel_log(klog("issue__akash-support-244__dmesg-T-xid-43-31-94.log")));
  REQUIRE(vs.size() == 3);
  const XidVerdict& a = for_gpu(vs, "0000:00:05.0");
  CHECK(a.action == XidAction::ignore);  // Xid 43 x2, NVIDIA: IGNORE
  CHECK(a.severity == XidSeverity::application);
  CHECK(a.counts.at(0).count == 2);
  const XidVerdict& b = for_gpu(vs, "0000:00:07.0");
  CHECK(b.action == XidAction::restart_app);
  CHECK(b.severity == XidSeverity::application);
  const XidVerdict& c = for_gpu(vs, "0000:00:08.0");
  CHECK(c.action == XidAction::restart_app);
  CHECK(c.severity == XidSeverity::hardware);
}

TEST_CASE("xid: Xid 154 wins over the catalogue", "[xid]") {
  auto vs = classify_xid_events(
      parse_kernel_log(klog("issue__open-gpu-kernel-modules-446__talos-kern-xid-154-reset-required.log")));
  REQUIRE(vs.size() == 1);
  CHECK(vs[0].stated_recovery == GpuRecoveryAction::gpu_reset);
  CHECK(vs[0].action == XidAction::reset_gpu);
  // A 79 says reboot, but a later 154 that says "GPU Reset Required" is the driver's word.
  std::string log =
      "[1.0] NVRM: Xid (PCI:0000:5f:00): 79, GPU has fallen off the bus.\n"
      "[1.1] NVRM: Xid (PCI:0000:5f:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
      "(GPU Reset Required)\n";
  auto v2 = classify_xid_events(parse_kernel_log(log));
  REQUIRE(v2.size() == 1);
  CHECK(v2[0].action == XidAction::reset_gpu);
}

TEST_CASE("xid: repeats escalate, one app's flood does not", "[xid]") {
  std::string twice =
      "[1.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=a, An uncorrectable double bit error\n"
      "[2.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=2, name=b, An uncorrectable double bit error\n";
  auto v = classify_xid_events(parse_kernel_log(twice));
  CHECK(v.at(0).action == XidAction::restart_bm);
  std::string five;
  for (int i = 0; i < 5; ++i) five += "[1.0] NVRM: Xid (PCI:0000:3b:00): 62, pid=1, name=a, halt\n";
  CHECK(classify_xid_events(parse_kernel_log(five)).at(0).action == XidAction::contact_support);
  // gpud's capture: one app, hundreds of Xid 13 with pid '<unknown>': stays the app's problem.
  auto flood = classify_xid_events(
      parse_kernel_log(gpuctl::testing::fixture("nvidia-smi-errors/gpud__dmesg-decode-iso__xid-13.log")));
  for (const XidVerdict& g : flood) CHECK(g.action <= XidAction::restart_app);
  std::string two_apps =
      "[1.0] NVRM: Xid (PCI:0000:3b:00): 31, pid=10, name=a, MMU Fault\n"
      "[2.0] NVRM: Xid (PCI:0000:3b:00): 31, pid=20, name=b, MMU Fault\n";
  auto hw = classify_xid_events(parse_kernel_log(two_apps));
  CHECK(hw.at(0).action == XidAction::reset_gpu);
  CHECK(hw.at(0).severity == XidSeverity::hardware);
}

TEST_CASE("xid: verdicts serialize", "[xid]") {
  auto vs = classify_xid_events(parse_kernel_log(klog("gpud__sxid-readme__dmesg-xid-79-sxid-20034.log")));
  nlohmann::json j = vs.at(0);
  CHECK(j["action"] == "RESTART_BM");
  CHECK(j["counts"].size() == 2);
}
