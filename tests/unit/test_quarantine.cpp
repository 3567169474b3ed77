// diagnose --quarantine (issue 16): which findings quarantine a node, the limit and its circuit
// breaker, the plan, and the CLI's plan / --dry-run / --yes over a fake API and fake ssh hosts.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "gpuctl/ops/diagnose/quarantine.hpp"
#include "test_drain_support.hpp"
#include "test_verify_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::verify;
namespace dx = gpuctl::ops::diagnose;
using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using gpuctl::testing::nodeadmin::mutating_requests;
using gpuctl::testing::nodeadmin::whoami;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

dx::Finding finding(std::string check, dx::Severity severity, std::string node, std::string summary = "s") {
  dx::Finding f;
  f.check = std::move(check);
  f.severity = severity;
  f.node = std::move(node);
  f.summary = std::move(summary);
  return f;
}

// Scripts one diagnose run over these nodes: the node list, and each node's probe by its address.
void fleet(CliHarness& h, const std::vector<std::pair<json, std::string>>& nodes) {
  std::vector<json> items;
  for (const auto& [node, probe] : nodes) {
    items.push_back(node);
    h.ssh().on(node["status"]["addresses"][0]["address"], gpuctl::testing::remote_ran(probe));
  }
  h.fake().on("GET", "/api/v1/nodes", json_answer(200, gpuctl::testing::nodeadmin::list_of(items, "9", "NodeList")));
}

const std::vector<std::string> kDiagnose = {"diagnose", "--check", "driver-broken,xid-errors", "--quarantine"};

std::vector<std::string> diagnose(std::vector<std::string> extra) {
  std::vector<std::string> args = kDiagnose;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("quarantine rule: critical findings of the checks that read only the node and its probe", "[quarantine]") {
  using dx::Severity;
  CHECK(dx::quarantines(finding("driver-broken", Severity::critical, "gpu-7")));
  CHECK(dx::quarantines(finding("xid-errors", Severity::critical, "gpu-7")));
  CHECK(dx::quarantines(finding("ecc-errors", Severity::critical, "gpu-7")));
  CHECK(dx::quarantines(finding("fabric-manager-down", Severity::critical, "gpu-7")));
  CHECK_FALSE(dx::quarantines(finding("driver-broken", Severity::error, "gpu-7")));  // NotReady: not critical
  CHECK_FALSE(dx::quarantines(finding("node-unreachable", Severity::error, "gpu-7")));
  CHECK_FALSE(dx::quarantines(finding("node-not-ready", Severity::critical, "gpu-7")));  // what the API shows
  CHECK_FALSE(dx::quarantines(finding("device-plugin-unhealthy", Severity::critical, "gpu-7")));
  CHECK_FALSE(dx::quarantines(finding("driver-broken", Severity::critical, "")));
  CHECK_FALSE(dx::quarantines(finding("no-such-check", Severity::critical, "gpu-7")));
}

TEST_CASE("quarantine limit: --max-quarantine is a count or a percentage of the GPU nodes, at least 1",
          "[quarantine]") {
  auto ten = dx::parse_quarantine_limit("10%");
  REQUIRE(ten);
  CHECK(ten->percent);
  CHECK(dx::quarantine_limit(*ten, 100) == 10);
  CHECK(dx::quarantine_limit(*ten, 25) == 2);  // rounded down
  CHECK(dx::quarantine_limit(*ten, 5) == 1);   // at least 1
  CHECK(dx::quarantine_limit(*ten, 0) == 1);
  CHECK(dx::to_string(*ten) == "10%");
  auto three = dx::parse_quarantine_limit("3");
  REQUIRE(three);
  CHECK(dx::quarantine_limit(*three, 1000) == 3);
  CHECK(dx::to_string(*three) == "3");
  CHECK(dx::quarantine_limit(*dx::parse_quarantine_limit("100%"), 7) == 7);
  for (const char* bad : {"0", "0%", "101%", "-1", "%", "", "ten", "5 %", "2.5%", "3x"}) {
    CAPTURE(bad);
    auto refused = dx::parse_quarantine_limit(bad);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == Errc::invalid_argument);
  }
  CHECK(dx::parse_quarantine_limit("0").error().message ==
        "--max-quarantine \"0\": a number of nodes (at least 1) or a percentage of the GPU nodes from 1% to 100%, "
        "such as 10%");
}

