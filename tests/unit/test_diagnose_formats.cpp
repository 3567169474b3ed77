// diagnose's -o junit and -o prometheus over a hand-built report: the structure CI systems and the
// textfile collector read, escaping of hostile text, and the flags through the CLI. The schema
// (junit-10.xsd, with xmllint) and the Prometheus parser (prometheus_client) judge the real
// binary's output in tests/e2e/test_diagnose_formats.py.
#include <catch2/catch.hpp>

#include <map>

#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include "diagnose_builders.hpp"
#include "fakes/cli_harness.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/diagnose/report_formats.hpp"
#include "gpuctl/util/time.hpp"

using gpuctl::testing::dx::h100_node;
using gpuctl::testing::dx::list_of;
using nlohmann::json;
using namespace gpuctl::ops::diagnose;
using namespace std::chrono_literals;

namespace {

Finding finding(const std::string& check, Severity severity, const std::string& node, std::string summary) {
  Finding f;
  f.check = check;
  f.severity = severity;
  f.node = node;
  f.object = {"Node", "", node};
  f.summary = std::move(summary);
  return f;
}

// gpu-1 NotReady (critical); gpu-0 with two unhealthy resources (one object, two findings) and a
// suppressed pressure finding; device-plugin-missing could not run; gpu-2 is healthy.
Report sample_report() {
  Report r;
  r.checks = {{"node-not-ready", CheckStatus::fail, "", 1500us},
              {"gpu-unhealthy-devices", CheckStatus::fail, "", 20us},
              {"node-pressure", CheckStatus::pass, "", 7us},
              {"device-plugin-missing", CheckStatus::skipped, "could not list nodes: forbidden", 0us}};
  Finding down = finding("node-not-ready", Severity::critical, "gpu-1", "gpu-1 is NotReady for 5m");
  down.evidence = {
      {"node gpu-1 condition Ready", "Ready=False KubeletNotReady: PLEG is not healthy", "2026-07-31T22:55:00Z"}};
  down.remedy = {"kubectl describe node gpu-1"};
  Finding gpus = finding("gpu-unhealthy-devices", Severity::error, "gpu-0", "gpu-0: 2 of 8 nvidia.com/gpu unhealthy");
  // What a node's author or a log line may hold: markup, quotes, a terminal escape, a control
  // character, a byte that is not UTF-8, a newline, and a character XML forbids outright.
  gpus.evidence = {{"node gpu-0 status", "a <b> & \"c\" ]]> \x1b[31mred\x01 \xff\nsecond line \xEF\xBF\xBF", ""}};
  gpus.remedy = {"gpuctl gpus gpu-0", "kubectl describe node gpu-0"};
  Finding mig = finding("gpu-unhealthy-devices", Severity::error, "gpu-0", "gpu-0: 1 of 7 nvidia.com/mig-1g.10gb");
  r.findings = {down, gpus, mig};
  Finding pressure = finding("node-pressure", Severity::warning, "gpu-0", "gpu-0 under DiskPressure");
  r.suppressed = {{pressure, "disk \"swap\" \\ cleanup\nticket 9", "2026-08-15"}};
  r.verdicts = {{"gpu-0", Layer::gpus_healthy, "gpu-unhealthy-devices", gpus.summary},
                {"gpu-1", Layer::node, "node-not-ready", down.summary},
                {"gpu-2", std::nullopt, "", ""}};
  return r;
}

const auto kRunAt = *gpuctl::util::parse_rfc3339("2026-07-31T23:00:00Z");

pugi::xml_node suite_named(const pugi::xml_document& doc, const char* name) {
  return doc.child("testsuites").find_child_by_attribute("testsuite", "name", name);
}

}  // namespace

