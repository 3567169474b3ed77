// Verification before a node goes back into service (issue 16): the verdict on a probe read from
// real captures, the reason gpuctl records, the planners that keep a failed node cordoned, and
// rolling maintenance stopping at a node that fails.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/diagnose/quarantine.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "test_drain_support.hpp"
#include "test_verify_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::verify;
using gpuctl::ops::VerifyResult;
using gpuctl::testing::json_answer;

namespace {

ops::NodeProbe probe_of(const std::string& node, const std::string& ip, const ssh::HostRun& run) {
  return ops::read_probe_run({node, ip, ""}, run);
}

ops::NodeVerification verify(const json& node, const ssh::HostRun& run) {
  return ops::diagnose::verify_probe(node, probe_of(node["metadata"]["name"], "10.0.0.1", run), {});
}

}  // namespace

TEST_CASE("verify: healthy GPUs pass, a broken driver fails with its finding, what cannot be checked is unverified",
          "[verify]") {
  auto ok = verify(gpu_node("ok-0", "10.0.0.1"), testing::remote_ran(healthy_probe()));
  CHECK(ok.result == VerifyResult::passed);
  CHECK(ok.reason.empty());
  CHECK(ok.findings.empty());
  CHECK(ok.probe == "ok");

  auto bad = verify(gpu_node("bad-0", "10.0.0.1"), testing::remote_ran(driver_not_loaded_probe()));
  CHECK(bad.result == VerifyResult::failed);
  CHECK(bad.reason == driver_not_loaded_reason("bad-0"));
  CHECK(bad.findings == std::vector<std::string>{driver_not_loaded_reason("bad-0")});
  CHECK(bad.probe == "driver_not_loaded");

  // NotReady: driver-broken is only an error there, but a node whose GPUs do not answer never passes.
  json down = gpu_node("down-0", "10.0.0.1");
  down["status"]["conditions"][0]["status"] = "False";
  auto not_ready = verify(down, testing::remote_ran(driver_not_loaded_probe()));
  CHECK(not_ready.result == VerifyResult::failed);
  CHECK(not_ready.findings.empty());
  CHECK(not_ready.reason.starts_with("nvidia-smi fails on down-0 (driver_not_loaded): "));

  auto far = verify(gpu_node("far-0", "10.0.0.1"),
                    testing::ssh_failed("ssh: connect to host 10.0.0.1 port 22: Connection refused\n"));
  CHECK(far.result == VerifyResult::unverified);
  CHECK(far.reason.starts_with("ssh could not run the probe on far-0 (unreachable): "));

  // The GPU Operator's driver container: no nvidia-smi on the host, nothing to judge the GPUs by.
  auto bare =
      verify(gpu_node("bare-0", "10.0.0.1"),
             testing::remote_ran(transcript(testing::probe_step("all", "sh: 1: nvidia-smi: not found", "", 127))));
  CHECK(bare.result == VerifyResult::unverified);
  CHECK(bare.reason == "nvidia-smi is not on bare-0's PATH, so its GPUs cannot be checked over ssh");

  ops::NodeProbe interrupted;
  interrupted.outcome = "interrupted";
  CHECK(ops::diagnose::verify_probe(gpu_node("int-0", "10.0.0.1"), interrupted, {}).result == VerifyResult::unverified);

  json cpu = {{"metadata", {{"name", "cpu-0"}}}, {"status", {{"capacity", {{"cpu", "64"}}}}}};
  auto plain = ops::diagnose::verify_probe(cpu, {}, {});
  CHECK(plain.result == VerifyResult::passed);
  CHECK(plain.probe.empty());
}

