// gpuctl drain in-process: flag validation, the plan, the summary and the exit code.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "test_drain_support.hpp"

using json = nlohmann::json;

using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using namespace gpuctl::testing::nodeadmin;

TEST_CASE("cli: drain refuses flag combinations that make no sense, before any request", "[drain][cli]") {
  CliHarness h;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{
           {{"drain", "n1", "--exec", "true"}, "error: --exec only applies to rolling maintenance: add --rolling\n"},
           {{"drain", "n1", "--uncordon"}, "error: --uncordon only applies to rolling maintenance: add --rolling\n"},
           {{"drain", "-l", "a=b", "--rolling", "--max-concurrent", "2"},
            "error: --max-concurrent does not apply with --rolling: --max-unavailable says how many nodes are out at "
            "once\n"},
           {{"drain", "n1", "--timeout", "soon"}, ""},
           {{"drain", "n1", "--grace-period", "-5"}, ""},
           {{"drain", "n1", "--max-evictions-in-flight", "0"}, "error: --max-evictions-in-flight: at least 1\n"},
           {{"drain", "-l", "a=b", "--rolling", "--exec-timeout", "5m"},
            "error: --exec-timeout needs --exec COMMAND\n"},
           {{"drain"}, ""}}) {
    CAPTURE(c.args);
    auto r = h.run(c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    if (!c.message.empty()) CHECK(r.err == c.message);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(h.fake().requests().empty());
}

TEST_CASE("cli: drain --dry-run -o json prints the plan and writes nothing", "[drain][cli]") {
  CliHarness h;
  json pod = PodBuilder("ml", "bare");
  h.fake()
      .on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1").dump()))
      .on("GET", "/apis/policy/v1/poddisruptionbudgets", json_answer(200, list_of({})))
      .on("GET", "/api/v1/pods", json_answer(200, list_of({pod})), "fieldSelector=spec.nodeName%3Dn1")
      .on("GET", "/api/v1/nodes", json_answer(200, list_of({node("n1")}, "5", "NodeList")))
      .on("GET", "/api/v1/pods", json_answer(200, list_of({pod})), "fieldSelector=spec.nodeName%21%3D")
      .serves_no_dra();
  auto r = h.run({"drain", "n1", "--dry-run", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  json plan = json::parse(r.out);
  CHECK(plan["kind"] == "DrainPlan");
  CHECK(plan["items"][0]["pods"][0]["action"] == "refuse");
  CHECK(plan["items"][0]["pods"][0]["reason"] == "unmanaged");
  CHECK(plan["items"][0]["completes"] == false);
  CHECK(mutating_requests(h.fake()) == 0);
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: drain prints a summary row per node, progress on stderr, and exits 1 naming what is not drained",
          "[drain][cli]") {
  CliHarness h;
  h.fake()
      .on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1").dump()))
      .on("GET", "/api/v1", json_answer(200, discovery_with_eviction()))
      .on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_answer(201, whoami("admin")))
      .on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "11", json::array(), true).dump()))
      .on("GET", "/api/v1/pods", json_answer(200, list_of({PodBuilder("ml", "bare")})),
          "fieldSelector=spec.nodeName%3Dn1");
  auto r = h.run({"drain", "n1", "--reason", "ECC"});
  CHECK(r.exit_code == 1);
  CHECK(
      r.out.starts_with("NODE   RESULT   CORDON     EVICTED   SKIPPED   REMAINING   TIME   MESSAGE\nn1     failed   "
                        "cordoned   0         0         1"));
  CHECK(r.out.find("cannot drain, nothing was evicted: declares no controller, so nothing would recreate it (use "
                   "--force to evict it): ml/bare") != std::string::npos);
  // Not a terminal: one timestamped line per event, then the error naming the node.
  CHECK(r.err.find("Z n1: cordoned: reason \"ECC\"\n") != std::string::npos);
  CHECK(r.err.ends_with("error: 1 node(s) not fully drained: n1\n"));
  CHECK(h.fake().unexpected().empty());
}