TEST_CASE("diagnose -o junit: one testsuite per check, one testcase per object", "[diagnose][formats]") {
  std::string xml = to_junit(sample_report(), kRunAt);
  CHECK(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"gpuctl diagnose\""));
  pugi::xml_document doc;
  auto parsed = doc.load_string(xml.c_str());
  INFO(xml);
  REQUIRE(parsed);
  auto root = doc.child("testsuites");
  CHECK(root.attribute("tests").as_int() == 5);
  CHECK(root.attribute("failures").as_int() == 2);
  CHECK(root.attribute("errors").as_int() == 0);
  CHECK(std::string(root.attribute("time").value()) == "0.002");
  CHECK(std::distance(root.children("testsuite").begin(), root.children("testsuite").end()) == 4);
  // junit-10.xsd's time pattern allows three decimals at most.
  for (auto suite : root.children("testsuite")) {
    std::string time = suite.attribute("time").value();
    CHECK((time.size() >= 5 && time[time.size() - 4] == '.'));
  }

  auto down = suite_named(doc, "node-not-ready");
  CHECK(down.attribute("tests").as_int() == 1);
  CHECK(down.attribute("failures").as_int() == 1);
  CHECK(down.attribute("skipped").as_int() == 0);
  CHECK(std::string(down.attribute("time").value()) == "0.002");
  CHECK(std::string(down.attribute("timestamp").value()) == "2026-07-31T23:00:00Z");
  auto testcase = down.child("testcase");
  CHECK(std::string(testcase.attribute("classname").value()) == "gpuctl.diagnose.node-not-ready");
  CHECK(std::string(testcase.attribute("name").value()) == "Node/gpu-1");
  CHECK(std::string(testcase.child("failure").attribute("message").value()) == "gpu-1 is NotReady for 5m");
  CHECK(std::string(testcase.child("failure").attribute("type").value()) == "critical");
  CHECK(std::string(testcase.child("failure").text().get()) ==
        "[critical] gpu-1 is NotReady for 5m\n"
        "  node: gpu-1\n"
        "  evidence (node gpu-1 condition Ready at 2026-07-31T22:55:00Z): Ready=False KubeletNotReady: PLEG is not "
        "healthy\n"
        "  run: kubectl describe node gpu-1\n");

  // Two findings on one object: one testcase, the worst (first) as the message.
  auto gpus = suite_named(doc, "gpu-unhealthy-devices");
  CHECK(gpus.attribute("tests").as_int() == 1);
  auto failure = gpus.child("testcase").child("failure");
  CHECK(std::string(failure.attribute("message").value()) == "gpu-0: 2 of 8 nvidia.com/gpu unhealthy (and 1 more)");
  CHECK(std::string(failure.text().get()).find("[error] gpu-0: 1 of 7 nvidia.com/mig-1g.10gb") != std::string::npos);

  // A passing check: one passing testcase named by its title, and its suppressed object skipped.
  auto pressure = suite_named(doc, "node-pressure");
  CHECK(pressure.attribute("tests").as_int() == 2);
  CHECK(pressure.attribute("failures").as_int() == 0);
  CHECK(pressure.attribute("skipped").as_int() == 1);
  auto suppressed = pressure.find_child_by_attribute("testcase", "name", "Node/gpu-0");
  CHECK(std::string(suppressed.child("skipped").attribute("message").value()) ==
        "suppressed until 2026-08-15: disk \"swap\" \\ cleanup\\x0aticket 9");
  CHECK(std::string(suppressed.child("skipped").text().get()) ==
        "[warning] gpu-0 under DiskPressure\n  suppressed until 2026-08-15: disk \"swap\" \\ cleanup\nticket 9\n"
        "  node: gpu-0\n");
  auto passing = pressure.find_child_by_attribute("testcase", "name", "GPU nodes under memory, disk or PID pressure");
  REQUIRE(passing);
  CHECK(passing.first_child().empty());

  // A check that could not run: one skipped testcase saying why.
  auto missing = suite_named(doc, "device-plugin-missing");
  CHECK(missing.attribute("tests").as_int() == 1);
  CHECK(missing.attribute("skipped").as_int() == 1);
  CHECK(std::string(missing.child("testcase").child("skipped").attribute("message").value()) ==
        "could not run: could not list nodes: forbidden");
}

