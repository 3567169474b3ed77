// diagnose's node-side checks over probes read from real captures (nvidia-smi XML, -q text,
// error messages, kernel logs, nvlink -s), through read_probe_run as the fan-out hands them over.
// Each check fires on the node made to fail its way and stays silent on a healthy one.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/fake_ssh_runner.hpp"
#include "fakes/fixtures.hpp"
#include "fakes/probe_transcript.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"

using namespace gpuctl::ops::diagnose;
using gpuctl::ops::NodeProbe;
using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::probe_control;
using gpuctl::testing::probe_done;
using gpuctl::testing::probe_marker;
using gpuctl::testing::probe_start;
using gpuctl::testing::probe_step;
using gpuctl::testing::dx::contains;
using gpuctl::testing::dx::h100_node;
using nlohmann::json;

namespace {

const std::string kXml2070 = "nvidia-smi-xml/telegraf__2x-rtx-2070__590.44.01__v13.xml";
const std::string kList2070 =
    "GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\n"
    "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\n";

// A node's probe transcript: its kernel log (journal form) and then the given GPU steps.
std::string transcript(const std::string& gpu_steps, const std::string& kernel = "",
                       const std::string& extra = probe_control("nvswitches 0")) {
  return cat(probe_start(), probe_control("kernel-source journal"), probe_step("kernel", kernel, "", 0), extra,
             gpu_steps, probe_done());
}
std::string healthy_2070(const std::string& xml = fixture(kXml2070), const std::string& kernel = "",
                         const std::string& extra = probe_control("nvswitches 0")) {
  return transcript(cat(probe_step("all", xml, "", 0), probe_step("list", kList2070, "", 0)), kernel, extra);
}

NodeProbe probe_of(const std::string& node, const std::string& out, int rc = 0) {
  return gpuctl::ops::read_probe_run({node, "10.0.0.7", ""}, gpuctl::testing::remote_ran(out, rc));
}

json ready_node(const std::string& name, int gpus, bool ready = true) {
  json n = h100_node(name, gpus, gpus);
  n["status"]["conditions"][0]["status"] = ready ? "True" : "False";
  return n;
}

Snapshot with_probes(std::vector<json> nodes, std::vector<NodeProbe> probes, std::vector<json> pods = {}) {
  Snapshot s = gpuctl::testing::dx::snapshot({{Source::nodes, std::move(nodes)}, {Source::pods, std::move(pods)}});
  for (auto& p : probes) {
    std::string name = p.node;
    s.probes.emplace(std::move(name), std::move(p));
  }
  return s;
}

std::string replaced(std::string text, const std::string& from, const std::string& to, bool all = false) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = all ? text.find(from, at + to.size()) : std::string::npos) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// A kernel log line in journalctl's short-iso form, `minutes_ago` before the snapshot's clock.
std::string journal_line(int minutes_ago, const std::string& message) {
  auto t = *gpuctl::util::parse_rfc3339(gpuctl::testing::dx::kNow) - std::chrono::minutes(minutes_ago);
  std::string iso = gpuctl::util::format_rfc3339(t);  // 2026-12-06T11:50:00Z
  return cat(iso.substr(0, 19), "+0000 gpu-7 kernel: ", message, "\n");
}

}  // namespace

