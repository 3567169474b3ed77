// diagnose --suppress: the rules file (every mistake one line naming the file, entry and fix),
// the globs, what suppression moves apart and what it recomputes, and the flag through the CLI.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/cli_harness.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/diagnose/suppress.hpp"
#include "gpuctl/util/time.hpp"
#include "test_kubeconfig_support.hpp"

using gpuctl::testing::dx::h100_node;
using gpuctl::testing::dx::list_of;
using nlohmann::json;
using namespace gpuctl::ops::diagnose;

namespace {

Finding finding(const std::string& check, Severity severity, const std::string& node, std::string kind = "Node",
                std::string ns = "", std::string name = "") {
  Finding f;
  f.check = check;
  f.severity = severity;
  f.node = node;
  f.object = {std::move(kind), std::move(ns), name.empty() ? node : std::move(name)};
  f.summary = check + " on " + (node.empty() ? f.object.name : node);
  return f;
}

// Two GPU nodes, gpu-0 with an unhealthy GPU (error) and gpu-1 not ready (critical), and a
// warning on a pod; verdicts judged as run_checks does.
struct Fixture {
  Snapshot snapshot;
  Report report;
  Fixture() {
    snapshot.now = *gpuctl::util::parse_rfc3339("2026-07-31T23:00:00Z");
    snapshot.lists[Source::nodes] = {h100_node("gpu-0", 8, 7), h100_node("gpu-1", 8, 8)};
    report.checks = {{"node-not-ready", CheckStatus::fail, "", {}},
                     {"gpu-unhealthy-devices", CheckStatus::fail, "", {}},
                     {"node-pressure", CheckStatus::fail, "", {}}};
    report.findings = {finding("node-not-ready", Severity::critical, "gpu-1"),
                       finding("gpu-unhealthy-devices", Severity::error, "gpu-0"),
                       finding("node-pressure", Severity::warning, "gpu-0", "Pod", "ml", "train-0")};
    report.verdicts = node_verdicts(snapshot, report.findings);
  }
};

std::vector<Suppression> rules(const std::string& yaml) {
  auto parsed = parse_suppressions(yaml, "known.yaml");
  INFO((parsed ? std::string() : parsed.error().message));
  REQUIRE(parsed);
  return *parsed;
}

std::string error_of(const std::string& yaml) {
  auto parsed = parse_suppressions(yaml, "known.yaml");
  REQUIRE_FALSE(parsed);
  CHECK(parsed.error().code == gpuctl::Errc::invalid_argument);
  return parsed.error().message;
}

}  // namespace

TEST_CASE("diagnose suppress: globs match * and ? only, anchored at both ends", "[diagnose][suppress]") {
  CHECK(glob_match("gpu-*", "gpu-7"));
  CHECK(glob_match("gpu-*", "gpu-"));
  CHECK_FALSE(glob_match("gpu-*", "cpu-7"));
  CHECK(glob_match("gpu-?", "gpu-7"));
  CHECK_FALSE(glob_match("gpu-?", "gpu-17"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("Pod/*/train-*", "Pod/ml/train-0"));
  CHECK(glob_match("Pod/*", "Pod/ml/train-0"));  // `*` crosses '/'
  CHECK(glob_match("*-devices", "gpu-unhealthy-devices"));
  CHECK(glob_match("a*b*c", "aXbYbZc"));
  CHECK_FALSE(glob_match("a*b*c", "aXbYbZ"));
  CHECK_FALSE(glob_match("node", "node-7"));
  CHECK_FALSE(glob_match("Node/gpu-7", "node/gpu-7"));  // case-sensitive
  CHECK(glob_match("[x]", "[x]"));                      // no character classes: literal
  // Many stars over a long text stay fast (the matcher never recurses).
  CHECK_FALSE(glob_match(std::string(50, '*') + "b", std::string(100000, 'a')));
}

TEST_CASE("diagnose suppress: a rules file with every key, globs and comments", "[diagnose][suppress]") {
  auto parsed = rules(R"(# known problems, reviewed weekly
- check: gpu-unhealthy-devices
  node: gpu-7
  reason: RMA 4711, GPU 3 replaced on Friday
  until: 2026-08-15
- check: "node-*"
  object: Pod/ml/train-*
  reason: the ml team's soak test
)");
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[0].check == "gpu-unhealthy-devices");
  CHECK(parsed[0].node == "gpu-7");
  CHECK(parsed[0].object.empty());
  CHECK(parsed[0].reason == "RMA 4711, GPU 3 replaced on Friday");
  CHECK(parsed[0].until == "2026-08-15");
  CHECK(parsed[0].origin == "known.yaml: entry 1 (line 2)");
  CHECK(parsed[1].check == "node-*");
  CHECK(parsed[1].object == "Pod/ml/train-*");
  CHECK(parsed[1].until.empty());
  CHECK(parsed[1].origin == "known.yaml: entry 2 (line 6)");
  // No rules at all is fine: a CI job may keep an empty file ready.
  CHECK(rules("").empty());
  CHECK(rules("# nothing suppressed yet\n").empty());
  CHECK(rules("[]").empty());
}

