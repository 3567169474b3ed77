// diagnose's node-side checks of a GPU's state (ECC, throttling, memory, persistence, PCIe, NVLink,
// Fabric Manager, nvidia-smi's warnings) over edited real captures, as test_diagnose_node_side.cpp
// does for reachability, drivers, counts and Xids.
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
