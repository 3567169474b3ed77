// The GPU probe: its output parser on outputs synthesised from fixtures, and the real script run
// under /bin/sh (dash here) and bash with a fake `nvidia-smi` first on PATH.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "fakes/probe_transcript.hpp"
#include "gpuctl/gpu/probe.hpp"

using namespace gpuctl::gpu;
namespace fs = std::filesystem;
using gpuctl::testing::cat;
using gpuctl::testing::fixture;
using gpuctl::testing::fixture_path;
using gpuctl::testing::read_file;

namespace {

const std::string M = gpuctl::testing::probe_marker();
std::string step(const std::string& name, const std::string& out, const std::string& err, int rc) {
  return gpuctl::testing::probe_step(name, out, err, rc);
}
const std::string kStart = gpuctl::testing::probe_start();
const std::string kDone = gpuctl::testing::probe_done();

const std::string kXml2070 = "nvidia-smi-xml/telegraf__2x-rtx-2070__590.44.01__v13.xml";
const std::string kList2070 =
    "GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\n"
    "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\n";

}  // namespace

TEST_CASE("gpu::probe_script is one fixed line that survives any login shell's quoting", "[probe]") {
  std::string_view s = probe_script();
  CHECK(s.find('\n') == std::string_view::npos);
  CHECK(s.find('\'') == std::string_view::npos);
  CHECK(s.find('!') == std::string_view::npos);
  CHECK(s.find('\\') == std::string_view::npos);
  CHECK(s.find(kProbeMarker) != std::string_view::npos);
  CHECK(s.size() < 4096);  // one line that old csh builds still read whole
  // Exactly the forms the test cluster's fakes support (tests/cluster/README.md).
  CHECK(s.find("nvidia-smi -q -x;") != std::string_view::npos);
  CHECK(s.find("nvidia-smi -L;") != std::string_view::npos);
  CHECK(s.find("nvidia-smi -q -x -i $i;") != std::string_view::npos);
  CHECK(s.find("nvidia-smi nvlink -s;") != std::string_view::npos);
  CHECK(s.find("nvidia-smi --query-gpu=") != std::string_view::npos);
  CHECK(s.find("journalctl -k -b -q --no-pager -n 1 ") != std::string_view::npos);
  CHECK(s.find("journalctl -k -b -q --no-pager -o short-iso |") != std::string_view::npos);
  CHECK(s.find("dmesg --time-format iso |") != std::string_view::npos);
  CHECK(probe_remote_command() == cat("sh -c '", s, "'"));
}

TEST_CASE("gpu::parse_probe_output: all GPUs answer the whole query", "[probe]") {
  std::string out = cat(kStart, step("all", fixture(kXml2070), "", 0), step("list", kList2070, "", 0), kDone);
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(r.status == ProbeStatus::ok);
  CHECK(r.kind == NvsmiErrorKind::ok);
  CHECK(node_classification(r) == "ok");
  CHECK(r.message == "2 GPUs answered");
  CHECK(r.enumeration == "query");
  CHECK_FALSE(r.truncated);
  CHECK(r.driver_version == std::string("590.44.01"));
  CHECK(r.cuda_version == std::string("13.1"));
  REQUIRE(r.gpus.size() == 2);
  CHECK(r.gpus[0].index == 0);
  CHECK(r.gpus[1].index == 1);
  CHECK(r.gpus[1].uuid == std::string("GPU-12345678-aaaa-bbbb-cccc-0123456789cd"));
  CHECK(r.gpus[0].memory.total_mib == 8192);
  CHECK(r.failed_gpus.empty());
  CHECK(r.step_failures.empty());
  CHECK(r.warnings.empty());
}