TEST_CASE("diagnose suppress: every mistake is one line naming the file, the entry and the fix",
          "[diagnose][suppress]") {
  const std::string ok = "  node: gpu-7\n  reason: RMA\n";
  CHECK(error_of("check: node-not-ready\n") ==
        "known.yaml: is not a list; write one `- check: ID` entry per rule, with check, object, node, reason, until");
  CHECK(error_of("- just-a-string\n") ==
        "known.yaml:1: entry 1: is not a map; write each entry as `- check: ID` with check, object, node, reason, "
        "until");
  CHECK(error_of("- check: node-not-ready\n" + ok + "- check: node-pressure\n  nodes: gpu-7\n  reason: x\n") ==
        "known.yaml:4: entry 2: unknown key \"nodes\"; the keys are check, object, node, reason, until");
  CHECK(error_of("-" + ok.substr(1)) ==
        "known.yaml:1: entry 1: has no check; add `check: ID` (list them with: gpuctl diagnose --list-checks)");
  CHECK(error_of("- check: gpu-on-fire\n" + ok) ==
        "known.yaml:1: entry 1: no check is named \"gpu-on-fire\" (list them with: gpuctl diagnose --list-checks)");
  CHECK(error_of("- check: \"gpu-on-*\"\n" + ok) ==
        "known.yaml:1: entry 1: no check matches \"gpu-on-*\" (list them with: gpuctl diagnose --list-checks)");
  CHECK(error_of("- check: node-not-ready\n  reason: RMA\n") ==
        "known.yaml:1: entry 1: names neither object nor node; add `node: NAME` or `object: Kind/name` (globs "
        "allowed, `node: \"*\"` for every node)");
  CHECK(error_of("- check: node-not-ready\n  object: gpu-7\n  reason: RMA\n") ==
        "known.yaml:1: entry 1: object \"gpu-7\" names no kind; write it as the OBJECT column prints it: Kind/name "
        "or Kind/namespace/name (Node/gpu-7, Pod/ml/train-*)");
  CHECK(error_of("- check: node-not-ready\n  node: gpu-7\n  reason: \"  \"\n") ==
        "known.yaml:1: entry 1: has no reason; add `reason: ...` saying why (a ticket, an RMA): the report shows it");
  CHECK(error_of("- check: node-not-ready\n  node: gpu-7\n") ==
        "known.yaml:1: entry 1: has no reason; add `reason: ...` saying why (a ticket, an RMA): the report shows it");
  for (const char* date : {"2026-02-30", "2026/08/01", "2026-08-01T00:00:00Z", "next friday", "2026-8-1"}) {
    INFO(date);
    CHECK(error_of("- check: node-not-ready\n" + ok + "  until: " + date + "\n") ==
          fmt::format("known.yaml:1: entry 1: until \"{}\" is not a date; write YYYY-MM-DD (the rule holds "
                      "through that day, UTC)",
                      date));
  }
  CHECK(error_of("- check: node-not-ready\n" + ok + "  node: gpu-8\n") ==
        "known.yaml:1: entry 1: key node appears twice; keep one");
  CHECK(error_of("- check: [node-not-ready, node-pressure]\n" + ok) ==
        "known.yaml:1: entry 1: check must be one text value; write one entry per check");
  CHECK(error_of("- check: node-not-ready\n  node: [gpu-7\n").starts_with("known.yaml:3: not valid YAML: "));
  CHECK(error_of("- check: node-not-ready\n" + ok + "---\n- check: node-pressure\n" + ok) ==
        "known.yaml: holds more than one YAML document; put every rule in one list");
  // A hostile value is quoted short and on one line.
  std::string message = error_of("- check: \"" + std::string(500, 'x') + "\\n\"\n" + ok);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.size() < 200);
  CHECK(error_of(std::string(10000, '[')).starts_with("known.yaml"));
}

