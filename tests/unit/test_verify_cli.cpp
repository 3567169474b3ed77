// uncordon --verify and drain --rolling --uncordon's verification through the CLI, with a fake
// API server and fake ssh hosts answering real probe captures.
#include <cstdlib>

#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "test_drain_support.hpp"
#include "test_verify_support.hpp"

using json = nlohmann::json;

using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using gpuctl::testing::nodeadmin::mutating_requests;
using gpuctl::testing::nodeadmin::whoami;
using namespace gpuctl::testing::verify;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ok-0 (healthy), bad-0 (driver not loaded) and far-0 (ssh refused), all cordoned for an upgrade.
void three_cordoned_nodes(CliHarness& h) {
  h.fake()
      .on("GET", "/api/v1/nodes/ok-0", json_answer(200, gpu_node("ok-0", "10.0.0.1", true, "driver upgrade").dump()))
      .on("GET", "/api/v1/nodes/bad-0", json_answer(200, gpu_node("bad-0", "10.0.0.2", true, "driver upgrade").dump()))
      .on("GET", "/api/v1/nodes/far-0", json_answer(200, gpu_node("far-0", "10.0.0.3", true, "RMA 4711").dump()))
      .on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_answer(201, whoami("alice")));
  h.ssh().on("10.0.0.1", gpuctl::testing::remote_ran(healthy_probe()));
  h.ssh().on("10.0.0.2", gpuctl::testing::remote_ran(driver_not_loaded_probe()));
  h.ssh().on("10.0.0.3", gpuctl::testing::ssh_failed("ssh: connect to host 10.0.0.3 port 22: Connection refused\n"));
}

}  // namespace

TEST_CASE(
    "cli: uncordon --verify brings back the healthy node, keeps the broken one cordoned with the finding, "
    "never uncordons an unverified one",
    "[verify][cli]") {
  CliHarness h;
  three_cordoned_nodes(h);
  h.fake()
      .on("PATCH", "/api/v1/nodes/ok-0", json_answer(200, gpu_node("ok-0", "10.0.0.1").dump()))
      .on("PATCH", "/api/v1/nodes/bad-0", json_answer(200, gpu_node("bad-0", "10.0.0.2", true).dump()));
  auto r = h.run({"uncordon", "ok-0", "bad-0", "far-0", "--verify"});
  CHECK(r.exit_code == 1);
  CHECK(r.out == "node/ok-0 uncordoned: cleared reason \"driver upgrade\"\n");
  CHECK(has(r.err, "error: node/bad-0: not uncordoned: " + driver_not_loaded_reason("bad-0") +
                       "; it stays cordoned with that reason\n"));
  CHECK(has(r.err,
            "error: node/far-0: not uncordoned: could not verify it: ssh could not run the probe on far-0 "
            "(unreachable): "));
  CHECK(has(r.err, "; it stays cordoned, its record unchanged\n"));
  CHECK(r.err.ends_with("error: 2 of 3 node(s) failed: bad-0, far-0\n"));
  // One fan-out for all three, before any write.
  REQUIRE(h.ssh().calls().size() == 1);
  CHECK(h.ssh().calls()[0].addresses == std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"});

  auto ok = patches_of(h.fake(), "ok-0");
  REQUIRE(ok.size() == 1);
  CHECK(ok[0]["spec"]["unschedulable"].is_null());
  auto bad = patches_of(h.fake(), "bad-0");
  REQUIRE(bad.size() == 1);
  CHECK_FALSE(bad[0].contains("spec"));  // stays unschedulable
  CHECK(bad[0]["metadata"]["resourceVersion"] == "7");
  CHECK(bad[0]["metadata"]["annotations"]["gpuctl.io/cordon-reason"] == driver_not_loaded_reason("bad-0"));
  CHECK(bad[0]["metadata"]["annotations"]["gpuctl.io/cordoned-by"] == "alice");
  CHECK(patches_of(h.fake(), "far-0").empty());
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: uncordon --verify --dry-run -o json: each node's verification, nothing written", "[verify][cli]") {
  CliHarness h;
  three_cordoned_nodes(h);
  auto r = h.run({"uncordon", "ok-0", "bad-0", "far-0", "--verify", "--dry-run", "-o", "json"});
  CHECK(r.exit_code == 1);
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "NodeChangeList");
  CHECK(doc["operation"] == "uncordon");
  CHECK(doc["dryRun"] == "client");
  REQUIRE(doc["items"].size() == 3);
  CHECK(doc["items"][0]["result"] == "changed");
  CHECK(doc["items"][0]["verification"] ==
        json{{"result", "passed"}, {"reason", ""}, {"findings", json::array()}, {"probe", "ok"}});
  CHECK(doc["items"][1]["result"] == "failed");
  CHECK(doc["items"][1]["verification"]["result"] == "failed");
  CHECK(doc["items"][1]["verification"]["reason"] == driver_not_loaded_reason("bad-0"));
  CHECK(doc["items"][1]["verification"]["probe"] == "driver_not_loaded");
  CHECK(doc["items"][1]["patch"]["metadata"]["annotations"]["gpuctl.io/cordon-reason"] ==
        driver_not_loaded_reason("bad-0"));
  CHECK(has(doc["items"][1]["error"], "it would stay cordoned with that reason"));
  CHECK(doc["items"][2]["verification"]["result"] == "unverified");
  CHECK(doc["items"][2]["patch"].is_null());
  CHECK(mutating_requests(h.fake()) == 0);
}