TEST_CASE("gpu::parse_probe_output: transcript framing", "[probe]") {
  std::string out = cat("Welcome to node-7 (motd)\n", kStart, step("all", "<a/>\nlast line without newline", "boom", 3),
                        M, "indices list 0 2 5\n", kDone);
  ProbeTranscript t = parse_probe_transcript(out);
  CHECK(t.started);
  CHECK(t.finished);
  REQUIRE(t.steps.size() == 1);
  CHECK(t.steps[0].name == "all");
  CHECK(t.steps[0].stdout_text == "<a/>\nlast line without newline\n");
  CHECK(t.steps[0].stderr_text == "boom\n");
  CHECK(t.steps[0].exit_code == 3);
  CHECK(t.indices_source == "list");
  CHECK(t.indices == std::vector<int>{0, 2, 5});
  REQUIRE(t.stray_lines.size() == 1);
  CHECK(t.stray_lines[0] == "Welcome to node-7 (motd)");

  // Content can never pose as a control line: it is always behind "o " / "e ".
  std::string fake_end = cat(kStart, M, "begin all\no ", M, "end all rc=0\no tail\n", M, "end all rc=9\n", kDone);
  ProbeTranscript f = parse_probe_transcript(fake_end);
  REQUIRE(f.steps.size() == 1);
  CHECK(f.steps[0].exit_code == 9);
  CHECK(f.steps[0].stdout_text == cat(M, "end all rc=0\ntail\n"));
}

TEST_CASE("gpu::parse_probe_output: one GPU breaks the whole query, the others still answer", "[probe]") {
  // gpustat#125 / nvitop#45: the whole query fails with the device-handle error; the script falls
  // back to -L and one query per index; GPU 1 is lost.
  const std::string lost = fixture("nvidia-smi-errors/issue__gpu-is-lost__linux.txt");
  const std::string list =
      "GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\n"
      "GPU 1: Tesla T4 (UUID: GPU-11111111-91dd-3774-a5cb-99096249601a)\n"
      "GPU 2: Tesla T4 (UUID: GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124)\n";
  std::string out = cat(kStart, step("all", "", lost, 15), step("list", list, "", 0), M, "indices list 0 1 2\n",
                        step("gpu-0", fixture("nvidia-smi-xml/telegraf__tesla-t4__515.105.01__v11.xml"), "", 0),
                        step("gpu-1", lost, "", 15),
                        step("gpu-2", fixture("nvidia-smi-xml/telegraf__tesla-t4__512.78__v11.xml"), "", 0), kDone);
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(r.status == ProbeStatus::partial);
  CHECK(node_classification(r) == "partial");
  CHECK(r.kind == NvsmiErrorKind::gpu_lost);
  CHECK(r.enumeration == "list");
  REQUIRE(r.gpus.size() == 2);
  CHECK(r.gpus[0].index == 0);
  CHECK(r.gpus[0].uuid == std::string("GPU-d37e67a5-91dd-3774-a5cb-99096249601a"));
  CHECK(r.gpus[1].index == 2);  // the index it was queried with, not its position in the file
  CHECK(r.gpus[1].uuid == std::string("GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124"));
  CHECK(r.driver_version == std::string("515.105.01"));
  REQUIRE(r.failed_gpus.size() == 1);
  const FailedGpu& f = r.failed_gpus[0];
  CHECK(f.index == 1);
  CHECK(f.pci_bus_id == std::string("0000:02:00.0"));
  CHECK(f.uuid == std::string("GPU-11111111-91dd-3774-a5cb-99096249601a"));  // from -L
  CHECK(f.product_name == std::string("Tesla T4"));
  CHECK(f.failure.kind == NvsmiErrorKind::gpu_lost);
  CHECK(f.failure.exit_code == 15);
  REQUIRE(r.step_failures.size() == 1);
  CHECK(r.step_failures[0].kind == NvsmiErrorKind::gpu_lost);  // the whole query's own failure
  CHECK(r.message.find("2 of 3 GPUs answered; GPU 1 (0000:02:00.0) failed") == 0);

  nlohmann::json j = r;
  CHECK(j["status"] == "partial");
  CHECK(j["classification"] == "partial");
  CHECK(j["kind"] == "gpu_lost");
  CHECK(j["gpus"].size() == 2);
  CHECK(j["failedGpus"][0]["index"] == 1);
  CHECK(j["failedGpus"][0]["failure"]["kind"] == "gpu_lost");
  CHECK(j["failedGpus"][0]["pciBusId"] == "0000:02:00.0");
  CHECK_NOTHROW(j.dump());
}

