// The probe's node facts (kernel log, clock, NVSwitches and Fabric Manager, NVLink) and its CSV
// fallback, from transcripts built of real captures; and the real script's kernel-log choice run
// under /bin/sh with fake journalctl, dmesg and nvidia-smi first on PATH.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "fakes/probe_transcript.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/gpu/probe.hpp"

using namespace gpuctl::gpu;
namespace fs = std::filesystem;
using gpuctl::Result;
using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::probe_control;
using gpuctl::testing::probe_done;
using gpuctl::testing::probe_marker;
using gpuctl::testing::probe_start;
using gpuctl::testing::probe_step;
using gpuctl::testing::read_file;

namespace {

const std::string kXml3090 = "nvidia-smi-xml/telegraf__rtx-3090__590.44.01__v13.xml";
const std::string kNvlinkV100 = "nvidia-smi-text/azhpc__nvidia-smi-nvlink-s__8x-v100__inactive-links.txt";
const std::string kDmesgXid79 = "kernel-log/gpud__sxid-readme__dmesg-xid-79-sxid-20034.log";

// A healthy node's GPU steps (the RTX 3090 capture), after the given node-fact lines.
std::string healthy_node(const std::string& facts) {
  return cat(
      probe_start(), facts, probe_step("all", fixture(kXml3090), "", 0),
      probe_step("list", "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)", "", 0),
      probe_done());
}

}  // namespace

TEST_CASE("nvidia-smi nvlink -s: active and inactive links per GPU (real captures)", "[probe][nvlink]") {
  std::vector<NvlinkGpuStatus> v100 = parse_nvlink_status(fixture(kNvlinkV100));
  REQUIRE(v100.size() == 7);  // the capture holds 7 of the 8 GPUs
  CHECK(v100[3].index == 3);
  CHECK(v100[3].uuid == std::string("GPU-50b1bd2e-77ee-2731-fd2f-17c44103b7b9"));
  CHECK(v100[3].inactive_links == std::vector<int>{3, 5});
  CHECK(v100[3].active_links == std::vector<int>{0, 1, 2, 4});
  CHECK(v100[5].inactive_links == std::vector<int>{0, 4});
  CHECK(v100[0].inactive_links.empty());
  CHECK(v100[0].active_links.size() == 6);

  std::vector<NvlinkGpuStatus> a100 =
      parse_nvlink_status(fixture("nvidia-smi-text/gpud__nvidia-smi-nvlink-status__a100.txt"));
  REQUIRE(a100.size() == 8);
  for (const auto& g : a100) {
    CHECK(g.active_links.size() == 12);
    CHECK(g.inactive_links.empty());
  }
  CHECK(parse_nvlink_status("").empty());
  CHECK(parse_nvlink_status("Link 3: <inactive>\n").empty());  // no GPU header: nothing to attach it to
}

TEST_CASE("PCIe link and fabric state from XML and -q text (real captures)", "[probe][nvlink]") {
  Result<NvidiaSmiLog> xml = parse_nvidia_smi_xml(fixture(kXml3090));
  REQUIRE(xml);
  const GpuInfo& g = xml->gpus.at(0);
  CHECK(g.pcie.gen_current == 1);  // idle: the link trains down to save power
  CHECK(g.pcie.gen_max == 4);
  CHECK(g.pcie.width_current == 16);
  CHECK(g.pcie.width_max == 16);
  CHECK(g.fabric.state.absence() == Absence::not_available);

  Result<NvidiaSmiLog> text =
      parse_nvidia_smi_query_text(fixture("nvidia-smi-text/gpud__nvidia-smi-q__8x-h100-80gb-hbm3__535.183.01.txt"));
  REQUIRE(text);
  REQUIRE(text->gpus.size() == 8);
  CHECK(text->gpus[0].pcie.gen_current == 5);
  CHECK(text->gpus[0].pcie.width_max == 16);
  CHECK(text->gpus[0].fabric.state == std::string("Completed"));
  CHECK(text->gpus[0].fabric.status == std::string("Success"));
}

