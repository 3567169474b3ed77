// Shape checks over API objects (kube/objects.hpp): a wrongly typed field names the object and
// the field, null counts as absent, and the listing commands skip such objects and go on.
#include <catch2/catch.hpp>

#include <functional>

#include "fakes/cli_harness.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "test_drain_support.hpp"

using namespace gpuctl;
using json = nlohmann::json;
using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using gpuctl::testing::nodeadmin::list_of;
using gpuctl::testing::nodeadmin::node;

TEST_CASE("objects: shape_problem names the first wrongly typed field, null is absent", "[objects]") {
  json n = node("g-0");
  CHECK(kube::node_shape_problem(n).empty());
  struct Case {
    std::function<void(json&)> damage;
    std::string problem;
  };
  std::vector<Case> cases = {
      {[](json& j) { j["status"] = nullptr; }, ""},
      {[](json& j) { j["spec"]["taints"] = nullptr; }, ""},
      {[](json& j) { j["status"] = "Ready"; }, "status is a string, expected an object"},
      {[](json& j) { j["status"]["capacity"] = json::array({"8"}); },
       "status.capacity is a list, expected a map of quantities"},
      {[](json& j) { j["status"]["capacity"]["nvidia.com/gpu"] = "lots"; },
       "status.capacity.nvidia.com/gpu is \"lots\", expected a quantity"},
      {[](json& j) { j["status"]["capacity"]["nvidia.com/gpu"] = true; },
       "status.capacity.nvidia.com/gpu is a boolean, expected a quantity"},
      {[](json& j) { j["metadata"]["name"] = 7; }, "metadata.name is an integer, expected a string"},
      {[](json& j) { j["metadata"]["labels"]["pool"] = 1; }, "metadata.labels.pool is an integer, expected a string"},
      {[](json& j) { j["spec"]["taints"] = json::array({{{"key", "a"}, {"effect", "NoSchedule"}}, {{"key", 5}}}); },
       "spec.taints[1].key is an integer, expected a string"},
      {[](json& j) { j["spec"]["taints"] = {{"key", "a"}}; }, "spec.taints is an object, expected a list"},
      {[](json& j) { j["spec"]["taints"] = json::array({"a=b:NoSchedule"}); },
       "spec.taints[0] is a string, expected an object"},
      {[](json& j) { j["spec"]["unschedulable"] = "yes"; }, "spec.unschedulable is a string, expected a boolean"},
      {[](json& j) { j["status"]["nodeInfo"] = json::array(); }, "status.nodeInfo is a list, expected an object"},
  };
  for (const auto& c : cases) {
    json bad = n;
    c.damage(bad);
    CAPTURE(bad.dump());
    CHECK(kube::node_shape_problem(bad) == c.problem);
  }
  CHECK(kube::node_shape_problem(json::array()) == "the object is a list, expected an object");
  CHECK(kube::pod_shape_problem(
            {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", {{{"name", "main"}, {"resources", "big"}}}}}}}) ==
        "spec.containers[0].resources is a string, expected an object");
  CHECK(kube::job_shape_problem(
            {{"spec",
              {{"template",
                {{"spec", {{"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", "x"}}}}}}}}}}}}}}}) ==
        "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu is \"x\", expected a quantity");
  CHECK(kube::job_shape_problem({{"status", {{"active", "1"}}}}) == "status.active is a string, expected an integer");
}

TEST_CASE("objects: keep_well_formed keeps the good objects and names each skipped one", "[objects]") {
  json bad = node("g-1");
  bad["status"]["allocatable"] = "8";
  json nameless = node("x");
  nameless["metadata"]["name"] = json::array();
  std::vector<std::string> skipped;
  auto kept = kube::keep_well_formed({node("g-0"), bad, nameless}, "node", kube::node_shape_problem, skipped);
  REQUIRE(kept.size() == 1);
  CHECK(kube::name_of(kept[0]) == "g-0");
  CHECK(skipped ==
        std::vector<std::string>{"node/g-1 skipped: status.allocatable is a string, expected a map of quantities",
                                 "node #3 (no name) skipped: metadata.name is a list, expected a string"});
}

TEST_CASE("nodes inventory: one malformed node or pod is skipped and named, the rest is counted", "[objects][nodes]") {
  json bad = node("g-1");
  bad["status"]["capacity"] = json::array();
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "ml"}}},
              {"spec", {{"nodeName", "g-0"}, {"containers", "main"}}}};
  auto inv = ops::build_node_inventory({node("g-0"), bad}, {pod}, false, std::chrono::system_clock::now());
  REQUIRE(inv.nodes.size() == 1);
  CHECK(inv.nodes[0].name == "g-0");
  REQUIRE(inv.skipped.size() == 2);
  CHECK(inv.skipped[0] == "pod ml/p not counted: spec.containers is a string, expected a list");
  CHECK(inv.skipped[1] == "node/g-1 skipped: status.capacity is a list, expected a map of quantities");
}

TEST_CASE("cli: nodes and jobs with a wrongly typed object name it, list the rest and exit 1", "[objects][cli]") {
  CliHarness h;
  json bad = node("g-1");
  bad["status"] = json::array({"Ready"});
  json empty_pods = {{"apiVersion", "v1"}, {"kind", "PodList"}, {"metadata", json::object()}, {"items", json::array()}};
  h.fake()
      .on("GET", "/api/v1/nodes", json_answer(200, list_of({node("g-0"), bad})))
      .on("GET", "/api/v1/pods", json_answer(200, empty_pods.dump()))
      .serves_no_dra();
  auto r = h.run({"nodes"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("g-0") != std::string::npos);
  CHECK(r.out.find("g-1") == std::string::npos);
  CHECK(r.err == "Warning: node/g-1 skipped: status is a list, expected an object\n");

  json job = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", {{"name", "train"}, {"namespace", "default"}, {"uid", "u1"}}},
      {"spec",
       {{"template",
         {{"spec", {{"containers", {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}}}}},
      {"status", nullptr}};
  json broken = job;
  broken["metadata"]["name"] = "broken";
  broken["spec"]["parallelism"] = "2";
  CliHarness j;
  j.fake()
      .on("GET", "/apis/batch/v1/namespaces/default/jobs", json_answer(200, list_of({job, broken})))
      .on("GET", "/api/v1/namespaces/default/pods", json_answer(200, empty_pods.dump()))
      .on("GET", "/api/v1/namespaces/default/events", json_answer(200, empty_pods.dump()));
  auto jr = j.run({"jobs"});
  CHECK(jr.exit_code == 1);
  CHECK(jr.out.find("train") != std::string::npos);
  CHECK(jr.out.find("broken") == std::string::npos);
  CHECK(jr.err == "Warning: job default/broken skipped: spec.parallelism is a string, expected an integer\n");
}
