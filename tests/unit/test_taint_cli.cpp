// The taint, label, cordon and uncordon commands in-process: exit codes, what goes to stdout
// and stderr, and the flags they share.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "test_drain_support.hpp"

using json = nlohmann::json;

using gpuctl::testing::CliHarness;
using namespace gpuctl::testing::nodeadmin;

TEST_CASE("cli: taint, label and cordon usage errors exit 2 with one line and no stdout", "[taint][cli]") {
  CliHarness h;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"taint", "n1", "a:Bogus"},
                                             {"taint", "n1", "a=b"},
                                             {"taint", "n1"},
                                             {"taint", "a=b:NoSchedule", "n1"},
                                             {"taint", "n1", "-l", "x=y", "a=b:NoSchedule"},
                                             {"taint", "n1", "a=b:NoSchedule", "--dry-run=maybe"},
                                             {"taint", "n1", "a=b:NoSchedule", "-o", "wide"},
                                             {"label", "n1", "bad key=x"},
                                             {"cordon"},
                                             {"cordon", "n1", "--all-gpu-nodes"},
                                             {"cordon", "Not_A_Node"},
                                             {"uncordon", "n1", "-l", "x=y"}}) {
    CAPTURE(args);
    auto r = h.run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.starts_with("error: "));
  }
  CHECK(h.fake().requests().empty());  // nothing reached the cluster
}

TEST_CASE("cli: taint reports each node and names the ones that failed", "[taint][cli]") {
  CliHarness h;
  h.fake()
      .on("GET", "/api/v1/nodes/n1", gpuctl::testing::json_answer(200, node("n1", "5").dump()))
      .on("GET", "/api/v1/nodes/gone",
          gpuctl::testing::json_answer(404, status(404, "NotFound", "nodes \"gone\" not found")))
      .on("PATCH", "/api/v1/nodes/n1", gpuctl::testing::json_answer(200, node("n1", "6").dump()));
  auto r = h.run({"taint", "n1", "gone", "dedicated=ml:PreferNoSchedule"});
  CHECK(r.exit_code == 1);
  CHECK(r.out == "node/n1 tainted: added dedicated=ml:PreferNoSchedule\n");
  CHECK(r.err ==
        "error: node/gone: node \"gone\" not found (list them with: gpuctl nodes --all)\n"
        "error: 1 of 2 node(s) failed: gone\n");
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: cordon -o json prints the NodeChangeList schema, a client dry run prints the patch", "[cordon][cli]") {
  CliHarness h;
  h.fake()
      .on("GET", "/api/v1/nodes/n1", gpuctl::testing::json_answer(200, node("n1", "5").dump()))
      .on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
          gpuctl::testing::json_answer(201, whoami("alice")))
      .on("PATCH", "/api/v1/nodes/n1", gpuctl::testing::json_answer(200, node("n1", "6", json::array(), true).dump()));
  auto r = h.run({"cordon", "n1", "--reason", "ECC", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "NodeChangeList");
  CHECK(doc["operation"] == "cordon");
  CHECK(doc["items"][0]["result"] == "changed");
  CHECK(doc["items"][0]["patch"]["metadata"]["annotations"]["gpuctl.io/cordoned-by"] == "alice");

  h.fake()
      .on("GET", "/api/v1/nodes/n1", gpuctl::testing::json_answer(200, node("n1", "7").dump()))
      .on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
          gpuctl::testing::json_answer(201, whoami("alice")));
  auto dry = h.run({"cordon", "n1", "--dry-run"});
  REQUIRE(dry.exit_code == 0);
  CHECK(dry.out.starts_with("node/n1 cordoned (dry run)\n  PATCH /api/v1/nodes/n1 (application/merge-patch+json) {"));
  CHECK(h.fake().count("PATCH") == 1);  // only the first run's
}