TEST_CASE("probe node facts: the kernel log with times from the node's clock", "[probe][kernel]") {
  // dmesg's seconds since boot: the clock line turns them into unix times.
  std::string out =
      healthy_node(cat(probe_control("kernel-source dmesg"), probe_step("kernel", fixture(kDmesgXid79), "", 0),
                       probe_control("clock 1790000000 6781800.25"), probe_control("nvswitches 0")));
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(node_classification(r) == "ok");
  CHECK(r.warnings.empty());
  CHECK(r.facts.kernel_log_source == "dmesg");
  CHECK(r.facts.kernel_log_error.empty());
  CHECK(r.facts.clock_unix_s == 1790000000);
  CHECK(r.facts.nvswitches == 0);
  CHECK_FALSE(r.facts.fabric_manager_running.has_value());
  REQUIRE_FALSE(r.facts.kernel_events.empty());
  const KernelLogEvent* xid79 = nullptr;
  for (const auto& e : r.facts.kernel_events) {
    if (e.kind == KernelLogEventKind::xid && e.code == 79) xid79 = &e;
  }
  REQUIRE(xid79 != nullptr);
  // boot = 1790000000 - 6781800.25; the line is at 6781741.548779 s after it.
  CHECK(xid79->unix_time_s == 1790000000 - 59);
  nlohmann::json j = r;
  CHECK(j["node"]["kernelLog"]["source"] == "dmesg");
  CHECK(j["node"]["kernelLog"]["eventCount"] == r.facts.kernel_events.size());
}

TEST_CASE("probe node facts: an unreadable kernel log is said, with dmesg's words", "[probe][kernel]") {
  std::string out =
      healthy_node(cat(probe_control("kernel-source none"),
                       probe_step("kernel", "", "dmesg: read kernel buffer failed: Operation not permitted", 0)));
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(node_classification(r) == "ok");  // the GPUs still answered
  CHECK(r.facts.kernel_log_source == "none");
  CHECK(r.facts.kernel_events.empty());
  CHECK_THAT(r.facts.kernel_log_error, Catch::Contains("read kernel buffer failed: Operation not permitted"));
  CHECK_THAT(r.facts.kernel_log_error, Catch::Contains("kernel.dmesg_restrict"));

  // Cut off in the kernel step (a hung journalctl, the deadline): said, never taken for "no Xid".
  std::string cut = cat(probe_start(), probe_control("kernel-source journal"), probe_marker(), "begin kernel\n");
  NodeGpuReport c = parse_probe_output(0, cut, "", true);
  CHECK_THAT(c.facts.kernel_log_error, Catch::Contains("cut off"));

  // An older probe without the kernel step: no source, no error.
  NodeGpuReport old = parse_probe_output(0, healthy_node(""), "");
  CHECK(old.facts.kernel_log_source.empty());
  CHECK(old.facts.kernel_log_error.empty());
}

TEST_CASE("probe node facts: Fabric Manager on NVSwitch systems, NVLink status", "[probe][nvlink]") {
  auto with = [](const std::string& facts) { return parse_probe_output(0, healthy_node(facts), "").facts; };
  CHECK(with(cat(probe_control("nvswitches 6"), probe_step("fabricmanager", "4242", "", 0))).fabric_manager_running ==
        true);
  CHECK(with(cat(probe_control("nvswitches 6"), probe_step("fabricmanager", "", "", 1))).fabric_manager_running ==
        false);
  // pgrep missing (127) or broken: unknown, not "down".
  CHECK_FALSE(with(cat(probe_control("nvswitches 6"), probe_step("fabricmanager", "", "sh: pgrep: not found", 127)))
                  .fabric_manager_running.has_value());
  CHECK(with(probe_control("nvswitches 0")).nvswitches == 0);

  std::string out = cat(probe_start(), probe_step("all", fixture(kXml3090), "", 0),
                        probe_step("nvlink", fixture(kNvlinkV100), "", 0), probe_done());
  NodeFacts f = parse_probe_output(0, out, "").facts;
  REQUIRE(f.nvlinks.has_value());
  CHECK(f.nvlinks->size() == 7);
  // A build that refuses `nvlink -s`: nothing known, not "no links".
  std::string refused = cat(probe_start(), probe_step("all", fixture(kXml3090), "", 0),
                            probe_step("nvlink", "Invalid combination of input arguments.", "", 2), probe_done());
  CHECK_FALSE(parse_probe_output(0, refused, "").facts.nvlinks.has_value());
}