TEST_CASE("verify_nodes: the GPU nodes probed in one fan-out, verdicts in the nodes' order", "[verify]") {
  testing::FakeSshRunner runner;
  runner.on("10.0.0.1", testing::remote_ran(healthy_probe()));
  runner.on("10.0.0.2", testing::remote_ran(driver_not_loaded_probe()));
  json cpu = {{"metadata", {{"name", "cpu-0"}}}, {"status", json::object()}};
  ops::diagnose::VerifyOptions options;
  options.runner = &runner;
  auto verdicts = ops::diagnose::verify_nodes({gpu_node("a", "10.0.0.1"), cpu, gpu_node("b", "10.0.0.2")}, options);
  REQUIRE(verdicts.size() == 3);
  CHECK(verdicts[0].node == "a");
  CHECK(verdicts[0].result == VerifyResult::passed);
  CHECK(verdicts[1].node == "cpu-0");
  CHECK(verdicts[1].result == VerifyResult::passed);
  CHECK(verdicts[2].result == VerifyResult::failed);
  REQUIRE(runner.calls().size() == 1);
  CHECK(runner.calls()[0].addresses == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});

  // No way to reach them: every GPU node unverified, never passed.
  auto unreached = ops::diagnose::verify_nodes({gpu_node("a", "10.0.0.1"), cpu}, {});
  CHECK(unreached[0].result == VerifyResult::unverified);
  CHECK(unreached[1].result == VerifyResult::passed);
}