TEST_CASE("gpu::parse_probe_output: node-level failures", "[probe]") {
  SECTION("driver/library mismatch: everything fails the same way; /dev/nvidiaN enumerated") {
    const std::string mm = fixture("nvidia-smi-errors/issue__nvml-driver-library-version-mismatch__old.txt");
    std::string out = cat(kStart, step("all", mm, "", 18), step("list", mm, "", 18), M, "indices dev 0 1\n",
                          step("gpu-0", mm, "", 18), step("gpu-1", mm, "", 18), kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::driver_library_mismatch);
    CHECK(node_classification(r) == "driver_library_mismatch");
    CHECK(r.enumeration == "dev");
    CHECK(r.gpus.empty());
    REQUIRE(r.failed_gpus.size() == 2);
    CHECK(r.failed_gpus[1].failure.kind == NvsmiErrorKind::driver_library_mismatch);
    CHECK(r.message.find("Driver/library version mismatch") != std::string::npos);
  }
  SECTION("no devices") {
    const std::string none = fixture("nvidia-smi-errors/eessi__no-devices-were-found__exit6.txt");
    std::string out = cat(kStart, step("all", none, "", 6), step("list", none, "", 6), M, "indices none\n", kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::no_devices);
    CHECK(r.enumeration == "none");
    CHECK(r.failed_gpus.empty());
  }
  SECTION("driver not loaded") {
    const std::string msg = fixture("nvidia-smi-errors/issue__nvidia-smi-failed-communicate-driver.txt");
    std::string out = cat(kStart, step("all", msg, "", 9), step("list", msg, "", 9), M, "indices none\n", kDone);
    CHECK(node_classification(parse_probe_output(0, out, "")) == "driver_not_loaded");
  }
  SECTION("nvidia-smi missing (exit 127): the script stops after the first step") {
    std::string out = cat(kStart, step("all", "", "sh: 1: nvidia-smi: not found", 127), kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::nvidia_smi_missing);
    CHECK(r.message.find("nvidia-smi: not found") != std::string::npos);
  }
  SECTION("garbage without framing (the probe did not run)") {
    NodeGpuReport r = parse_probe_output(0,
                                         "\x7f"
                                         "ELF\x02\x01 random \xff bytes\n",
                                         "");
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::garbage);
    CHECK(r.message.find("not framed") != std::string::npos);
    nlohmann::json j = r;
    CHECK_NOTHROW(j.dump());
  }
  SECTION("garbage inside the frame: exit 0 but no XML") {
    std::string out = cat(kStart, step("all", "%%% not xml %%%", "", 0), step("list", kList2070, "", 0), kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::garbage);
    CHECK(r.message.find("no usable XML") != std::string::npos);
  }
  SECTION("the remote shell could not run the probe") {
    NodeGpuReport r = parse_probe_output(127, "", "sh: 1: sed: not found\n");
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::unknown_error);  // not "nvidia_smi_missing": nvidia-smi never ran
    CHECK(r.message.find("the probe did not run (exit 127)") == 0);
  }
}