TEST_CASE("driver-broken: each nvidia-smi failure, with the message verbatim and its remedy", "[diagnose][node-side]") {
  const std::string not_loaded = fixture("nvidia-smi-errors/issue__nvidia-smi-failed-communicate-driver.txt");
  const std::string mismatch = fixture("nvidia-smi-errors/issue__nvml-driver-library-version-mismatch__old.txt");
  auto failing = [](const std::string& out, int rc) { return transcript(probe_step("all", out, "", rc)); };
  Snapshot s = with_probes({ready_node("ok-0", 2), ready_node("gone-0", 8), ready_node("mism-0", 8),
                            ready_node("down-0", 8, false), ready_node("bare-0", 8)},
                           {probe_of("ok-0", healthy_2070()), probe_of("gone-0", failing(not_loaded, 9)),
                            probe_of("mism-0", failing(mismatch, 18)), probe_of("down-0", failing(not_loaded, 9)),
                            probe_of("bare-0", failing("sh: 1: nvidia-smi: not found", 127))});
  auto found = check_driver_broken(s);
  REQUIRE(found.size() == 4);
  std::map<std::string, Finding> by_node;
  for (auto& f : found) by_node[f.node] = f;
  CHECK_FALSE(by_node.count("ok-0"));
  CHECK(by_node["gone-0"].severity == Severity::critical);  // Ready: Kubernetes still sends work there
  CHECK(contains(by_node["gone-0"].summary, "driver_not_loaded"));
  CHECK(contains(by_node["gone-0"].summary, "which Kubernetes still sees Ready"));
  CHECK(contains(by_node["gone-0"].evidence.at(0).text, "couldn't communicate with the NVIDIA driver"));
  CHECK(by_node["mism-0"].severity == Severity::critical);
  CHECK(contains(by_node["mism-0"].evidence.at(0).text, "Driver/library version mismatch"));
  CHECK(contains(by_node["mism-0"].remedy.at(0), "gpuctl drain mism-0"));
  CHECK(contains(by_node["mism-0"].remedy.at(1), "reboot"));
  CHECK(by_node["down-0"].severity == Severity::error);  // NotReady: node-not-ready speaks for it
  CHECK(by_node["bare-0"].severity == Severity::warning);
  CHECK(contains(by_node["bare-0"].summary, "/run/nvidia/driver"));
}

