// Every parser of node output in lib/src/gpu fed what a broken or hostile node can print: a
// 10 MB line, 100,000 lines, NUL bytes, invalid UTF-8 and deep nesting. None may crash, and none
// may go quadratic (100,000 lines through a quadratic step would not finish); each result is
// checked. Deep nesting is that node's malformed output: a one-line parse error, never a crash.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"
#include "gpuctl/gpu/probe.hpp"

using namespace gpuctl::gpu;
using Catch::Contains;

namespace {

const std::string kMarker = std::string(kProbeMarker) + " ";
constexpr int kManyLines = 100000;
const std::string kLongLine(10u << 20, 'x');
const std::string kNulAndBadUtf8 = std::string("a\0b\xff\xfe\xc3\x28 \xed\xa0\x80 z", 14);

std::string gpu_xml(int index) {
  return fmt::format(
      "<gpu id=\"00000000:{:02X}:{:02X}.0\"><product_name>NVIDIA H100</product_name>"
      "<uuid>GPU-{}</uuid><minor_number>{}</minor_number></gpu>\n",
      index / 256 % 256, index % 256, index, index);
}

std::string smi_xml(const std::string& body) {
  return "<?xml version=\"1.0\" ?>\n<nvidia_smi_log><driver_version>550.90.07</driver_version>\n" + body +
         "</nvidia_smi_log>\n";
}

std::string framed_step(const std::string& name, const std::string& out, int rc) {
  std::string s = kMarker + "begin " + name + "\n";
  std::size_t start = 0;
  while (start <= out.size()) {
    std::size_t nl = out.find('\n', start);
    if (nl == std::string::npos) nl = out.size();
    s += "o " + out.substr(start, nl - start) + "\n";
    start = nl + 1;
  }
  return s + kMarker + "end " + name + " rc=" + std::to_string(rc) + "\n";
}

}  // namespace

TEST_CASE("gpu hostile: nvidia-smi -q -x nested deeper than 200 levels is malformed output", "[gpu][limits]") {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "<a>";
  for (int i = 0; i < 100000; ++i) deep += "</a>";
  auto r = parse_nvidia_smi_xml(smi_xml(gpu_xml(0) + deep));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == gpuctl::Errc::parse);
  CHECK(r.error().message == "nvidia-smi -q -x output nests deeper than 200 levels (malformed); refusing to read it");

  // 200 levels (the root is one) are read.
  std::string ok_deep;
  for (int i = 0; i < 199; ++i) ok_deep += "<a>";
  for (int i = 0; i < 199; ++i) ok_deep += "</a>";
  auto ok = parse_nvidia_smi_xml(smi_xml(gpu_xml(0) + ok_deep));
  REQUIRE(ok);
  CHECK(ok->gpus.size() == 1);
  std::string one_more;
  for (int i = 0; i < 200; ++i) one_more += "<a>";
  for (int i = 0; i < 200; ++i) one_more += "</a>";
  CHECK_FALSE(parse_nvidia_smi_xml(smi_xml(gpu_xml(0) + one_more)));

  // Through the probe: that node's output is garbage, with the reason on one line.
  std::string out = kMarker + "start\n" + framed_step("all", smi_xml(gpu_xml(0) + deep), 0) +
                    framed_step("list", "GPU 0: NVIDIA H100 (UUID: GPU-0)", 0) + kMarker + "done\n";
  NodeGpuReport report = parse_probe_output(0, out, "");
  CHECK(report.status == ProbeStatus::failed);
  CHECK(report.kind == NvsmiErrorKind::garbage);
  CHECK_THAT(report.message, Contains("nests deeper than 200 levels"));
  CHECK(report.message.find('\n') == std::string::npos);
}

TEST_CASE("gpu hostile: nvidia-smi -q text indented deeper than 200 levels is refused", "[gpu][limits]") {
  std::string text = "==============NVSMI LOG==============\n";
  for (int i = 0; i < kManyLines; ++i) text += std::string(static_cast<std::size_t>(i), ' ') + "Level : x\n";
  auto r = parse_nvidia_smi_query_text_tree(text);
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "nvidia-smi -q output nests deeper than 200 levels by indentation (malformed); refusing to read it");

  // 100,000 flat lines are fine.
  std::string flat = "==============NVSMI LOG==============\nGPU 00000000:01:00.0\n";
  for (int i = 0; i < kManyLines; ++i) flat += fmt::format("    Field {} : {}\n", i, i);
  auto tree = parse_nvidia_smi_query_text_tree(flat);
  REQUIRE(tree);
  REQUIRE(tree->children.size() == 1);
  CHECK(tree->children[0].children.size() == static_cast<std::size_t>(kManyLines));
  auto log = parse_nvidia_smi_query_text(flat + "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n");
  REQUIRE(log);
  REQUIRE(log->gpus.size() == 1);
  CHECK(log->gpus[0].warnings.size() == 1);
}