TEST_CASE("gpu::parse_probe_output: node output in the report's strings is valid UTF-8", "[probe]") {
  // fuzz_probe's crash-0ce7...: an "indices" line with invalid UTF-8 as its source went into
  // `enumeration` unsanitized, and -o json threw on dump().
  const std::string mm = fixture("nvidia-smi-errors/issue__nvml-driver-library-version-mismatch__old.txt");
  std::string out = cat(kStart, step("all", mm, "", 18), step("list", mm, "", 18), M, "indices d\xff\x1bv 0\n",
                        step("gpu-0", mm, "", 18), "stray \xc3\x28 line\n", kDone);
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(r.status == ProbeStatus::failed);
  CHECK(r.enumeration == "d??v");
  REQUIRE_FALSE(r.warnings.empty());
  CHECK(r.warnings.front().find("stray ?( line") != std::string::npos);
  nlohmann::json j = r;
  CHECK_NOTHROW(j.dump());
  CHECK(j["enumeration"] == "d??v");
}

TEST_CASE("gpu::parse_probe_output: output cut off by the caller's cap or deadline", "[probe]") {
  const std::string xml = fixture(kXml2070);
  SECTION("in the middle of the whole query") {
    std::string full = cat(kStart, step("all", xml, "", 0));
    std::string cut = full.substr(0, full.size() / 2);
    NodeGpuReport r = parse_probe_output(0, cut, "", true);
    CHECK(r.truncated);
    CHECK(r.status == ProbeStatus::failed);
    CHECK(r.kind == NvsmiErrorKind::truncated);
    CHECK(node_classification(r) == "truncated");
  }
  SECTION("no \"done\" line marks it cut off even without the caller's flag") {
    std::string out = cat(kStart, step("all", xml, "", 0));
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.truncated);
    CHECK(r.status == ProbeStatus::ok);  // the data itself is complete
    REQUIRE_FALSE(r.warnings.empty());
    CHECK(r.warnings.back().find("cut off") != std::string::npos);
  }
  SECTION("during the per-GPU fallback: the GPU being queried is reported truncated (or hung)") {
    std::string out =
        cat(kStart, step("all", "", "Unable to determine the device handle for GPU 0000:02:00.0: Unknown Error", 15),
            step("list", kList2070, "", 0), M, "indices list 0 1\n", step("gpu-0", xml, "", 0), M,
            "begin gpu-1\no <?xml version=\"1.0\" ?>\n");
    NodeGpuReport r = parse_probe_output(0, out, "", true);
    CHECK(r.status == ProbeStatus::partial);
    REQUIRE(r.failed_gpus.size() == 1);
    CHECK(r.failed_gpus[0].index == 1);
    CHECK(r.failed_gpus[0].failure.kind == NvsmiErrorKind::truncated);
    CHECK(r.failed_gpus[0].uuid == std::string("GPU-12345678-aaaa-bbbb-cccc-0123456789cd"));
  }
  SECTION("nothing at all") {
    NodeGpuReport r = parse_probe_output(0, "", "", true);
    CHECK(r.kind == NvsmiErrorKind::truncated);
  }
}

