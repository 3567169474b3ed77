// gpuctl taint --device in-process against scripted API answers: the rule written, updated and
// deleted, dry runs, -o json, the NoExecute pre-flight, a cluster without DeviceTaintRules, and
// the usage errors that send nothing.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/dra_objects.hpp"
#include "gpuctl/ops/dra/device_taint.hpp"

using json = nlohmann::json;
using gpuctl::testing::CliHarness;
using gpuctl::testing::FakeTransport;
using gpuctl::testing::json_answer;

namespace {

const std::string kRules = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
const std::string kSlices = "/apis/resource.k8s.io/v1/resourceslices";
const gpuctl::ops::DraDeviceId kId{"gpu.nvidia.com", "node1", "gpu-0"};
const std::string kOurs = gpuctl::ops::device_taint_rule_name({"node1", "gpu-0"}, kId, "gpu.health");

std::string list_of(std::vector<json> items) {
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", items}}
      .dump();
}

// Discovery as Kubernetes 1.36 with resource.k8s.io/v1beta2 turned on answers it, `times` over
// (gpuctl and collect_dra each find the version serving DeviceTaintRules).
void serve_discovery(FakeTransport& fake, int times, bool taint_rules = true) {
  for (int i = 0; i < times; ++i) {
    fake.on("GET", "/apis/resource.k8s.io",
            json_answer(200, R"({"versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"},
              {"groupVersion": "resource.k8s.io/v1beta2", "version": "v1beta2"}]})"));
    fake.on("GET", "/apis/resource.k8s.io/v1",
            json_answer(200, R"({"resources": [{"name": "resourceslices"}, {"name": "resourceclaims"}]})"));
    fake.on(
        "GET", "/apis/resource.k8s.io/v1beta2",
        json_answer(200, taint_rules ? R"({"resources": [{"name": "devicetaintrules"}]})" : R"({"resources": []})"));
  }
}

json node1_slice() {
  using namespace gpuctl::testing::dra;
  return slice("node1", json::array({gpu_device("gpu-0", "GPU-0"), gpu_device("gpu-1", "GPU-1")}));
}

json held_claim() { return gpuctl::testing::dra::claim("team-a", "train-gpu", "node1", {"gpu-0"}, "train-0"); }

// What one run that adds a blocking taint reads before writing: the slices of node1 (and, for
// the pre-flight, every slice and claim), with `claims` holding the devices.
void serve_reads(FakeTransport& fake, std::vector<json> claims, int discoveries = 3) {
  serve_discovery(fake, discoveries);
  fake.on("GET", kSlices, json_answer(200, list_of({node1_slice()})), "fieldSelector=spec.nodeName%3Dnode1");
  fake.on("GET", kSlices, json_answer(200, list_of({node1_slice()})));
  fake.on("GET", "/apis/resource.k8s.io/v1/resourceclaims", json_answer(200, list_of(claims)));
}

json rule_answer(const std::string& effect, const std::string& resource_version) {
  gpuctl::kube::Taint taint;
  taint.key = "gpu.health";
  taint.value = "xid-79";
  taint.effect = effect;
  json r = gpuctl::ops::build_device_taint_rule("v1beta2", {"node1", "gpu-0"}, kId, taint);
  r["metadata"]["resourceVersion"] = resource_version;
  return r;
}

}  // namespace

TEST_CASE("cli: taint --device writes a DeviceTaintRule for exactly that device", "[taint][cli]") {
  CliHarness h;
  serve_reads(h.fake(), {});
  h.fake().on("GET", kRules, json_answer(200, list_of({})));
  h.fake().on("POST", kRules, json_answer(201, rule_answer("NoSchedule", "5").dump()));
  auto r = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoSchedule"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == "devicetaintrule/" + kOurs +
                     " created: added gpu.health=xid-79:NoSchedule to node1/gpu-0 (gpu.nvidia.com, pool node1)\n");
  CHECK(h.fake().unexpected().empty());
  const auto& post = h.fake().requests().back();
  REQUIRE(post.method == "POST");
  json sent = json::parse(post.body);
  CHECK(sent["spec"]["deviceSelector"] == json({{"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", "gpu-0"}}));
  CHECK(sent["spec"]["taint"] == json({{"key", "gpu.health"}, {"value", "xid-79"}, {"effect", "NoSchedule"}}));
}