TEST_CASE("probe CSV fallback: no XML at all, the --query-gpu CSV answers", "[probe]") {
  const std::string invalid = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.";
  std::string out =
      cat(probe_start(), probe_step("all", invalid, "", 2),
          probe_step("list", "GPU 0: NVIDIA GeForce RTX 2080 SUPER (UUID: GPU-1)", "", 0),
          probe_control("indices list 0"), probe_step("gpu-0", invalid, "", 2),
          probe_step("csv",
                     fixture("nvidia-smi-csv/"
                             "vertex__rtx-2080-super-windows-471.11__query-gpu-all-fields-with-units.csv"),
                     "", 0),
          probe_done());
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(node_classification(r) == "ok");
  CHECK(r.enumeration == "csv");
  CHECK(r.failed_gpus.empty());
  REQUIRE(r.gpus.size() == 1);
  CHECK(r.driver_version == std::string("471.11"));
  CHECK(r.gpus[0].pcie.gen_current == 3);
  CHECK(r.gpus[0].pcie.width_max == 16);
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0], Catch::Contains("--query-gpu"));

  // The CSV refused too: the -q text (the 8x H100 capture) answers.
  std::string text =
      cat(probe_start(), probe_step("all", invalid, "", 2), probe_control("indices none"),
          probe_step("csv", "Field \"pcie.link.gen.max\" is not a valid field to query.", "", 2),
          probe_step("text", fixture("nvidia-smi-text/gpud__nvidia-smi-q__8x-h100-80gb-hbm3__535.183.01.txt"), "", 0),
          probe_done());
  NodeGpuReport t = parse_probe_output(0, text, "");
  CHECK(node_classification(t) == "ok");
  CHECK(t.enumeration == "text");
  REQUIRE(t.gpus.size() == 8);
  CHECK(t.driver_version == std::string("535.183.01"));
  CHECK(t.gpus[7].index == 7);
  CHECK(t.gpus[0].fabric.state == std::string("Completed"));
  CHECK_THAT(t.warnings.at(0), Catch::Contains("read from nvidia-smi -q instead"));

  // The CSV failing too leaves the node failed with the XML's reason.
  std::string both = cat(probe_start(), probe_step("all", invalid, "", 2), probe_control("indices none"),
                         probe_step("csv", invalid, "", 2), probe_done());
  NodeGpuReport f = parse_probe_output(0, both, "");
  CHECK(f.status == ProbeStatus::failed);
  CHECK(f.gpus.empty());
}

// --- The real script's kernel-log choice, run locally ---

