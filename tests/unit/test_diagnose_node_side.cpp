// diagnose's node-side checks over probes read from real captures (nvidia-smi XML, -q text,
// error messages, kernel logs, nvlink -s), through read_probe_run as the fan-out hands them over.
// Each check fires on the node made to fail its way and stays silent on a healthy one.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "node_side_builders.hpp"

using namespace gpuctl::ops::diagnose;
using gpuctl::testing::probe_marker;
using gpuctl::testing::dx::contains;
using namespace gpuctl::testing::node_side;

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

    // Its node commands come in a node debug pod: this run did not use ssh, which may not reach it.
    Report report = run_checks(with_probes({ready_node("few-0", 8)}, {other}), {find_check("gpu-count-mismatch")});
    REQUIRE(report.findings.size() == 1);
    const auto& remedy = report.findings[0].remedy;
    REQUIRE(remedy.size() == 3);
    const std::string debug = "kubectl debug node/few-0 -it --profile=sysadmin --image=busybox:1.36 -- chroot /host ";
    CHECK(remedy[0] == debug + "sh -c 'nvidia-smi -L; lspci | grep -i nvidia'");
    CHECK(remedy[1].rfind("gpuctl drain few-0 ", 0) == 0);  // not a node command: as it was
    CHECK(remedy[2] == debug + "sudo reboot");
  }
  // Over ssh the remedies stay ssh's.
  Report over_ssh = run_checks(s, {find_check("gpu-count-mismatch")});
  REQUIRE_FALSE(over_ssh.findings.empty());
  CHECK(over_ssh.findings[0].remedy.back().rfind("ssh ", 0) == 0);

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