TEST_CASE("cli: taint --device updates its rule on the version read, again after a 409", "[taint][cli]") {
  CliHarness h;
  serve_reads(h.fake(), {});
  h.fake().on("GET", kRules, json_answer(200, list_of({rule_answer("None", "5")})));
  h.fake().on("GET", kRules, json_answer(200, list_of({rule_answer("None", "6")})));
  h.fake().on("PATCH", kRules + "/" + kOurs,
              json_answer(409, R"({"kind": "Status", "code": 409, "reason": "Conflict", "message": "changed"})"));
  h.fake().on("PATCH", kRules + "/" + kOurs, json_answer(200, rule_answer("NoSchedule", "7").dump()));
  auto r = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoSchedule", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  std::vector<std::string> versions;
  for (const auto& req : h.fake().requests()) {
    if (req.method == "PATCH") versions.push_back(json::parse(req.body)["metadata"]["resourceVersion"]);
  }
  CHECK(versions == std::vector<std::string>{"5", "6"});
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "DeviceTaintChangeList");
  CHECK(doc["device"] == json({{"node", "node1"}, {"name", "gpu-0"}, {"driver", "gpu.nvidia.com"}, {"pool", "node1"}}));
  CHECK(doc["ruleApiVersion"] == "resource.k8s.io/v1beta2");
  REQUIRE(doc["items"].size() == 1);
  CHECK(doc["items"][0]["result"] == "updated");
  CHECK(doc["items"][0]["conflicts"] == 1);
  CHECK(doc["items"][0]["summary"] ==
        "changed gpu.health=xid-79:None to gpu.health=xid-79:NoSchedule on node1/gpu-0 (gpu.nvidia.com, pool node1)");
}