TEST_CASE("gpu hostile: a 10 MB line, NUL bytes and invalid UTF-8 in every parser", "[gpu][limits]") {
  // XML: a huge value and binary junk in a field are read, the junk as text.
  auto xml = parse_nvidia_smi_xml(smi_xml("<gpu id=\"00000000:01:00.0\"><product_name>" + kLongLine +
                                          "</product_name><serial>\xff\xfe</serial></gpu>\n"));
  REQUIRE(xml);
  CHECK(xml->gpus.at(0).product_name == kLongLine);
  CHECK_FALSE(parse_nvidia_smi_xml(kLongLine));
  CHECK_FALSE(parse_nvidia_smi_xml(kNulAndBadUtf8));

  auto text = parse_nvidia_smi_query_text(
      "==============NVSMI LOG==============\nGPU 00000000:01:00.0\n    Product Name : " + kLongLine +
      "\n    Serial Number : " + kNulAndBadUtf8 + "\n");
  REQUIRE(text);
  CHECK(text->gpus.at(0).product_name == kLongLine);
  CHECK_FALSE(parse_nvidia_smi_query_text(kLongLine));

  auto csv = parse_nvidia_smi_csv("index, name\n0, " + kLongLine + "\n1, " + kNulAndBadUtf8 + "\n");
  REQUIRE(csv);
  CHECK(csv->rows.size() == 2);
  CHECK(csv->rows[0][1] == kLongLine);
  auto commas = parse_nvidia_smi_csv("index, name\n0, " + std::string(1u << 20, ',') + "\n");
  REQUIRE(commas);  // the name column takes the extra cells
  CHECK(commas->rows.size() == 1);
  CHECK_FALSE(parse_nvidia_smi_csv("index, uuid\n0, " + std::string(1u << 20, ',') + "\n"));

  GpuList list = parse_nvidia_smi_list("GPU 0: " + kLongLine + " (UUID: GPU-0)\n" + kNulAndBadUtf8 + "\n" + kLongLine);
  REQUIRE(list.gpus.size() == 1);
  CHECK(list.gpus[0].name == kLongLine);
  CHECK(list.other_lines.size() == 2);
  for (const auto& line : list.other_lines) CHECK(line.size() < 300);

  auto table = parse_nvidia_smi_table("| NVIDIA-SMI 550.90.07   Driver Version: 550.90.07   CUDA Version: 12.4 |\n" +
                                      std::string(1u << 20, '|') + "\n" + kNulAndBadUtf8 + "\n");
  REQUIRE(table);
  CHECK(table->gpus.empty());

  NvsmiDiagnosis d = classify_nvidia_smi_run(1, kLongLine, kNulAndBadUtf8 + "\n" + kLongLine + " GPU is lost");
  CHECK(d.kind == NvsmiErrorKind::gpu_lost);
  CHECK(d.message.size() < 400);
  CHECK(d.excerpt.size() < 700);
  NvsmiDiagnosis junk = classify_nvidia_smi_run(3, kNulAndBadUtf8, "");
  CHECK(junk.kind == NvsmiErrorKind::unknown_error);
  CHECK(nlohmann::json(junk).dump().size() > 0);  // sanitized: valid UTF-8 for the JSON dump

  auto events = parse_kernel_gpu_events("[1.0] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=" + kLongLine +
                                        ", GPU has fallen off the bus.\n" + kNulAndBadUtf8 +
                                        " NVRM: Xid (PCI:0000:02:00): 13, " + kNulAndBadUtf8 + "\n" + kLongLine + "\n");
  REQUIRE(events.size() == 2);
  CHECK(events[0].xid == 79);
  CHECK(events[1].xid == 13);
  CHECK(events[1].pci_bus_id == std::string("0000:02:00.0"));
  CHECK(nlohmann::json(events[1]).dump().find("\\u0000") == std::string::npos);

  ProbeTranscript t = parse_probe_transcript(kLongLine + "\n" + kNulAndBadUtf8 + "\n" + kMarker + "start\n" +
                                             framed_step("all", kLongLine, 0) + kMarker + "done\n");
  CHECK(t.finished);
  REQUIRE(t.steps.size() == 1);
  CHECK(t.steps[0].stdout_text == kLongLine + "\n");
  CHECK(t.stray_lines.size() == 2);
}