TEST_CASE("diagnose -o junit: text from the cluster cannot break the XML", "[diagnose][formats]") {
  std::string xml = to_junit(sample_report(), kRunAt);
  // Only tab, newline and printable text: no raw control character, no byte XML 1.0 refuses.
  for (unsigned char c : xml) {
    INFO(static_cast<int>(c));
    CHECK((c >= 0x20 || c == '\n' || c == '\t'));
    CHECK(c != 0xff);
  }
  CHECK(xml.find("\xEF\xBF\xBF") == std::string::npos);
  pugi::xml_document doc;
  REQUIRE(doc.load_string(xml.c_str()));
  std::string text = suite_named(doc, "gpu-unhealthy-devices").child("testcase").child("failure").text().get();
  CHECK(text.find("a <b> & \"c\" ]]> \\x1b[31mred\\x01 \\xff\n  second line \\uffff") == std::string::npos);
  CHECK(text.find("): a <b> & \"c\" ]]> \\x1b[31mred\\x01 \\xff\nsecond line \\uffff\n") != std::string::npos);
}

TEST_CASE("diagnose -o prometheus: the text exposition format, every family with HELP and TYPE",
          "[diagnose][formats]") {
  CHECK(
      to_prometheus(sample_report(), kRunAt) ==
      R"(# HELP gpuctl_diagnose_findings Findings of gpuctl diagnose left after --suppress, by check, severity and node (node is empty for a finding on no node).
# TYPE gpuctl_diagnose_findings gauge
gpuctl_diagnose_findings{check="gpu-unhealthy-devices",severity="error",node="gpu-0"} 2
gpuctl_diagnose_findings{check="node-not-ready",severity="critical",node="gpu-1"} 1
# HELP gpuctl_diagnose_suppressed_findings Findings set apart by --suppress rules, by check.
# TYPE gpuctl_diagnose_suppressed_findings gauge
gpuctl_diagnose_suppressed_findings{check="device-plugin-missing"} 0
gpuctl_diagnose_suppressed_findings{check="gpu-unhealthy-devices"} 0
gpuctl_diagnose_suppressed_findings{check="node-not-ready"} 0
gpuctl_diagnose_suppressed_findings{check="node-pressure"} 1
# HELP gpuctl_diagnose_check_status 1 for the status each selected check ended with (pass, fail, skipped), 0 for the others.
# TYPE gpuctl_diagnose_check_status gauge
gpuctl_diagnose_check_status{check="node-not-ready",status="pass"} 0
gpuctl_diagnose_check_status{check="node-not-ready",status="fail"} 1
gpuctl_diagnose_check_status{check="node-not-ready",status="skipped"} 0
gpuctl_diagnose_check_status{check="gpu-unhealthy-devices",status="pass"} 0
gpuctl_diagnose_check_status{check="gpu-unhealthy-devices",status="fail"} 1
gpuctl_diagnose_check_status{check="gpu-unhealthy-devices",status="skipped"} 0
gpuctl_diagnose_check_status{check="node-pressure",status="pass"} 1
gpuctl_diagnose_check_status{check="node-pressure",status="fail"} 0
gpuctl_diagnose_check_status{check="node-pressure",status="skipped"} 0
gpuctl_diagnose_check_status{check="device-plugin-missing",status="pass"} 0
gpuctl_diagnose_check_status{check="device-plugin-missing",status="fail"} 0
gpuctl_diagnose_check_status{check="device-plugin-missing",status="skipped"} 1
# HELP gpuctl_diagnose_check_duration_seconds How long each check took over the gathered lists.
# TYPE gpuctl_diagnose_check_duration_seconds gauge
gpuctl_diagnose_check_duration_seconds{check="node-not-ready"} 0.001500
gpuctl_diagnose_check_duration_seconds{check="gpu-unhealthy-devices"} 0.000020
gpuctl_diagnose_check_duration_seconds{check="node-pressure"} 0.000007
gpuctl_diagnose_check_duration_seconds{check="device-plugin-missing"} 0.000000
# HELP gpuctl_diagnose_node_layer_ok 1 while this layer of the GPU node and every layer below it pass, 0 from the node's first failing layer on (a finding of severity error or worse).
# TYPE gpuctl_diagnose_node_layer_ok gauge
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="reachable"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="driver"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="gpus_present"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="gpu_errors"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="node"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="network"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="device_plugin"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="gpus_registered"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="gpus_healthy"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="gpu_pods"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-0",layer="workload"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="reachable"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="driver"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="gpus_present"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="gpu_errors"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="node"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="network"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="device_plugin"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="gpus_registered"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="gpus_healthy"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="gpu_pods"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-1",layer="workload"} 0
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="reachable"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="driver"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="gpus_present"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="gpu_errors"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="node"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="network"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="device_plugin"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="gpus_registered"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="gpus_healthy"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="gpu_pods"} 1
gpuctl_diagnose_node_layer_ok{node="gpu-2",layer="workload"} 1
# HELP gpuctl_diagnose_node_failing_layer 1 for each failing GPU node, labelled with its first failing layer and the check that found it.
# TYPE gpuctl_diagnose_node_failing_layer gauge
gpuctl_diagnose_node_failing_layer{node="gpu-0",layer="gpus_healthy",check="gpu-unhealthy-devices"} 1
gpuctl_diagnose_node_failing_layer{node="gpu-1",layer="node",check="node-not-ready"} 1
# HELP gpuctl_diagnose_last_run_timestamp_seconds When gpuctl diagnose read the cluster, in Unix time.
# TYPE gpuctl_diagnose_last_run_timestamp_seconds gauge
gpuctl_diagnose_last_run_timestamp_seconds 1785538800.000
)");
}