TEST_CASE("plan_quarantine: GPU nodes to cordon, those already cordoned, the breaker", "[quarantine]") {
  dx::Snapshot s;
  json cpu = {{"metadata", {{"name", "cpu-0"}}}, {"status", json::object()}};
  s.lists[dx::Source::nodes] = {gpu_node("a", "10.0.0.1"), gpu_node("b", "10.0.0.2", true, "RMA 4711"),
                                gpu_node("c", "10.0.0.3"), gpu_node("d", "10.0.0.4"), cpu};
  using dx::Severity;
  std::vector<dx::Finding> findings = {
      finding("driver-broken", Severity::critical, "a", "nvidia-smi fails on a"),
      finding("xid-errors", Severity::critical, "a", "Xid 79 on GPU 1 of a"),
      finding("xid-errors", Severity::critical, "b", "Xid 48 on GPU 0 of b"),
      finding("driver-broken", Severity::error, "c", "nvidia-smi fails on c (NotReady)"),
      finding("driver-broken", Severity::critical, "cpu-0", "not a GPU node"),
  };
  auto plan = dx::plan_quarantine(s, findings, {10, true});
  CHECK(plan.gpu_nodes == 4);
  CHECK(plan.limit == 1);
  REQUIRE(plan.cordon.size() == 1);
  CHECK(plan.cordon[0].node == "a");
  CHECK(plan.cordon[0].reason == "driver-broken: nvidia-smi fails on a (+1 more)");
  CHECK(plan.cordon[0].findings ==
        std::vector<std::string>{"driver-broken: nvidia-smi fails on a", "xid-errors: Xid 79 on GPU 1 of a"});
  REQUIRE(plan.already_cordoned.size() == 1);
  CHECK(plan.already_cordoned[0].node == "b");
  CHECK(plan.already_cordoned[0].cordon_reason == "RMA 4711");
  CHECK_FALSE(plan.tripped);

  // One more node to cordon than the limit: the breaker trips, and nothing is written.
  findings.push_back(finding("ecc-errors", Severity::critical, "d", "row remap failed on d"));
  auto many = dx::plan_quarantine(s, findings, {10, true});
  CHECK(many.cordon.size() == 2);
  CHECK(many.tripped);
  testing::FakeClient c;
  CHECK(dx::apply_quarantine(*c.client, many, {}, {}).empty());
  CHECK(c.fake->requests().empty());
  CHECK_FALSE(dx::plan_quarantine(s, findings, {2, false}).tripped);

  // The count's reason keeps " (+N more)" however long the first summary.
  findings[0].summary = std::string(400, 'x');
  auto long_reason = dx::plan_quarantine(s, findings, {10, true}).cordon[0].reason;
  CHECK(long_reason.size() <= ops::kCordonReasonMaxBytes);
  CHECK(long_reason.ends_with("... (+1 more)"));
}

