// A drain's plan for pods holding DRA devices: room for their claims on one node that stays.
#include <catch2/catch.hpp>

#include "fakes/dra_objects.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "test_drain_support.hpp"

using json = nlohmann::json;
using namespace gpuctl;
using namespace gpuctl::testing;
using namespace gpuctl::testing::nodeadmin;

namespace {

// A class without selectors: every device of every driver (the room logic alone, whatever CEL).
json any_device_class(const std::string& name) { return {{"metadata", {{"name", name}}}, {"spec", json::object()}}; }

json devices(int n, const std::string& uuid_prefix) {
  json out = json::array();
  for (int i = 0; i < n; ++i)
    out.push_back(dra::gpu_device("gpu-" + std::to_string(i), uuid_prefix + std::to_string(i)));
  return out;
}

ops::PlanInputs inputs_with(std::vector<json> claims, json n2_devices, json n3_devices = json::array()) {
  ops::PlanInputs in;
  in.nodes = {node("n1")};
  in.pods = {{PodBuilder("train", "w0").owned_by("Job", "train", "batch/v1"),
              PodBuilder("train", "w1").owned_by("Job", "train", "batch/v1")}};
  std::vector<json> slices = {dra::slice("n1", devices(4, "GPU-A")), dra::slice("n2", n2_devices)};
  if (!n3_devices.empty()) slices.push_back(dra::slice("n3", n3_devices));
  in.dra = ops::build_dra_inventory(slices, claims, {any_device_class("gpu.nvidia.com")}, {});
  in.inventory = ops::build_node_inventory({node("n1"), node("n2"), node("n3")}, {}, true,
                                           std::chrono::system_clock::now(), &*in.dra);
  return in;
}

}  // namespace

TEST_CASE("drain plan: a pod's DRA claims fit on one node that stays, each device promised once", "[drain][dra]") {
  // w0 holds 2 devices of n1, w1 holds 2; n2 has 3 free devices (one of 4 already taken).
  auto claims = std::vector<json>{dra::claim("train", "w0-gpus", "n1", {"gpu-0", "gpu-1"}, "w0", false, 2),
                                  dra::claim("train", "w1-gpus", "n1", {"gpu-2", "gpu-3"}, "w1", false, 2),
                                  dra::claim("other", "busy", "n2", {"gpu-0"}, "busy")};
  auto in = inputs_with(claims, devices(4, "GPU-B"));
  auto plan = ops::build_drain_plan(in, ops::DrainPolicy{}, std::chrono::system_clock::now());
  REQUIRE(plan.nodes.size() == 1);
  const auto& pods = plan.nodes[0].pods;
  REQUIRE(pods.size() == 2);
  CHECK(pods[0].gpu_pod);
  CHECK(pods[0].dra_devices == 2);
  CHECK(pods[0].dra_fit == "fits");
  CHECK(pods[0].dra_node == "n2");
  // Only one free device of n2 is left for w1.
  CHECK(pods[1].dra_fit == "no-room");
  CHECK(pods[1].dra_message == "no node that stays has 2 free device(s) its claims' classes and selectors match");
  json doc = ops::to_json(plan);
  CHECK(doc["items"][0]["pods"][0]["moveTo"]["dra"]["node"] == "n2");
  CHECK(doc["items"][0]["pods"][1]["moveTo"]["fits"] == false);
}

TEST_CASE("drain plan: tainted devices and the drained node's own devices are no room", "[drain][dra]") {
  auto xid = json::array({dra::device_taint("gpu.nvidia.com/xid", "79", "NoSchedule")});
  json n2 = devices(2, "GPU-B");
  n2[0]["taints"] = xid;
  n2[1]["taints"] = xid;
  auto claims = std::vector<json>{dra::claim("train", "w0-gpus", "n1", {"gpu-0"}, "w0")};
  auto in = inputs_with(claims, n2);
  auto plan = ops::build_drain_plan(in, ops::DrainPolicy{}, std::chrono::system_clock::now());
  const auto& w0 = plan.nodes[0].pods[0];
  CHECK(w0.dra_fit == "no-room");              // n1's 3 free devices do not count: it is being drained
  CHECK_FALSE(plan.nodes[0].pods[1].gpu_pod);  // w1 holds no claim
}

TEST_CASE("drain plan: a claim of a class that does not exist never fits", "[drain][dra]") {
  auto claims = std::vector<json>{dra::claim("train", "w0-gpus", "n1", {"gpu-0"}, "w0", false, 1, "gone.example.com")};
  auto in = inputs_with(claims, devices(4, "GPU-B"));
  auto plan = ops::build_drain_plan(in, ops::DrainPolicy{}, std::chrono::system_clock::now());
  CHECK(plan.nodes[0].pods[0].dra_fit == "no-room");
  CHECK(plan.nodes[0].pods[0].dra_message == "device class gone.example.com does not exist");
}