namespace {

class FakeHost {
 public:
  FakeHost() {
    dir_ = fs::temp_directory_path() / cat("gpuctl-facts-test-", std::to_string(::getpid()), "-", std::to_string(n_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    tool("nvidia-smi", "exit 9\n");  // a node whose driver is gone: the kernel log is what explains it
  }
  ~FakeHost() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  void tool(const std::string& name, const std::string& body) const {
    fs::path p = dir_ / "bin" / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    fs::permissions(p, fs::perms::owner_all);
  }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  NodeGpuReport probe() const {
    std::ofstream(dir_ / "cmd") << probe_script();
    std::string cmd = cat("cd '", dir_.string(), "' && PATH='", (dir_ / "bin").string(),
                          ":/usr/bin:/bin' /bin/sh -c \"$(cat cmd)\" >out 2>err </dev/null");
    REQUIRE(std::system(cmd.c_str()) == 0);
    return parse_probe_output(0, read_file((dir_ / "out").string()), read_file((dir_ / "err").string()));
  }

 private:
  fs::path dir_;
  static inline int n_ = 0;
};

}  // namespace

TEST_CASE("probe script: journal first, dmesg when the journal has no kernel messages, dmesg's error when refused",
          "[probe][kernel]") {
  if (!fs::exists("/bin/sh") || (!fs::exists("/usr/bin/grep") && !fs::exists("/bin/grep"))) {
    WARN("no /bin/sh or grep: skipped");
    return;
  }
  FakeHost host;
  const std::string journal =
      host.file("journal",
                "2026-12-06T14:05:01+0000 gpu-7 kernel: NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus.\n2026-12-06T14:05:02+0000 gpu-7 kernel: eth0: link up\n");
  const std::string ring = host.file("ring", fixture(kDmesgXid79));

  SECTION("the journal holds kernel messages") {
    host.tool("journalctl", cat("tail -n 1 '", journal, "'; [ \"$*\" = \"-k -b -q --no-pager -n 1\" ] && exit 0; cat '",
                                journal, "'\n"));
    host.tool("dmesg", "echo never >&2; exit 1\n");
    NodeGpuReport r = host.probe();
    CHECK(r.kind == NvsmiErrorKind::driver_not_loaded);
    CHECK(r.facts.kernel_log_source == "journal");
    REQUIRE(r.facts.kernel_events.size() == 1);  // the eth0 line is not NVIDIA's
    CHECK(r.facts.kernel_events[0].code == 79);
    CHECK(r.facts.kernel_events[0].unix_time_s.has_value());
  }
  SECTION("no kernel messages in the journal: dmesg with ISO times, else plain dmesg") {
    host.tool("journalctl", "echo 'No journal files were found.' >&2; exit 1\n");
    host.tool("dmesg", cat("[ \"$1\" = --time-format ] && exit 1; cat '", ring, "'\n"));
    NodeGpuReport r = host.probe();
    CHECK(r.facts.kernel_log_source == "dmesg");
    CHECK(r.facts.kernel_log_error.empty());
    CHECK(r.facts.kernel_events.size() >= 5);
    CHECK(r.facts.clock_unix_s.has_value());
    for (const auto& e : r.facts.kernel_events) CHECK(e.unix_time_s.has_value());  // from /proc/uptime
  }
  SECTION("nothing readable: dmesg's refusal is the error") {
    host.tool("journalctl", "exit 0\n");
    host.tool("dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n");
    NodeGpuReport r = host.probe();
    CHECK(r.facts.kernel_log_source == "none");
    CHECK_THAT(r.facts.kernel_log_error, Catch::Contains("Operation not permitted"));
  }
}

TEST_CASE("probe: the last GPU lost, -L naming it only by its error, gets the index after the others", "[probe]") {
  const std::string lost = fixture("nvidia-smi-errors/issue__gpu-is-lost__linux.txt");
  const std::string list = cat("GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\n", lost);
  std::string out = cat(
      probe_start(), probe_step("all", "", lost, 15), probe_step("list", list, "", 15), probe_control("indices list 0"),
      probe_step("gpu-0", fixture("nvidia-smi-xml/telegraf__tesla-t4__515.105.01__v11.xml"), "", 0), probe_done());
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(node_classification(r) == "partial");
  REQUIRE(r.failed_gpus.size() == 1);
  CHECK(r.failed_gpus[0].index == 1);  // GPUs are numbered 0..N-1: not a gap, so after the last
  CHECK(r.failed_gpus[0].failure.kind == NvsmiErrorKind::gpu_lost);
}