TEST_CASE("bounded_reason: one line of valid UTF-8, at most 256 bytes, never half a character", "[verify]") {
  CHECK(ops::bounded_reason("  Xid 79\non GPU 3\t\t(fallen off the bus)  ") == "Xid 79 on GPU 3 (fallen off the bus)");
  CHECK(ops::bounded_reason("bad \xff byte") == "bad ? byte");
  // 257 bytes: the cut at 253 falls after a whole two-byte character, which stays.
  std::string whole = ops::bounded_reason(std::string(251, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9");
  CHECK(whole == std::string(251, 'a') + "\xc3\xa9...");
  CHECK(whole.size() == ops::kCordonReasonMaxBytes);
  // 258 bytes: the cut falls inside a character, which goes whole.
  CHECK(ops::bounded_reason(std::string(252, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9") == std::string(252, 'a') + "...");
  CHECK(ops::bounded_reason(std::string(300, 'x')).size() == ops::kCordonReasonMaxBytes);
}

TEST_CASE(
    "plan_verified_uncordon: passed uncordons, failed keeps the node cordoned with the finding, unverified "
    "changes nothing",
    "[verify][node-admin]") {
  json cordoned = gpu_node("gpu-7", "10.0.0.7", true, "driver upgrade", "12");
  ops::CordonRequest record{true, "", "alice", "2026-12-06T12:00:00Z"};

  ops::NodeVerification passed{"gpu-7", VerifyResult::passed, "", {}, "ok"};
  auto back = ops::plan_verified_uncordon(cordoned, passed, record);
  REQUIRE(back);
  CHECK(back->changed);
  CHECK(back->patch["spec"]["unschedulable"].is_null());
  CHECK(back->summary == "cleared reason \"driver upgrade\"");

  ops::NodeVerification failed{"gpu-7", VerifyResult::failed, "xid-errors: Xid 79 on GPU 3", {}, "ok"};
  auto kept = ops::plan_verified_uncordon(cordoned, failed, record);
  REQUIRE(kept);
  CHECK(kept->changed);
  CHECK(kept->summary == "kept cordoned: reason \"xid-errors: Xid 79 on GPU 3\" (was \"driver upgrade\")");
  CHECK(kept->patch == json{{"metadata",
                             {{"resourceVersion", "12"},
                              {"annotations",
                               {{"gpuctl.io/cordon-reason", "xid-errors: Xid 79 on GPU 3"},
                                {"gpuctl.io/cordoned-by", "alice"},
                                {"gpuctl.io/cordoned-at", "2026-12-06T12:00:00Z"}}}}}});
  // Already saying so: nothing to write.
  json said = gpu_node("gpu-7", "10.0.0.7", true, "xid-errors: Xid 79 on GPU 3");
  auto again = ops::plan_verified_uncordon(said, failed, record);
  REQUIRE(again);
  CHECK_FALSE(again->changed);
  // A schedulable node that fails is cordoned.
  auto out = ops::plan_verified_uncordon(gpu_node("gpu-7", "10.0.0.7"), failed, record);
  REQUIRE(out);
  CHECK(out->patch["spec"]["unschedulable"] == true);
  CHECK(out->patch["metadata"]["annotations"]["gpuctl.io/cordon-reason"] == "xid-errors: Xid 79 on GPU 3");

  ops::NodeVerification unverified{"gpu-7", VerifyResult::unverified, "ssh could not run the probe", {}, "unreachable"};
  auto left = ops::plan_verified_uncordon(cordoned, unverified, record);
  REQUIRE(left);
  CHECK_FALSE(left->changed);

  // gpuctl cordon itself still keeps an earlier record.
  auto plain = ops::plan_cordon(cordoned, {true, "other", "carol", "2026-12-06T12:00:00Z"});
  REQUIRE(plain);
  CHECK_FALSE(plain->changed);
}

TEST_CASE(
    "rolling --verify: a node whose driver is broken stays cordoned with the finding, and no further node "
    "starts",
    "[verify][drain]") {
  testing::FakeClient c;
  auto& fake = *c.fake;
  using testing::nodeadmin::list_of;
  for (const char* n : {"n1", "n2"}) {
    const std::string name = n;
    const std::string ip = name == "n1" ? "10.0.0.1" : "10.0.0.2";
    fake.on("PATCH", "/api/v1/nodes/" + name, json_answer(200, gpu_node(name, ip, true, "", "8").dump()))
        .on("PATCH", "/api/v1/nodes/" + name, json_answer(200, gpu_node(name, ip, false, "", "9").dump()));
    fake.on("GET", "/api/v1/pods", json_answer(200, list_of({})), "fieldSelector=spec.nodeName%3D" + name);
    fake.on("GET", "/api/v1/nodes/" + name, json_answer(200, gpu_node(name, ip, true, "", "8").dump()))
        .on("GET", "/api/v1/nodes/" + name, json_answer(200, gpu_node(name, ip, true, "", "8").dump()));
  }
  testing::FakeSshRunner runner;
  runner.on("10.0.0.1", testing::remote_ran(healthy_probe()));
  runner.on("10.0.0.2", testing::remote_ran(driver_not_loaded_probe()));
  ops::diagnose::VerifyOptions vo;
  vo.runner = &runner;
  ops::RollingOptions o;
  o.drain.sleep = [](std::chrono::milliseconds) {};
  o.drain.cordon.by = "alice";
  o.uncordon = true;
  o.verify = [&](const std::vector<json>& nodes) { return ops::diagnose::verify_nodes(nodes, vo); };
  auto results = ops::rolling_maintenance(
      *c.client, {gpu_node("n1", "10.0.0.1"), gpu_node("n2", "10.0.0.2"), gpu_node("n3", "10.0.0.3")}, o);
  REQUIRE(results.size() == 3);
  CHECK(results[0].ok);
  CHECK(results[0].verify == "passed");
  CHECK(results[0].uncordon == "uncordoned");
  CHECK_FALSE(results[1].ok);
  CHECK(ops::rolling_result(results[1]) == "failed");
  CHECK(results[1].verify == "failed");
  CHECK(results[1].uncordon.empty());
  CHECK(results[1].drain.message ==
        "not uncordoned: " + driver_not_loaded_reason("n2") + "; it stays cordoned with that reason");
  CHECK(results[2].not_started);  // as after a failed --exec
  CHECK(fake.unexpected().empty());

  // n1: cordon, then uncordon. n2: cordon, then its reason, and never unschedulable: null.
  auto n1 = patches_of(fake, "n1");
  REQUIRE(n1.size() == 2);
  CHECK(n1[1]["spec"]["unschedulable"].is_null());
  auto n2 = patches_of(fake, "n2");
  REQUIRE(n2.size() == 2);
  CHECK_FALSE(n2[1].contains("spec"));
  CHECK(n2[1]["metadata"]["annotations"]["gpuctl.io/cordon-reason"] == driver_not_loaded_reason("n2"));
  CHECK(n2[1]["metadata"]["annotations"]["gpuctl.io/cordoned-by"] == "alice");
  CHECK(runner.calls().size() == 2);  // one probe per node, just before its uncordon

  auto doc = ops::to_json(results);
  CHECK(doc["items"][0]["verify"] == "passed");
  CHECK(doc["items"][1]["verify"] == "failed");
  CHECK(doc["items"][1]["rollingResult"] == "failed");
}