TEST_CASE("diagnose suppress: matching findings move apart, checks left with none pass, verdicts are judged again",
          "[diagnose][suppress]") {
  Fixture fx;
  REQUIRE(fx.report.verdicts.size() == 2);
  REQUIRE(fx.report.verdicts[0].layer == Layer::gpus_healthy);  // gpu-0

  auto warnings = apply_suppressions(fx.report, fx.snapshot, rules(R"(
- check: gpu-unhealthy-devices
  node: gpu-?
  reason: RMA 4711
  until: 2026-07-31
- check: "*"
  object: Pod/ml/*
  reason: soak test
- check: gpu-unhealthy-devices
  node: "*"
  reason: "a later rule that also matches: the first one gives the reason"
)"));
  CHECK(warnings.empty());  // until is the last day the rule holds, and snapshot.now is on it
  REQUIRE(fx.report.findings.size() == 1);
  CHECK(fx.report.findings[0].check == "node-not-ready");
  REQUIRE(fx.report.suppressed.size() == 2);
  CHECK(fx.report.suppressed[0].finding.check == "gpu-unhealthy-devices");
  CHECK(fx.report.suppressed[0].reason == "RMA 4711");
  CHECK(fx.report.suppressed[0].until == "2026-07-31");
  CHECK(fx.report.suppressed[1].finding.object.name == "train-0");
  CHECK(fx.report.suppressed[1].reason == "soak test");
  CHECK(fx.report.suppressed[1].until.empty());

  CHECK(fx.report.checks[0].status == CheckStatus::fail);
  CHECK(fx.report.checks[1].status == CheckStatus::pass);
  CHECK(fx.report.checks[2].status == CheckStatus::pass);
  CHECK(fx.report.verdicts[0].node == "gpu-0");
  CHECK_FALSE(fx.report.verdicts[0].layer.has_value());
  CHECK(fx.report.verdicts[1].layer == Layer::node);

  // The schema counts them apart.
  json doc = to_json(fx.report);
  CHECK(doc["summary"]["suppressed"] == 2);
  CHECK(doc["summary"]["error"] == 0);
  CHECK(doc["suppressed"][0]["reason"] == "RMA 4711");
}

TEST_CASE("diagnose suppress: an expired rule suppresses nothing and is named", "[diagnose][suppress]") {
  Fixture fx;
  auto warnings = apply_suppressions(fx.report, fx.snapshot, rules(R"(
- check: gpu-unhealthy-devices
  node: gpu-0
  reason: RMA 4711
  until: 2026-07-30
- check: node-pressure
  node: gpu-9
  reason: matches nothing, but has not expired
)"));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "suppression known.yaml: entry 1 (line 2) expired after 2026-07-30: it suppresses nothing; extend `until` "
        "or remove the rule (RMA 4711)");
  CHECK(fx.report.findings.size() == 3);
  CHECK(fx.report.suppressed.empty());
  CHECK(fx.report.checks[1].status == CheckStatus::fail);
  CHECK(fx.report.verdicts[0].layer == Layer::gpus_healthy);
}

TEST_CASE("diagnose suppress: the file is read with its name in every error", "[diagnose][suppress]") {
  gpuctl_test::TempDir dir;
  auto missing = read_suppressions(dir.str() + "/none.yaml");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == gpuctl::Errc::io);
  CHECK(missing.error().message == "--suppress: cannot read " + dir.str() + "/none.yaml: No such file or directory");
  std::string path = dir.write("known.yaml", "- check: node-pressure\n  node: gpu-9\n  reason: fans\n");
  auto read = read_suppressions(path);
  REQUIRE(read);
  CHECK(read->at(0).origin == path + ": entry 1 (line 1)");
  std::string bad = dir.write("bad.yaml", "- check: nope\n  node: gpu-9\n  reason: fans\n");
  CHECK(read_suppressions(bad).error().message.starts_with(bad + ":1: entry 1: no check is named \"nope\""));
  std::string huge = dir.write("huge.yaml", std::string(kMaxSuppressionFileBytes + 1, '#'));
  CHECK(read_suppressions(huge).error().message ==
        "--suppress: " + huge + " is larger than 1 MiB (the limit); a suppression file is a short list");
}

namespace {

// Only the node checks run (they read nodes alone), so what other checks read is not scripted.
const std::string kNodeChecks = "gpu-unhealthy-devices,node-pressure,device-plugin-missing";

void answer(gpuctl::testing::CliHarness& cli) {
  cli.fake().on("GET", "/api/v1/nodes",
                gpuctl::testing::json_answer(200, list_of({h100_node("gpu-0", 8, 6), h100_node("gpu-1", 8, 8)})));
  cli.fake().on("GET", "/api/v1/pods", gpuctl::testing::json_answer(200, list_of(json::array())));
}

}  // namespace

TEST_CASE("gpuctl diagnose --suppress: the only error suppressed exits 0 and is listed apart", "[diagnose][cli]") {
  gpuctl_test::TempDir dir;
  gpuctl::testing::CliHarness cli;
  answer(cli);
  CHECK(cli.run({"diagnose", "--check", kNodeChecks}).exit_code == 4);

  std::string known = dir.write("known.yaml", R"(- check: gpu-unhealthy-devices
  node: gpu-0
  reason: RMA 4711
  until: 2099-12-31
- check: node-pressure
  node: "*"
  reason: an old workaround
  until: 2020-01-31
)");
  answer(cli);
  auto r = cli.run({"diagnose", "--check", kNodeChecks, "--suppress", known});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("No problems found by") != std::string::npos);
  CHECK(r.err.find("Warning: suppression " + known + ": entry 2 (line 5) expired after 2020-01-31") !=
        std::string::npos);
  CHECK(r.out == "1 finding(s) suppressed (--suppress " + known +
                     "):\n  error gpu-unhealthy-devices Node/gpu-0: gpu-0: 2 of 8 nvidia.com/gpu unhealthy (capacity "
                     "8, allocatable 6) (RMA 4711, until 2099-12-31)\n");

  answer(cli);
  auto doc = cli.run({"diagnose", "--check", kNodeChecks, "--suppress", known, "-o", "json"});
  CHECK(doc.exit_code == 0);
  CHECK(json::parse(doc.out)["summary"]["suppressed"] == 1);
}

TEST_CASE("gpuctl diagnose --suppress: a bad or missing file stops it before any request", "[diagnose][cli]") {
  gpuctl_test::TempDir dir;
  gpuctl::testing::CliHarness cli;
  std::string bad = dir.write("bad.yaml", "- check: gpu-unhealthy-devices\n  node: gpu-0\n");
  auto r = cli.run({"diagnose", "--suppress", bad});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(bad + ":1: entry 1: has no reason") != std::string::npos);
  CHECK(r.out.empty());
  auto missing = cli.run({"diagnose", "--suppress", dir.str() + "/nope.yaml"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("--suppress: cannot read " + dir.str() + "/nope.yaml") != std::string::npos);
  CHECK(cli.fake().requests().empty());
}