TEST_CASE("gpu::parse_probe_output: warnings that keep the data", "[probe]") {
  SECTION("infoROM corrupted: exit 14 with good XML") {
    std::string out =
        cat(kStart,
            step("all", fixture("nvidia-smi-xml/telegraf__tesla-t4__515.105.01__v11.xml"),
                 "WARNING: infoROM is corrupted at gpu 0000:00:1E.0", 14),
            step("list", "GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)", "", 14), kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.status == ProbeStatus::ok);
    REQUIRE(r.gpus.size() == 1);
    REQUIRE(r.gpus[0].warnings.size() == 1);
    CHECK(r.gpus[0].warnings[0].find("infoROM is corrupted") != std::string::npos);
  }
  SECTION("-L lists a GPU the whole query left out") {
    std::string list =
        cat(kList2070, "GPU 2: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ef)\n");
    std::string out = cat(kStart, step("all", fixture(kXml2070), "", 0), step("list", list, "", 0), kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    CHECK(r.status == ProbeStatus::partial);
    REQUIRE(r.failed_gpus.size() == 1);
    CHECK(r.failed_gpus[0].index == 2);
    CHECK(r.failed_gpus[0].uuid == std::string("GPU-12345678-aaaa-bbbb-cccc-0123456789ef"));
  }
  SECTION("MIG profile names come from -L") {
    std::string list =
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-27b94a00-ed54-5c24-b1fd-1054085de32a)\n"
        "  MIG 3g.20gb     Device  0: (UUID: MIG-11111111-b0cc-5e5c-8e32-eaa8fd067902)\n"
        "  MIG 3g.20gb     Device  1: (UUID: MIG-22222222-b0cc-5e5c-8e32-eaa8fd067902)\n";
    std::string out =
        cat(kStart, step("all", fixture("nvidia-smi-xml/netdata__a100-sxm4-40gb-mig__510.47.03__v11.xml"), "", 0),
            step("list", list, "", 0), kDone);
    NodeGpuReport r = parse_probe_output(0, out, "");
    REQUIRE(r.gpus.size() == 1);
    REQUIRE(r.gpus[0].mig.devices.size() == 2);
    CHECK(r.gpus[0].mig.devices[1].profile_name == std::string("3g.20gb"));
    CHECK(r.gpus[0].mig.devices[1].uuid == std::string("MIG-22222222-b0cc-5e5c-8e32-eaa8fd067902"));
  }
}

// --- The real script, run locally ---

namespace {

struct ShellRun {
  int rc = -1;
  std::string out;
  std::string err;
};

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            cat("gpuctl-probe-test-", std::to_string(::getpid()), "-", std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_ / "bin");
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

  // A fake nvidia-smi supporting exactly -q -x, -q -x -i N / --id=N and -L.
  void fake_nvidia_smi(const std::string& body) const {
    fs::path p = path_ / "bin" / "nvidia-smi";
    std::ofstream(p) << "#!/bin/sh\n" << body;
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  }