TEST_CASE("diagnose -o prometheus: label values are escaped as the format asks", "[diagnose][formats]") {
  Report r;
  r.checks = {{"node-pressure", CheckStatus::fail, "", 0us}};
  r.findings = {finding("node-pressure", Severity::warning, "a\\b\"c\nd", "odd")};
  r.findings.push_back(finding("node-pressure", Severity::warning, "", "on no node"));
  std::string text = to_prometheus(r, kRunAt);
  CHECK(text.find(
            "gpuctl_diagnose_findings{check=\"node-pressure\",severity=\"warning\",node=\"a\\\\b\\\"c\\nd\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("gpuctl_diagnose_findings{check=\"node-pressure\",severity=\"warning\",node=\"\"} 1\n") !=
        std::string::npos);
  // An empty report is still a valid exposition: every family, no sample but the run's time.
  std::string empty = to_prometheus(Report{}, kRunAt);
  CHECK(empty.find("# TYPE gpuctl_diagnose_node_layer_ok gauge\n") != std::string::npos);
  CHECK(empty.ends_with("gpuctl_diagnose_last_run_timestamp_seconds 1785538800.000\n"));
}

TEST_CASE("gpuctl diagnose -o junit and -o prometheus: the report on stdout, the usual exit code", "[diagnose][cli]") {
  gpuctl::testing::CliHarness cli;
  auto nodes = gpuctl::testing::json_answer(200, list_of({h100_node("gpu-0", 8, 6), h100_node("gpu-1", 8, 8)}));
  const std::string checks = "gpu-unhealthy-devices,node-pressure";
  cli.fake().on("GET", "/api/v1/nodes", nodes);
  auto junit = cli.run({"diagnose", "--check", checks, "-o", "junit"});
  INFO(junit.err);
  CHECK(junit.exit_code == 4);
  pugi::xml_document doc;
  REQUIRE(doc.load_string(junit.out.c_str()));
  CHECK(doc.child("testsuites").attribute("failures").as_int() == 1);
  CHECK(std::string(suite_named(doc, "gpu-unhealthy-devices").child("testcase").attribute("name").value()) ==
        "Node/gpu-0");

  cli.fake().on("GET", "/api/v1/nodes", nodes);
  auto prom = cli.run({"diagnose", "--check", checks, "-o", "prometheus"});
  CHECK(prom.exit_code == 4);
  CHECK(prom.out.find("gpuctl_diagnose_findings{check=\"gpu-unhealthy-devices\",severity=\"error\",node=\"gpu-0\"} "
                      "1\n") != std::string::npos);
  CHECK(prom.out.find("gpuctl_diagnose_node_layer_ok{node=\"gpu-1\",layer=\"workload\"} 1\n") != std::string::npos);

  auto listed = cli.run({"diagnose", "--list-checks", "-o", "junit"});
  CHECK(listed.exit_code == 2);
  CHECK(listed.err.find("-o junit renders a report, not --list-checks; use table, json or yaml") != std::string::npos);
  CHECK(cli.run({"diagnose", "-o", "wide"}).exit_code == 2);
}