TEST_CASE(
    "cli: diagnose --quarantine prints the plan and needs --yes; --dry-run only prints; --yes cordons with "
    "the finding, leaving cordoned nodes alone",
    "[quarantine][cli]") {
  CliHarness h;
  const std::vector<std::pair<json, std::string>> nodes = {
      {gpu_node("ok-0", "10.0.0.1"), healthy_probe()},
      {gpu_node("bad-0", "10.0.0.2"), driver_not_loaded_probe()},
      {gpu_node("old-0", "10.0.0.3", true, "RMA 4711"), driver_not_loaded_probe()}};

  fleet(h, nodes);
  auto plan = h.run(kDiagnose);
  INFO(plan.err);
  CHECK(plan.exit_code == 2);
  CHECK(has(plan.out,
            "Quarantine: 2 GPU node(s) with critical node-side findings; at most 1 may be cordoned "
            "(--max-quarantine 10% of 3 GPU nodes)\n"));
  CHECK(has(plan.out, "bad-0   cordon             " + driver_not_loaded_reason("bad-0") + "\n"));
  CHECK(has(plan.out,
            "old-0   already cordoned   " + driver_not_loaded_reason("old-0") + " (its record: \"RMA 4711\")\n"));
  CHECK(
      plan.err.ends_with("error: quarantine needs --yes to cordon 1 node(s): bad-0 (--dry-run only prints the "
                         "plan)\n"));
  CHECK(mutating_requests(h.fake()) == 0);

  fleet(h, nodes);
  auto dry = h.run(diagnose({"--dry-run"}));
  CHECK(dry.exit_code == 4);  // the report's own code: critical findings
  CHECK(has(dry.out, "bad-0   cordon "));
  CHECK(has(dry.err, "Dry run: nothing was changed.\n"));
  CHECK(mutating_requests(h.fake()) == 0);

  fleet(h, nodes);
  h.fake()
      .on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_answer(201, whoami("alice")))
      .on("GET", "/api/v1/nodes/bad-0", json_answer(200, gpu_node("bad-0", "10.0.0.2", false, "", "12").dump()))
      .on("PATCH", "/api/v1/nodes/bad-0", json_answer(200, gpu_node("bad-0", "10.0.0.2", true).dump()));
  auto yes = h.run(diagnose({"--yes"}));
  INFO(yes.err);
  CHECK(yes.exit_code == 4);
  CHECK(has(yes.out, "node/bad-0 cordoned: reason \"" + driver_not_loaded_reason("bad-0") + "\"\n"));
  auto patches = patches_of(h.fake(), "bad-0");
  REQUIRE(patches.size() == 1);
  CHECK(patches[0]["spec"]["unschedulable"] == true);
  CHECK(patches[0]["metadata"]["resourceVersion"] == "12");  // read fresh, not the snapshot's
  CHECK(patches[0]["metadata"]["annotations"]["gpuctl.io/cordon-reason"] == driver_not_loaded_reason("bad-0"));
  CHECK(patches[0]["metadata"]["annotations"]["gpuctl.io/cordoned-by"] == "alice");
  CHECK(patches_of(h.fake(), "old-0").empty());
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: diagnose --quarantine's circuit breaker cordons none when more nodes qualify than allowed",
          "[quarantine][cli]") {
  CliHarness h;
  const std::vector<std::pair<json, std::string>> nodes = {{gpu_node("ok-0", "10.0.0.1"), healthy_probe()},
                                                           {gpu_node("bad-0", "10.0.0.2"), driver_not_loaded_probe()},
                                                           {gpu_node("bad-1", "10.0.0.3"), driver_not_loaded_probe()}};
  fleet(h, nodes);
  auto tripped = h.run(diagnose({"--yes"}));
  CHECK(tripped.exit_code == 3);
  CHECK(has(tripped.err,
            "error: quarantine refused by the circuit breaker: 2 GPU node(s) qualify, more than "
            "--max-quarantine 10% allows (1 of 3 GPU nodes); no node was cordoned."));
  CHECK(mutating_requests(h.fake()) == 0);

  // -o json: stdout stays the report alone; the plan and the refusal go to stderr.
  fleet(h, nodes);
  auto as_json = h.run(diagnose({"--max-quarantine", "1", "-o", "json"}));
  CHECK(as_json.exit_code == 3);
  CHECK(json::parse(as_json.out)["kind"] == "DiagnoseReport");
  CHECK(has(as_json.err, "bad-1   cordon "));

  fleet(h, nodes);
  h.fake().on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_answer(201, whoami("alice")));
  for (const char* n : {"bad-0", "bad-1"}) {
    h.fake()
        .on("GET", std::string("/api/v1/nodes/") + n, json_answer(200, gpu_node(n, "10.0.0.9").dump()))
        .on("PATCH", std::string("/api/v1/nodes/") + n, json_answer(200, gpu_node(n, "10.0.0.9", true).dump()));
  }
  auto raised = h.run(diagnose({"--max-quarantine", "2", "--yes"}));
  INFO(raised.err);
  CHECK(raised.exit_code == 4);
  CHECK(patches_of(h.fake(), "bad-0").size() == 1);
  CHECK(patches_of(h.fake(), "bad-1").size() == 1);
}

TEST_CASE("cli: diagnose --quarantine's flags are checked before any request", "[quarantine][cli]") {
  CliHarness h;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{
           {{"diagnose", "--yes"}, "error: --yes only applies to --quarantine\n"},
           {{"diagnose", "--dry-run"}, "error: --dry-run only applies to --quarantine\n"},
           {{"diagnose", "--max-quarantine", "3"}, "error: --max-quarantine only applies to --quarantine\n"},
           {{"diagnose", "--quarantine", "--yes", "--dry-run"},
            "error: --yes and --dry-run: choose one (--dry-run prints the plan, --yes acts)\n"},
           {{"diagnose", "--quarantine", "--no-ssh"},
            "error: --quarantine acts on the node-side findings of a report: it does not go with --no-ssh\n"},
           {{"diagnose", "--quarantine", "--max-quarantine", "0"},
            "error: --max-quarantine \"0\": a number of nodes (at least 1) or a percentage of the GPU nodes from 1% "
            "to 100%, such as 10%\n"}}) {
    CAPTURE(c.args);
    auto r = h.run(c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == c.message);
  }
  CHECK(h.fake().requests().empty());
  CHECK(h.ssh().calls().empty());
}