TEST_CASE("cli: uncordon --verify reads the ssh settings as gpus does; ssh flags without --verify are refused",
          "[verify][cli]") {
  CliHarness h;
  auto refused = h.run({"uncordon", "ok-0", "--ssh-user", "ops"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err == "error: --ssh-user only applies with --verify (the GPUs are checked over ssh)\n");
  CHECK(h.fake().requests().empty());

  h.fake()
      .on("GET", "/api/v1/nodes/ok-0", json_answer(200, gpu_node("ok-0", "10.0.0.1", true).dump()))
      .on("PATCH", "/api/v1/nodes/ok-0", json_answer(200, gpu_node("ok-0", "10.0.0.1").dump()));
  h.ssh().on("10.0.0.1", gpuctl::testing::remote_ran(healthy_probe()));
  ::setenv("GPUCTL_SSH_USER", "from-env", 1);
  auto r = h.run({"uncordon", "ok-0", "--verify"});
  ::unsetenv("GPUCTL_SSH_USER");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "node/ok-0 uncordoned\n");
  REQUIRE(h.ssh_settings().size() == 1);
  CHECK(h.ssh_settings()[0].user == "from-env");
}

TEST_CASE("cli: drain --rolling --uncordon verifies before each uncordon unless --no-verify", "[verify][drain][cli]") {
  CliHarness h;
  // What one node's drain reads and writes up to its uncordon: cordoned, no pods, read again.
  auto drained = [&h]() -> gpuctl::testing::FakeTransport& {
    return h.fake()
        .on("GET", "/api/v1/nodes/n1", json_answer(200, gpu_node("n1", "10.0.0.1").dump()))
        .on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_answer(201, whoami("alice")))
        .on("PATCH", "/api/v1/nodes/n1", json_answer(200, gpu_node("n1", "10.0.0.1", true).dump()))
        .on("GET", "/api/v1/pods", json_answer(200, gpuctl::testing::nodeadmin::list_of({})),
            "fieldSelector=spec.nodeName%3Dn1")
        .on("GET", "/api/v1/nodes/n1", json_answer(200, gpu_node("n1", "10.0.0.1", true).dump()));
  };
  auto routes = [&](bool healthy) {
    drained()
        .on("GET", "/api/v1/nodes/n1", json_answer(200, gpu_node("n1", "10.0.0.1", true).dump()))
        .on("PATCH", "/api/v1/nodes/n1", json_answer(200, gpu_node("n1", "10.0.0.1", !healthy).dump()));
    h.ssh().on("10.0.0.1", gpuctl::testing::remote_ran(healthy ? healthy_probe() : driver_not_loaded_probe()));
  };
  routes(true);
  auto ok = h.run({"drain", "n1", "--rolling", "--uncordon"});
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(has(ok.out, "UNCORDON     VERIFY"));
  CHECK(has(ok.out, "uncordoned   passed"));
  CHECK(h.ssh().calls().size() == 1);

  routes(false);
  auto bad = h.run({"drain", "n1", "--rolling", "--uncordon", "-o", "json"});
  CHECK(bad.exit_code == 1);
  json doc = json::parse(bad.out);
  CHECK(doc["items"][0]["rollingResult"] == "failed");
  CHECK(doc["items"][0]["verify"] == "failed");
  CHECK(doc["items"][0]["uncordon"] == "");
  CHECK(doc["items"][0]["message"] ==
        "not uncordoned: " + driver_not_loaded_reason("n1") + "; it stays cordoned with that reason");
  CHECK(bad.err.ends_with("error: 1 node(s) not fully drained: n1\n"));

  // --no-verify: the uncordon as before, no ssh.
  drained().on("PATCH", "/api/v1/nodes/n1", json_answer(200, gpu_node("n1", "10.0.0.1").dump()));
  auto skipped = h.run({"drain", "n1", "--rolling", "--uncordon", "--no-verify"});
  INFO(skipped.err);
  CHECK(skipped.exit_code == 0);
  CHECK(has(skipped.out, "uncordoned   -"));
  CHECK(h.ssh().calls().size() == 2);  // none more
  CHECK(h.fake().unexpected().empty());

  // The ssh flags and --verify mean nothing without --rolling --uncordon.
  auto plain = h.run({"drain", "n1", "--verify"});
  CHECK(plain.exit_code == 2);
  CHECK(plain.err ==
        "error: --verify and --no-verify apply to --rolling --uncordon (the check before each uncordon)\n");
  auto off = h.run({"drain", "n1", "--rolling", "--uncordon", "--no-verify", "--ssh-user", "ops"});
  CHECK(off.exit_code == 2);
  CHECK(off.err ==
        "error: --ssh-user only applies to --rolling --uncordon with --verify (the GPUs are checked over ssh)\n");
}