TEST_CASE("cli: taint --device KEY- deletes the device's rules, and says so when there are none", "[taint][cli]") {
  CliHarness h;
  serve_discovery(h.fake(), 1);
  h.fake().on("GET", kSlices, json_answer(200, list_of({node1_slice()})), "fieldSelector=spec.nodeName%3Dnode1");
  h.fake().on("GET", kRules, json_answer(200, list_of({rule_answer("NoSchedule", "5")})));
  h.fake().on("DELETE", kRules + "/" + kOurs, json_answer(200, R"({"kind": "Status", "status": "Success"})"));
  auto r = h.run({"taint", "--device", "node1/gpu-0", "gpu.health-", "-o", "name"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "devicetaintrule.resource.k8s.io/" + kOurs + "\n");
  CHECK(h.fake().unexpected().empty());
  CHECK(json::parse(h.fake().requests().back().body) == json::parse(R"({"preconditions": {"resourceVersion": "5"}})"));

  serve_discovery(h.fake(), 1);
  h.fake().on("GET", kSlices, json_answer(200, list_of({node1_slice()})), "fieldSelector=spec.nodeName%3Dnode1");
  h.fake().on("GET", kRules, json_answer(200, list_of({})));
  auto again = h.run({"taint", "--device", "node1/gpu-0", "gpu.health-"});
  CHECK(again.exit_code == 0);
  CHECK(again.out ==
        "device/node1/gpu-0 unchanged: no DeviceTaintRule taints node1/gpu-0 (gpu.nvidia.com, pool node1) with "
        "gpu.health\n");
  CHECK(h.fake().count("DELETE") == 1);
}

TEST_CASE("cli: taint --device --dry-run prints the rule and sends nothing, =server sends dryRun=All", "[taint][cli]") {
  CliHarness h;
  serve_reads(h.fake(), {});
  h.fake().on("GET", kRules, json_answer(200, list_of({})));
  auto dry = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoSchedule", "--dry-run"});
  REQUIRE(dry.exit_code == 0);
  CHECK(dry.out.starts_with("devicetaintrule/" + kOurs +
                            " created: added gpu.health=xid-79:NoSchedule to node1/gpu-0 "
                            "(gpu.nvidia.com, pool node1) (dry run)\n  POST " +
                            kRules + " {\"apiVersion\":\"resource.k8s.io/v1beta2\""));
  CHECK(h.fake().count("POST") == 0);

  serve_reads(h.fake(), {});
  h.fake().on("GET", kRules, json_answer(200, list_of({})));
  h.fake().on("POST", kRules, json_answer(201, rule_answer("NoSchedule", "").dump()));
  auto server = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoSchedule", "--dry-run=server"});
  REQUIRE(server.exit_code == 0);
  CHECK(server.out.find("(server dry run)") != std::string::npos);
  REQUIRE(h.fake().count("POST") == 1);
  CHECK(h.fake().requests().back().url.find("dryRun=All") != std::string::npos);
}

TEST_CASE("cli: taint --device NoExecute on a held device names the pods and needs --yes", "[taint][cli]") {
  CliHarness h;
  serve_reads(h.fake(), {held_claim()});
  h.fake().on("GET", "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/train-gpu",
              json_answer(200, held_claim().dump()));
  auto refused = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoExecute"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.out.empty());
  CHECK(refused.err ==
        "error: node1/gpu-0 is allocated to claim team-a/train-gpu, whose pods team-a/train-0 would be evicted by "
        "gpu.health=xid-79:NoExecute (add --yes to evict them, or give the claim's request a toleration)\n");
  CHECK(h.fake().count("POST") == 0);
  CHECK(h.fake().unexpected().empty());

  serve_reads(h.fake(), {held_claim()});
  h.fake().on("GET", "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/train-gpu",
              json_answer(200, held_claim().dump()));
  h.fake().on("GET", kRules, json_answer(200, list_of({})));
  h.fake().on("POST", kRules, json_answer(201, rule_answer("NoExecute", "5").dump()));
  auto yes = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoExecute", "--yes"});
  CHECK(yes.exit_code == 0);
  CHECK(yes.err.find("Warning: node1/gpu-0 is allocated to claim team-a/train-gpu: pods team-a/train-0 will be "
                     "evicted") != std::string::npos);
  CHECK(h.fake().count("POST") == 1);
}

TEST_CASE("cli: taint --device on a cluster without DeviceTaintRules exits 6 with what to turn on", "[taint][cli]") {
  CliHarness h;
  serve_discovery(h.fake(), 1, false);
  auto r = h.run({"taint", "--device", "node1/gpu-0", "gpu.health=xid-79:NoSchedule"});
  CHECK(r.exit_code == 6);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.starts_with("error: this cluster does not serve DeviceTaintRules (resource.k8s.io)"));
  CHECK(r.err.find("--runtime-config=resource.k8s.io/v1beta2/devicetaintrules=true") != std::string::npos);
  CHECK(r.err.find("DRADeviceTaintRules=true") != std::string::npos);
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: taint --device resolution errors name the node's devices and --driver", "[taint][cli]") {
  CliHarness h;
  serve_discovery(h.fake(), 1);
  json other = node1_slice();
  other["spec"]["driver"] = "example.com";
  h.fake().on("GET", kSlices, json_answer(200, list_of({node1_slice(), other})), "fieldSelector");
  auto r = h.run({"taint", "--device", "node1/gpu-0", "gpu.health:NoSchedule"});
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "error: device \"gpu-0\" of node node1 is published by example.com (pool node1) and gpu.nvidia.com (pool "
        "node1): choose one with --driver DRIVER\n");
  CHECK(h.fake().count("POST") == 0);
}

TEST_CASE("cli: taint --device usage errors exit 2 with one line and send nothing", "[taint][cli]") {
  CliHarness h;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"taint", "--device", "node1", "a:NoSchedule"},
                                             {"taint", "--device", "node1/GPU_0", "a:NoSchedule"},
                                             {"taint", "--device", "node1/gpu-0", "a:PreferNoSchedule"},
                                             {"taint", "--device", "node1/gpu-0", "node2", "a:NoSchedule"},
                                             {"taint", "--device", "node1/gpu-0", "-l", "x=y", "a:NoSchedule"},
                                             {"taint", "--device", "node1/gpu-0", "--all-gpu-nodes", "a:NoSchedule"},
                                             {"taint", "--device", "node1/gpu-0", "a:NoSchedule", "--dry-run=maybe"},
                                             {"taint", "--driver", "gpu.nvidia.com", "node1", "a:NoSchedule"}}) {
    CAPTURE(args);
    auto r = h.run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.starts_with("error: "));
  }
  CHECK(h.fake().requests().empty());
}