TEST_CASE("gpu hostile: 100,000 lines stay linear in every parser", "[gpu][limits]") {
  std::string xids;
  for (int i = 0; i < kManyLines; ++i)
    xids += fmt::format("[{}.0] NVRM: Xid (PCI:0000:01:00): 13, pid={}, name=p, x\n", i, i);
  auto events = parse_kernel_gpu_events(xids);
  REQUIRE(events.size() == static_cast<std::size_t>(kManyLines));
  CHECK(events.back().line_number == kManyLines);

  std::string many_list;
  std::string csv = "index, uuid, name\n";
  for (int i = 0; i < kManyLines; ++i) {
    many_list += fmt::format("GPU {}: NVIDIA H100 (UUID: GPU-{})\n", i, i);
    csv += fmt::format("{}, GPU-{}, NVIDIA H100\n", i, i);
  }
  CHECK(parse_nvidia_smi_list(many_list).gpus.size() == static_cast<std::size_t>(kManyLines));
  auto gpus = parse_query_gpu_csv(csv);
  REQUIRE(gpus);
  CHECK(gpus->size() == static_cast<std::size_t>(kManyLines));

  NvsmiDiagnosis d = classify_nvidia_smi_run(
      15, many_list, many_list + "Unable to determine the device handle for GPU 0000:05:00.0: GPU is lost\n");
  CHECK(d.kind == NvsmiErrorKind::gpu_lost);
  CHECK(d.pci_bus_id == std::string("0000:05:00.0"));
}

TEST_CASE("gpu hostile: a node that reports 20,000 GPUs is matched with -L in linear time", "[gpu][limits][probe]") {
  constexpr int kGpus = 20000;
  std::string body;
  std::string list;
  std::string warnings;
  for (int i = 0; i < kGpus; ++i) {
    body += gpu_xml(i);
    list += fmt::format("GPU {}: NVIDIA H100 (UUID: GPU-{})\n  MIG 1g.10gb Device {}: (UUID: MIG-{})\n", i, i, 0, i);
  }
  // -L also names 20,000 GPUs the query left out, and prints 20,000 error lines with bus ids.
  for (int i = kGpus; i < 2 * kGpus; ++i) list += fmt::format("GPU {}: NVIDIA H100 (UUID: GPU-{})\n", i, i);
  for (int i = 0; i < kGpus; ++i) {
    list += fmt::format("Unable to determine the device handle for GPU 0001:{:02X}:{:02X}.0: GPU is lost\n",
                        i / 256 % 256, i % 256);
  }
  std::string out =
      kMarker + "start\n" + framed_step("all", smi_xml(body), 0) + framed_step("list", list, 0) + kMarker + "done\n";
  NodeGpuReport r = parse_probe_output(0, out, "");
  CHECK(r.status == ProbeStatus::partial);
  REQUIRE(r.gpus.size() == static_cast<std::size_t>(kGpus));
  CHECK(r.gpus.back().uuid == std::string(fmt::format("GPU-{}", kGpus - 1)));
  REQUIRE(r.gpus.back().mig.devices.size() == 1);
  CHECK(r.gpus.back().mig.devices[0].uuid == std::string(fmt::format("MIG-{}", kGpus - 1)));
  CHECK(r.failed_gpus.size() == static_cast<std::size_t>(2 * kGpus));  // the left-out ones and the lost ones

  // The per-index fallback with 100,000 indices and steps.
  std::string steps = kMarker + "start\n" + framed_step("all", "", 9) + kMarker + "indices dev";
  for (int i = 0; i < kManyLines; ++i) steps += fmt::format(" {}", i);
  steps += "\n";
  for (int i = 0; i < kManyLines; ++i) steps += framed_step(fmt::format("gpu-{}", i), "No devices were found", 6);
  steps += kMarker + "done\n";
  NodeGpuReport per_index = parse_probe_output(0, steps, "");
  CHECK(per_index.status == ProbeStatus::failed);
  CHECK(per_index.failed_gpus.size() == static_cast<std::size_t>(kManyLines));
  CHECK(per_index.failed_gpus.back().failure.kind == NvsmiErrorKind::no_devices);
}