  // `shell -c "<command>"` with PATH=<path_env>, as ssh has the login shell run the command.
  ShellRun run(const std::string& shell, const std::string& command, const std::string& path_env) const {
    std::ofstream(path_ / "cmd.txt") << command;
    std::string cmd = cat("cd '", path_.string(), "' && PATH='", path_env, "' ", shell,
                          " -c \"$(cat cmd.txt)\" >out.txt 2>err.txt </dev/null; echo $? >rc.txt");
    REQUIRE(std::system(cmd.c_str()) == 0);
    ShellRun r;
    r.out = read_file((path_ / "out.txt").string());
    r.err = read_file((path_ / "err.txt").string());
    r.rc = std::stoi(read_file((path_ / "rc.txt").string()));
    return r;
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

std::string shell_quote_path(const std::string& p) { return cat("'", p, "'"); }

std::string probe_path(const TempDir& dir) { return cat((dir.path() / "bin").string(), ":/usr/bin:/bin"); }

bool have(const char* path) { return fs::exists(path); }

std::vector<std::string> step_names(const ProbeTranscript& t) {
  std::vector<std::string> names;
  for (const auto& s : t.steps) names.push_back(s.name);
  return names;
}

}  // namespace

TEST_CASE("gpu probe script runs end to end under /bin/sh (dash) with a fake nvidia-smi", "[probe]") {
  if (!have("/bin/sh") || (!have("/usr/bin/sed") && !have("/bin/sed"))) {
    WARN("no /bin/sh or sed: skipped");
    return;
  }
  const std::string xml2070 = shell_quote_path(fixture_path(kXml2070));
  const std::string t4a = shell_quote_path(fixture_path("nvidia-smi-xml/telegraf__tesla-t4__515.105.01__v11.xml"));
  const std::string t4b = shell_quote_path(fixture_path("nvidia-smi-xml/telegraf__tesla-t4__512.78__v11.xml"));
  const std::string shells[] = {"/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox sh"};

  SECTION("healthy node: the whole query answers") {
    TempDir dir;
    dir.fake_nvidia_smi(
        cat("case \"$*\" in\n"
            "  \"-q -x\") cat ",
            xml2070,
            " ;;\n"
            "  \"-L\") printf 'GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\\n"
            "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\\n' ;;\n"
            "  *) echo \"fake nvidia-smi: unsupported: $*\" >&2; exit 2 ;;\n"
            "esac\n"));
    for (const std::string& shell : shells) {
      if (!have(shell.substr(0, shell.find(' ')).c_str())) continue;
      INFO(shell);
      ShellRun run = dir.run(shell, std::string(probe_script()), probe_path(dir));
      CHECK(run.rc == 0);
      CHECK(run.err.empty());
      NodeGpuReport r = parse_probe_output(run.rc, run.out, run.err);
      CHECK(node_classification(r) == "ok");
      CHECK_FALSE(r.truncated);
      CHECK(r.enumeration == "query");
      REQUIRE(r.gpus.size() == 2);
      CHECK(r.gpus[1].uuid == std::string("GPU-12345678-aaaa-bbbb-cccc-0123456789cd"));
      // The XML came through byte for byte (apart from framing), up to a final newline that the
      // framing adds when the output did not end with one (this fixture does not).
      ProbeTranscript t = parse_probe_transcript(run.out);
      // The kernel log first, then the GPU queries; this fake answers no `nvlink -s`.
      REQUIRE(step_names(t) == std::vector<std::string>{"kernel", "all", "list", "nvlink"});
      CHECK(t.steps[1].stdout_text == cat(read_file(fixture_path(kXml2070)), "\n"));
      CHECK_FALSE(r.facts.nvlinks.has_value());
    }
    // As ssh runs it: the user's login shell gets the "sh -c '...'" remote command.
    ShellRun wrapped = dir.run("/bin/bash", probe_remote_command(), probe_path(dir));
    CHECK(node_classification(parse_probe_output(wrapped.rc, wrapped.out, wrapped.err)) == "ok");
  }

  SECTION("one lost GPU: the whole query fails, the per-index fallback reports the others") {
    TempDir dir;
    dir.fake_nvidia_smi(
        cat("case \"$*\" in\n"
            "  \"-q -x\") echo '<?xml version=\"1.0\" ?>'; echo '<nvidia_smi_log>';"
            " echo 'Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to "
            "recover this GPU' >&2;"
            " exit 15 ;;\n"
            "  \"-L\") printf 'GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\\n';"
            " echo 'Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to "
            "recover this GPU';"
            " printf 'GPU 2: Tesla T4 (UUID: GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124)\\n'; exit 15 ;;\n"
            "  \"-q -x -i 0\"|\"-q -x --id=0\") cat ",
            t4a,
            " ;;\n"
            "  \"-q -x -i 1\"|\"-q -x --id=1\") echo 'Unable to determine the device handle for GPU 0000:02:00.0: GPU "
            "is lost. Reboot the system to recover this GPU'; exit 15 ;;\n"
            "  \"-q -x -i 2\"|\"-q -x --id=2\") cat ",
            t4b,
            " ;;\n"
            "  *) echo \"fake nvidia-smi: unsupported: $*\" >&2; exit 2 ;;\n"
            "esac\n"));
    // -L exits 15 here and prints the device-handle error instead of "GPU 1: ...": the script
    // queries indices 0 and 2, and the parser names the missing GPU from -L's error line, its
    // index inferred from the gap.
    ShellRun run = dir.run("/bin/sh", std::string(probe_script()), probe_path(dir));
    CHECK(run.rc == 0);
    NodeGpuReport r = parse_probe_output(run.rc, run.out, run.err);
    CHECK(r.enumeration == "list");
    CHECK(node_classification(r) == "partial");
    REQUIRE(r.gpus.size() == 2);
    CHECK(r.gpus[0].index == 0);
    CHECK(r.gpus[1].index == 2);
    CHECK(r.step_failures.at(0).kind == NvsmiErrorKind::gpu_lost);
    REQUIRE(r.failed_gpus.size() == 1);
    CHECK(r.failed_gpus[0].index == 1);
    CHECK(r.failed_gpus[0].pci_bus_id == std::string("0000:02:00.0"));
    CHECK(r.failed_gpus[0].failure.kind == NvsmiErrorKind::gpu_lost);

    // The usual case: -L lists every GPU, the broken one fails its own query.
    dir.fake_nvidia_smi(
        cat("case \"$*\" in\n"
            "  \"-q -x\") echo 'Unable to determine the device handle for GPU 0000:02:00.0: Unknown Error' >&2; exit "
            "15 ;;\n"
            "  \"-L\") printf 'GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\\n"
            "GPU 1: Tesla T4 (UUID: GPU-11111111-91dd-3774-a5cb-99096249601a)\\n"
            "GPU 2: Tesla T4 (UUID: GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124)\\n' ;;\n"
            "  \"-q -x -i 0\") cat ",
            t4a,
            " ;;\n"
            "  \"-q -x -i 1\") echo 'Unable to determine the device handle for GPU 0000:02:00.0: Unknown Error' >&2; "
            "exit 15 ;;\n"
            "  \"-q -x -i 2\") cat ",
            t4b,
            " ;;\n"
            "  *) exit 2 ;;\n"
            "esac\n"));
    for (const std::string& shell : shells) {
      if (!have(shell.substr(0, shell.find(' ')).c_str())) continue;
      INFO(shell);
      ShellRun run2 = dir.run(shell, std::string(probe_script()), probe_path(dir));
      NodeGpuReport p = parse_probe_output(run2.rc, run2.out, run2.err);
      CHECK(node_classification(p) == "partial");
      CHECK(p.kind == NvsmiErrorKind::gpu_lost);
      REQUIRE(p.gpus.size() == 2);
      CHECK(p.gpus[1].index == 2);
      REQUIRE(p.failed_gpus.size() == 1);
      CHECK(p.failed_gpus[0].index == 1);
      CHECK(p.failed_gpus[0].pci_bus_id == std::string("0000:02:00.0"));
      CHECK(p.failed_gpus[0].uuid == std::string("GPU-11111111-91dd-3774-a5cb-99096249601a"));
      CHECK_FALSE(p.truncated);
    }
  }

  SECTION("-L fails too: one query per /dev/nvidiaN, or none") {
    TempDir dir;
    dir.fake_nvidia_smi("echo 'Failed to initialize NVML: Driver/library version mismatch'; exit 18\n");
    ShellRun run = dir.run("/bin/sh", std::string(probe_script()), probe_path(dir));
    NodeGpuReport r = parse_probe_output(run.rc, run.out, run.err);
    CHECK(node_classification(r) == "driver_library_mismatch");
    CHECK(r.enumeration == (have("/dev/nvidia0") ? "dev" : "none"));
    CHECK(r.gpus.empty());
  }

  SECTION("nvidia-smi is not installed") {
    if (have("/usr/bin/nvidia-smi") || have("/bin/nvidia-smi") || have("/usr/sbin/nvidia-smi") ||
        have("/sbin/nvidia-smi")) {
      WARN("this machine has a real nvidia-smi on the probe's PATH: skipped");
      return;
    }
    TempDir dir;  // bin/ stays empty
    ShellRun run = dir.run("/bin/sh", std::string(probe_script()), (dir.path() / "bin").string());
    CHECK(run.rc == 0);
    NodeGpuReport r = parse_probe_output(run.rc, run.out, run.err);
    CHECK(node_classification(r) == "nvidia_smi_missing");
    ProbeTranscript t = parse_probe_transcript(run.out);
    CHECK(t.finished);
    REQUIRE(step_names(t) == std::vector<std::string>{"kernel", "all"});  // no -L, no fallback
    CHECK(t.steps.at(1).exit_code == 127);
  }
}