TEST_CASE("driver-broken: one lost GPU of three, and a probe that hung in nvidia-smi", "[diagnose][node-side]") {
  const std::string lost = fixture("nvidia-smi-errors/issue__gpu-is-lost__linux.txt");
  const std::string list =
      "GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\n"
      "GPU 1: Tesla T4 (UUID: GPU-11111111-91dd-3774-a5cb-99096249601a)\n"
      "GPU 2: Tesla T4 (UUID: GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124)\n";
  std::string partial = transcript(
      cat(probe_step("all", "", lost, 15), probe_step("list", list, "", 0), probe_control("indices list 0 1 2"),
          probe_step("gpu-0", fixture("nvidia-smi-xml/telegraf__tesla-t4__515.105.01__v11.xml"), "", 0),
          probe_step("gpu-1", lost, "", 15),
          probe_step("gpu-2", fixture("nvidia-smi-xml/telegraf__tesla-t4__512.78__v11.xml"), "", 0)));
  // Killed at the deadline while `nvidia-smi -q -x` hung: the kernel log it printed first stays.
  std::string xid79 =
      journal_line(3, "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
  std::string hung = cat(probe_start(), probe_control("kernel-source journal"), probe_step("kernel", xid79, "", 0),
                         probe_control("nvswitches 0"), probe_marker(), "begin all\n");
  gpuctl::util::ProcessResult killed;
  killed.exit_code = -1;
  killed.stdout_text = hung;
  killed.timed_out = true;
  NodeProbe hung_probe =
      gpuctl::ops::read_probe_run({"hung-0", "10.0.0.8", ""}, gpuctl::testing::classified_run(killed));
  REQUIRE(hung_probe.outcome == "timed_out");
  REQUIRE(hung_probe.report.has_value());

  Snapshot s = with_probes({ready_node("t4-0", 3), ready_node("hung-0", 8)}, {probe_of("t4-0", partial), hung_probe});
  auto found = check_driver_broken(s);
  REQUIRE(found.size() == 2);
  CHECK(found[0].node == "t4-0");
  CHECK(contains(found[0].summary, "GPU 1 (0000:02:00.0) of t4-0 fails in nvidia-smi (gpu_lost); 2 of 3 GPUs answer"));
  CHECK(contains(found[0].evidence.at(0).text, "GPU is lost"));
  CHECK(found[1].node == "hung-0");
  CHECK(found[1].severity == Severity::critical);
  CHECK(contains(found[1].summary, "did not finish before the deadline"));
  // Reached, so not unreachable; and the Xid it printed before hanging is judged.
  CHECK(check_node_unreachable(s).empty());
  auto xids = check_xid_errors(s);
  REQUIRE(xids.size() == 1);
  CHECK(xids[0].node == "hung-0");
  CHECK(xids[0].severity == Severity::critical);
  CHECK(contains(xids[0].summary, "Xid 79 (GPU has fallen off the bus"));
}

TEST_CASE("node-unreachable: ssh failures joined with what Kubernetes says", "[diagnose][node-side]") {
  auto ssh_fails = [](const std::string& node, const std::string& err) {
    return gpuctl::ops::read_probe_run({node, "10.0.0.9", ""}, gpuctl::testing::ssh_failed(err));
  };
  json partitioned = ready_node("net-0", 8);
  partitioned["status"]["conditions"].push_back({{"type", "NetworkUnavailable"}, {"status", "True"}});
  Snapshot s = with_probes({ready_node("ok-0", 2), ready_node("mgmt-0", 8), ready_node("dead-0", 8, false),
                            ready_node("key-0", 8), partitioned},
                           {probe_of("ok-0", healthy_2070()),
                            ssh_fails("mgmt-0", "ssh: connect to host 10.0.0.9 port 22: Connection timed out"),
                            ssh_fails("dead-0", "ssh: connect to host 10.0.0.9 port 22: No route to host"),
                            ssh_fails("key-0", "ubuntu@10.0.0.9: Permission denied (publickey)."),
                            ssh_fails("net-0", "ssh: connect to host 10.0.0.9 port 22: Connection timed out")});
  std::map<std::string, Finding> by_node;
  for (auto& f : check_node_unreachable(s)) by_node[f.node] = f;
  REQUIRE(by_node.size() == 4);
  CHECK(contains(by_node["mgmt-0"].summary, "while Kubernetes sees it Ready: the management network or ssh"));
  CHECK(contains(by_node["dead-0"].summary, "NotReady): the node is down or cut off"));
  CHECK(contains(by_node["key-0"].summary, "ssh configuration problem"));
  CHECK(contains(by_node["net-0"].summary, "NetworkUnavailable=True"));
  CHECK(contains(by_node["key-0"].evidence.at(0).text, "Permission denied"));
  // The verdict: the node's own first layer.
  Report r = run_checks(s, {find_check("node-unreachable")});
  for (const auto& v : r.verdicts) {
    if (v.node == "ok-0") CHECK_FALSE(v.layer.has_value());
    if (v.node == "mgmt-0") CHECK(v.layer == Layer::reachable);
  }
}

TEST_CASE("gpu-count-mismatch and driver-version-skew", "[diagnose][node-side]") {
  json labelled = ready_node("lab-0", 2);
  labelled["metadata"]["labels"]["nvidia.com/gpu.count"] = "4";
  json old = ready_node("old-0", 2);
  old["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "535.104.05";
  json ok2 = ready_node("ok-1", 2);
  Snapshot s = with_probes({ready_node("ok-0", 2), ok2, ready_node("few-0", 8), labelled, old},
                           {probe_of("ok-0", healthy_2070()), probe_of("ok-1", healthy_2070()),
                            probe_of("few-0", healthy_2070()), probe_of("lab-0", healthy_2070())});
  std::map<std::string, Finding> count;
  for (auto& f : check_gpu_count_mismatch(s)) count[f.node] = f;
  REQUIRE(count.size() == 2);
  CHECK(contains(count["few-0"].summary,
                 "nvidia-smi sees 2, the device plugin registered 8 (capacity); 6 GPU(s) missing"));
  CHECK(contains(count["lab-0"].summary, "GFD's nvidia.com/gpu.count says 4"));
  CHECK(count["few-0"].evidence.at(0).source == "ssh few-0: nvidia-smi -q -x");

  // The same node read another way: the finding names what read it, never ssh.
  for (const std::string via : {"pod", "prometheus"}) {
    NodeProbe other = probe_of("few-0", healthy_2070());
    other.via = via;
    auto found = check_gpu_count_mismatch(with_probes({ready_node("few-0", 8)}, {other}));
    REQUIRE(found.size() == 1);
    CHECK(found[0].evidence.at(0).source ==
          (via == "pod" ? "probe pod on few-0: nvidia-smi -q -x" : "Prometheus few-0: dcgm-exporter"));
    CHECK(contains(found[0].summary, via == "pod" ? "nvidia-smi sees 2" : "the DCGM exporter sees 2"));
  }

  // The probed nodes run 590.44.01 (the capture); old-0 is not probed and its label says 535.
  // Their pools differ by product (H100 label versus the RTX 2070 the probe saw), so the label
  // node joins the pool of its label: make the probed ones say the same product.
  auto skew = check_driver_version_skew(s);
  CHECK(skew.empty());
  for (auto& [name, p] : s.probes) {
    for (auto& g : p.report->gpus) g.product_name = std::string("NVIDIA-H100-80GB-HBM3");
  }
  skew = check_driver_version_skew(s);
  REQUIRE(skew.size() == 1);
  CHECK(skew[0].node == "old-0");
  CHECK(
      contains(skew[0].summary, "old-0 runs driver 535.104.05, older than the NVIDIA-H100-80GB-HBM3 pool's 590.44.01"));
  CHECK(contains(skew[0].summary, "590.44.01 on 4 nodes"));
  CHECK(contains(skew[0].evidence.at(0).source, "label"));
}

TEST_CASE("xid-errors: the catalogue's action per GPU, the window, application codes", "[diagnose][node-side]") {
  std::string hw = cat(
      journal_line(10, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
      journal_line(600,
                   "NVRM: Xid (PCI:0000:02:00): 48, pid=1234, name=python, An uncorrectable double bit error (DBE) has "
                   "been detected on GPU in the framebuffer at partition 6, subpartition 0."));
  std::string app = journal_line(5, "NVRM: Xid (PCI:0000:01:00): 43, pid=1818990, name=python3, Ch 00000001");
  Snapshot s = with_probes({ready_node("hw-0", 2), ready_node("app-0", 2), ready_node("ok-0", 2)},
                           {probe_of("hw-0", healthy_2070(fixture(kXml2070), hw)),
                            probe_of("app-0", healthy_2070(fixture(kXml2070), app)), probe_of("ok-0", healthy_2070())});
  auto found = check_xid_errors(s);
  REQUIRE(found.size() == 2);
  // 79 within the hour is critical; the 48 ten hours ago is outside --since 1h.
  CHECK(found[0].node == "hw-0");
  CHECK(found[0].severity == Severity::critical);
  CHECK_THAT(found[0].summary,
             Catch::Contains("GPU 0 (0000:01:00.0) on hw-0, last 60m: Xid 79 (GPU has fallen off the bus"));
  CHECK_THAT(found[0].summary, Catch::EndsWith("x1: RESTART_BM"));
  CHECK(contains(found[0].evidence.at(0).text, "GPU has fallen off the bus"));
  CHECK(contains(found[0].remedy.at(1), "ssh hw-0 sudo reboot"));
  CHECK(found[1].node == "app-0");
  CHECK(found[1].severity == Severity::info);  // the app faulted, the GPU is fine
  CHECK(contains(found[1].remedy.at(0), "the application faulted"));

  s.settings.since = std::chrono::hours(12);
  found = check_xid_errors(s);
  REQUIRE(found.size() == 3);
  CHECK(contains(found[1].summary, "Xid 48"));

  // A node whose kernel log could not be read says so (info), instead of passing as clean.
  std::string refused = cat(probe_start(), probe_control("kernel-source none"),
                            probe_step("kernel", "", "dmesg: read kernel buffer failed: Operation not permitted", 0),
                            probe_step("all", fixture(kXml2070), "", 0), probe_done());
  Snapshot blind = with_probes({ready_node("blind-0", 2)}, {probe_of("blind-0", refused)});
  auto b = check_xid_errors(blind);
  REQUIRE(b.size() == 1);
  CHECK(b[0].severity == Severity::info);
  CHECK(contains(b[0].evidence.at(0).text, "Operation not permitted"));
  CHECK(contains(b[0].remedy.at(0), "ssh user"));

  // An unprivileged probe pod skips the kernel log: the remedy is the privileged pod, not ssh.
  std::string unprivileged = cat(probe_start(), probe_control("kernel-source skipped"),
                                 probe_step("all", fixture(kXml2070), "", 0), probe_done());
  Snapshot pod = with_probes({ready_node("pod-0", 2)}, {probe_of("pod-0", unprivileged)});
  auto p = check_xid_errors(pod);
  REQUIRE(p.size() == 1);
  CHECK(p[0].severity == Severity::info);
  CHECK(contains(p[0].evidence.at(0).text, "--probe-privileged"));
  CHECK(contains(p[0].remedy.at(0), "--via pod --probe-privileged -l kubernetes.io/hostname=pod-0"));
}

TEST_CASE("ecc-errors, gpu-throttled, gpu-memory-high, persistence-mode-off over edited captures",
          "[diagnose][node-side]") {
  // The capture as a failing GPU reports it: one counter or flag changed, the rest real.
  const std::string a100 = fixture("nvidia-smi-xml/netdata__a100-sxm4-40gb-mig__510.47.03__v11.xml");
  const std::string a10g = fixture("nvidia-smi-xml/telegraf__a10g__515.105.01__v11.xml");
  std::string ecc =
      replaced(a100, "<dram_uncorrectable>N/A</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>");
  std::string remap = replaced(a10g, "<remapped_row_pending>No</remapped_row_pending>",
                               "<remapped_row_pending>Yes</remapped_row_pending>");
  remap = replaced(remap, "<remapped_row_failure>No</remapped_row_failure>",
                   "<remapped_row_failure>Yes</remapped_row_failure>");
  REQUIRE(ecc != a100);
  REQUIRE(remap != a10g);
  auto one = [](const std::string& xml) { return transcript(probe_step("all", xml, "", 0)); };
  Snapshot s = with_probes({ready_node("ecc-0", 1), ready_node("remap-0", 1), ready_node("ok-0", 1)},
                           {probe_of("ecc-0", one(ecc)), probe_of("remap-0", one(remap)), probe_of("ok-0", one(a100))});
  std::map<std::string, Finding> by_node;
  for (auto& f : check_ecc_errors(s)) by_node[f.node] = f;
  REQUIRE(by_node.size() == 2);
  CHECK(by_node["ecc-0"].severity == Severity::error);
  CHECK(contains(by_node["ecc-0"].summary, "3 uncorrectable ECC error(s) since the driver loaded"));
  CHECK(by_node["remap-0"].severity == Severity::critical);
  CHECK(contains(by_node["remap-0"].summary, "row remapping failed"));
  CHECK(contains(by_node["remap-0"].summary, "a row remap waits for a GPU reset"));

  // Throttling: the gpud mock of an A10 with HW Slowdown active (-q text form).
  auto text = gpuctl::gpu::parse_nvidia_smi_query_text(
      fixture("nvidia-smi-text/gpud-mock__nvidia-smi-q__a10__550.127.05__HAND-EDITED-hw-slowdown-active.txt"));
  REQUIRE(text);
  auto normal =
      gpuctl::gpu::parse_nvidia_smi_query_text(fixture("nvidia-smi-text/gpud-mock__nvidia-smi-q__a10__550.127.05.txt"));
  REQUIRE(normal);
  auto hand = [](const std::string& node, std::vector<gpuctl::gpu::GpuInfo> gpus) {
    NodeProbe p;
    p.node = node;
    p.outcome = "ok";
    p.report.emplace();
    p.report->status = gpuctl::gpu::ProbeStatus::ok;
    p.report->gpus = std::move(gpus);
    return p;
  };
  auto full = normal->gpus;
  full[0].memory.used_mib = *full[0].memory.total_mib - 100;
  full[0].persistence_mode_enabled = false;
  Snapshot t = with_probes({ready_node("hot-0", 1), ready_node("full-0", 1), ready_node("ok-0", 1)},
                           {hand("hot-0", text->gpus), hand("full-0", full), hand("ok-0", normal->gpus)},
                           {gpuctl::testing::dx::pod("ml", "train-0", "full-0", 1)});
  auto throttled = check_gpu_throttled(t);
  REQUIRE(throttled.size() == 1);
  CHECK(throttled[0].node == "hot-0");
  CHECK(contains(throttled[0].summary, "hw_slowdown"));
  auto memory = check_gpu_memory_high(t);
  REQUIRE(memory.size() == 1);
  CHECK(memory[0].node == "full-0");
  CHECK(contains(memory[0].summary, "threshold 90%"));
  CHECK(contains(memory[0].summary, "ml/train-0"));
  t.settings.gpu_memory_threshold_percent = 100;
  CHECK(check_gpu_memory_high(t).empty());
  auto persistence = check_persistence_mode_off(t);
  REQUIRE(persistence.size() == 1);
  CHECK(persistence[0].node == "full-0");
  // The pod holds 1 GPU and the A10 was idle (0%, no process) during the probe.
  auto idle = check_gpu_idle_allocated(t);
  REQUIRE(idle.size() == 1);
  CHECK(contains(idle[0].summary, "pods hold 1 GPU(s) but only 0 were busy"));
}

TEST_CASE("pcie-link-degraded, nvlink-down, fabric-manager-down", "[diagnose][node-side]") {
  // Both RTX 2070s run x8 of x16 (one slot shared by design): not degraded. One narrower than
  // its sibling is.
  std::string xml = fixture(kXml2070);
  std::size_t second = xml.find("<current_link_width>8x", xml.find("<current_link_width>8x") + 1);
  std::string narrowed = xml;
  narrowed.replace(second, std::string("<current_link_width>8x").size(), "<current_link_width>4x");
  std::string nvlinks =
      probe_step("nvlink", fixture("nvidia-smi-text/azhpc__nvidia-smi-nvlink-s__8x-v100__inactive-links.txt"), "", 0);
  std::string all_up = probe_step("nvlink", fixture("nvidia-smi-text/gpud__nvidia-smi-nvlink-status__a100.txt"), "", 0);
  auto with_nvlink = [&](const std::string& x, const std::string& nv) {
    return transcript(cat(probe_step("all", x, "", 0), probe_step("list", kList2070, "", 0), nv));
  };
  Snapshot s = with_probes(
      {ready_node("ok-0", 2), ready_node("narrow-0", 2), ready_node("links-0", 2), ready_node("fm-0", 2)},
      {probe_of("ok-0", with_nvlink(xml, all_up)), probe_of("narrow-0", with_nvlink(narrowed, all_up)),
       probe_of("links-0", with_nvlink(xml, nvlinks)),
       probe_of("fm-0",
                healthy_2070(xml, "", cat(probe_control("nvswitches 6"), probe_step("fabricmanager", "", "", 1))))});
  auto pcie = check_pcie_link_degraded(s);
  REQUIRE(pcie.size() == 1);
  CHECK(pcie[0].node == "narrow-0");
  CHECK(contains(pcie[0].summary, "GPU 1 (00000000:02:00.0) of narrow-0: PCIe link degraded (x4 of x16)"));

  // A lower generation counts only under load: the V100 at 91% trained down to gen 1 is slow.
  const std::string v100 = fixture("nvidia-smi-xml/datakit__tesla-v100-pcie-32gb__460.39__v11.xml");
  std::string slow = replaced(v100, "<current_link_gen>3</current_link_gen>", "<current_link_gen>1</current_link_gen>");
  REQUIRE(slow != v100);
  Snapshot v = with_probes({ready_node("v100-0", 1), ready_node("v100-1", 1)},
                           {probe_of("v100-0", transcript(probe_step("all", v100, "", 0))),
                            probe_of("v100-1", transcript(probe_step("all", slow, "", 0)))});
  auto loaded = check_pcie_link_degraded(v);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].node == "v100-1");
  CHECK(contains(loaded[0].summary, "(gen 1 of 3 at 91% load)"));

  auto nv = check_nvlink_down(s);
  REQUIRE(nv.size() == 4);  // the V100 capture: GPUs 3, 4, 5 and 6 have inactive links
  for (const auto& f : nv) CHECK(f.node == "links-0");
  CHECK(contains(nv[0].summary, "GPU 3 of links-0: 2 of 6 NVLinks inactive (links 3, 5)"));

  auto fm = check_fabric_manager_down(s);
  REQUIRE(fm.size() == 1);
  CHECK(fm[0].node == "fm-0");
  CHECK(fm[0].severity == Severity::critical);
  CHECK(contains(fm[0].summary, "6 NVSwitch device(s), no nv-fabricmanager process"));

  // Hopper: the GPU's own fabric state (the 8x H100 capture says Completed / Success).
  auto h100 = gpuctl::gpu::parse_nvidia_smi_query_text(
      fixture("nvidia-smi-text/gpud__nvidia-smi-q__8x-h100-80gb-hbm3__535.183.01.txt"));
  REQUIRE(h100);
  NodeProbe fine;
  fine.node = "h100-0";
  fine.outcome = "ok";
  fine.report.emplace();
  fine.report->gpus = h100->gpus;
  NodeProbe starting = fine;
  starting.node = "h100-1";
  starting.report->gpus[4].fabric.state = std::string("In Progress");
  Snapshot h = with_probes({ready_node("h100-0", 8), ready_node("h100-1", 8)}, {fine, starting});
  auto hf = check_fabric_manager_down(h);
  REQUIRE(hf.size() == 1);
  CHECK(hf[0].node == "h100-1");
  CHECK(contains(hf[0].summary, "fabric state In Progress"));
}

TEST_CASE("nvidia-smi-warnings: an infoROM warning is a finding, not ok", "[diagnose][node-side]") {
  std::string xml = fixture(kXml2070);
  std::string warned = transcript(cat(probe_step("all", xml, "WARNING: infoROM is corrupted at gpu 0000:01:00.0", 14),
                                      probe_step("list", kList2070, "", 0)));
  // gpus' outcome says so too (the README's inforom_corrupted), and the GPUs still count as answered.
  NodeProbe rom = probe_of("rom-0", warned);
  CHECK(rom.outcome == "inforom_corrupted");
  CHECK(rom.message == "GPU 0: WARNING: infoROM is corrupted at gpu 0000:01:00.0");
  CHECK(rom.answered());
  CHECK(rom.report->gpus.size() == 2);
  Snapshot s = with_probes({ready_node("rom-0", 2), ready_node("ok-0", 2)}, {rom, probe_of("ok-0", healthy_2070())});
  auto found = check_nvidia_smi_warnings(s);
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "rom-0");
  CHECK(contains(found[0].summary, "infoROM is corrupted"));
}
