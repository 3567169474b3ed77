#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/time.hpp"

using gpuctl::ops::build_node_inventory;
using nlohmann::json;

namespace {

const auto kNow = *gpuctl::util::parse_rfc3339("2026-12-02T12:00:00Z");

json gpu_node(const std::string& name, int capacity, int allocatable, json labels = json::object(),
              json extra_status = json::object()) {
  json node = {{"metadata", {{"name", name}, {"labels", labels}, {"creationTimestamp", "2026-12-01T12:00:00Z"}}},
               {"spec", json::object()},
               {"status",
                {{"capacity", {{"cpu", "96"}, {"nvidia.com/gpu", std::to_string(capacity)}}},
                 {"allocatable", {{"cpu", "96"}, {"nvidia.com/gpu", std::to_string(allocatable)}}},
                 {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  node["status"].update(extra_status);
  return node;
}

json container(json requests, json limits = json::object(), const std::string& restart_policy = "") {
  json c = {{"name", "c"}, {"resources", {{"requests", requests}, {"limits", limits}}}};
  if (!restart_policy.empty()) c["restartPolicy"] = restart_policy;
  return c;
}

json pod(const std::string& node, json containers, const std::string& phase = "Running", json init = json::array(),
         json overhead = nullptr) {
  json p = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
            {"spec", {{"nodeName", node}, {"containers", containers}, {"initContainers", init}}},
            {"status", {{"phase", phase}}}};
  if (!overhead.is_null()) p["spec"]["overhead"] = overhead;
  return p;
}

}  // namespace

TEST_CASE("ops::build_node_inventory counts GPU requests of non-terminal pods per node", "[nodes]") {
  std::vector<json> nodes = {gpu_node("a100-0", 8, 7, {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"}}),
                             gpu_node("a100-1", 8, 8, {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"}}),
                             gpu_node("t4-0", 4, 4, {{"accelerator", "nvidia-tesla-t4"}})};
  std::vector<json> pods = {
      pod("a100-0", json::array({container({{"nvidia.com/gpu", "2"}}, {{"nvidia.com/gpu", "2"}})})),
      pod("a100-0",
          json::array({container(json::object(), {{"nvidia.com/gpu", "3"}})})),  // limit only: defaults the request
      pod("a100-0", json::array({container({{"nvidia.com/gpu", "4"}})}), "Succeeded"),  // finished: holds nothing
      pod("a100-0", json::array({container({{"nvidia.com/gpu", "4"}})}), "Failed"),
      pod("t4-0", json::array({container({{"cpu", "2"}})})),                    // no GPU
      pod("", json::array({container({{"nvidia.com/gpu", "1"}})}), "Pending"),  // not bound
  };
  auto inv = build_node_inventory(nodes, pods, false, kNow);
  REQUIRE(inv.nodes.size() == 3);
  const auto& a0 = inv.nodes[0];
  CHECK(a0.name == "a100-0");
  CHECK(a0.product == "NVIDIA-A100-SXM4-40GB");
  CHECK(a0.product_label == "nvidia.com/gpu.product");
  CHECK(a0.gpus.capacity == 8);
  CHECK(a0.gpus.allocatable == 7);
  CHECK(a0.gpus.used == 5);
  CHECK(a0.gpus.free() == 2);
  CHECK(a0.unhealthy() == 1);
  CHECK(a0.gpu_pods == 2);
  CHECK(a0.age_seconds == 86400);
  const auto& t4 = inv.nodes[2];
  CHECK(t4.product == "nvidia-tesla-t4");
  CHECK(t4.product_label == "accelerator");
  CHECK(t4.gpus.used == 0);
  CHECK(t4.gpu_pods == 0);

  REQUIRE(inv.products.size() == 2);
  CHECK(inv.products[0].product == "NVIDIA-A100-SXM4-40GB");
  CHECK(inv.products[0].nodes == 2);
  CHECK(inv.products[0].capacity == 16);
  CHECK(inv.products[0].allocatable == 15);
  CHECK(inv.products[0].used == 5);
  CHECK(inv.products[0].free == 10);
  CHECK(inv.products[1].product == "nvidia-tesla-t4");
}

TEST_CASE("ops::build_node_inventory skips objects that are not objects, and never throws", "[nodes]") {
  // fuzz_api_objects' crash-4bd5...: a number where a node or pod belongs made json::value() throw
  // type_error.306.
  std::vector<json> objects = {json(0), json("x"), json::array({1}), json(nullptr), json(true)};
  gpuctl::ops::NodeInventory inv;
  REQUIRE_NOTHROW(inv = build_node_inventory(objects, objects, true, kNow));
  CHECK(inv.nodes.empty());
  CHECK(inv.skipped.size() == 2 * objects.size());
  CHECK_NOTHROW(gpuctl::ops::to_json(inv).dump());
}

TEST_CASE("ops::build_node_inventory applies the init-container and overhead rule", "[nodes]") {
  std::vector<json> nodes = {gpu_node("n", 8, 8)};
  SECTION("an init container larger than the app containers' sum wins") {
    auto p = pod("n", json::array({container({{"nvidia.com/gpu", "1"}}), container({{"nvidia.com/gpu", "1"}})}),
                 "Running", json::array({container({{"nvidia.com/gpu", "3"}})}));
    CHECK(build_node_inventory(nodes, {p}, false, kNow).nodes[0].gpus.used == 3);
  }
  SECTION("the app containers' sum wins over a smaller init container") {
    auto p = pod("n", json::array({container({{"nvidia.com/gpu", "2"}}), container({{"nvidia.com/gpu", "2"}})}),
                 "Running", json::array({container({{"nvidia.com/gpu", "3"}})}));
    CHECK(build_node_inventory(nodes, {p}, false, kNow).nodes[0].gpus.used == 4);
  }
  SECTION("restartable (sidecar) init containers run alongside the app containers") {
    auto p = pod("n", json::array({container({{"nvidia.com/gpu", "2"}})}), "Running",
                 json::array({container({{"nvidia.com/gpu", "1"}}, json::object(), "Always"),
                              container({{"nvidia.com/gpu", "2"}})}));
    // sidecar 1 + app 2 = 3; the regular init container runs beside the sidecar: 2 + 1 = 3
    CHECK(build_node_inventory(nodes, {p}, false, kNow).nodes[0].gpus.used == 3);
  }
  SECTION("pod overhead is added") {
    auto p = pod("n", json::array({container({{"nvidia.com/gpu", "1"}})}), "Running", json::array(),
                 {{"nvidia.com/gpu", "1"}});
    CHECK(build_node_inventory(nodes, {p}, false, kNow).nodes[0].gpus.used == 2);
  }
}

TEST_CASE("ops::is_gpu_node recognises resources and every product label scheme", "[nodes]") {
  CHECK(gpuctl::ops::is_gpu_node(gpu_node("a", 1, 1)));
  json cpu = gpu_node("cpu", 0, 0);
  cpu["status"]["capacity"].erase("nvidia.com/gpu");
  cpu["status"]["allocatable"].erase("nvidia.com/gpu");
  CHECK_FALSE(gpuctl::ops::is_gpu_node(cpu));
  for (auto key : gpuctl::ops::gpu_product_label_keys()) {
    json labelled = cpu;
    labelled["metadata"]["labels"][std::string(key)] = "some-gpu";
    CHECK(gpuctl::ops::is_gpu_node(labelled));
  }
  json mig = cpu;
  mig["status"]["capacity"]["nvidia.com/mig-1g.5gb"] = "7";
  CHECK(gpuctl::ops::is_gpu_node(mig));
}

TEST_CASE("ops::build_node_inventory reads the recorded RKE2 vGPU node list", "[nodes]") {
  json list = json::parse(gpuctl::testing::fixture("k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json"));
  std::vector<json> nodes(list["items"].begin(), list["items"].end());
  auto inv = build_node_inventory(nodes, {}, false, kNow);
  REQUIRE(inv.nodes.size() == 1);
  const auto& n = inv.nodes[0];
  CHECK(n.name == "nori");
  CHECK(n.product == "NVIDIA-A16-4Q");
  CHECK(n.gpus.capacity == 1);
  CHECK(n.gpus.allocatable == 1);
  CHECK(n.driver_version == "550.90.07");
  CHECK(n.cuda_version == "12.4");
  CHECK(n.internal_ip == "0.202.61.70");
  CHECK(n.kubelet_version == "v1.31.6+rke2r1");
  CHECK(n.readiness == "Ready");
  CHECK(n.problem_conditions.empty());  // NetworkUnavailable is False there
}

TEST_CASE("ops::build_node_inventory leaves out the AKS nodes without GPUs unless asked", "[nodes]") {
  json list = json::parse(gpuctl::testing::fixture("k8s-nodes/edgecloud__aks-3-nodes-no-gpu__nodelist.json"));
  std::vector<json> nodes(list["items"].begin(), list["items"].end());
  CHECK(build_node_inventory(nodes, {}, false, kNow).nodes.empty());
  auto all = build_node_inventory(nodes, {}, true, kNow);
  CHECK(all.nodes.size() == 3);
  CHECK(all.products.empty());
  for (const auto& n : all.nodes) {
    CHECK_FALSE(n.gpu_node);
    CHECK(n.gpus.capacity == 0);
  }
}

TEST_CASE("ops::build_node_inventory takes the product and versions from GFD label maps", "[nodes]") {
  for (const char* file :
       {"k8s-nodes/nvidia-docs__h100-mig-mixed-node-labels.json", "k8s-nodes/nvidia-docs__h100-mig-node-labels.json"}) {
    json labels = json::parse(gpuctl::testing::fixture(file));
    json node = gpu_node("h100", 1, 1, labels);
    auto inv = build_node_inventory({node}, {}, false, kNow);
    REQUIRE(inv.nodes.size() == 1);
    CHECK(inv.nodes[0].product == "NVIDIA-H100-80GB-HBM3");
    CHECK(inv.nodes[0].driver_version == "550.54.15");
    CHECK(inv.nodes[0].cuda_version == "12.4");
  }
}

TEST_CASE("ops::build_node_inventory reports MIG resources, taints, conditions and cordon records", "[nodes]") {
  json node = gpu_node(
      "mig", 0, 0, {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"}},
      {{"conditions",
        json::array({{{"type", "Ready"}, {"status", "False"}},
                     {{"type", "MemoryPressure"}, {"status", "True"}, {"reason", "KubeletHasInsufficientMemory"}},
                     {{"type", "DiskPressure"}, {"status", "False"}}})}});
  node["status"]["capacity"]["nvidia.com/mig-1g.5gb"] = "7";
  node["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "7";
  node["spec"]["unschedulable"] = true;
  node["spec"]["taints"] = json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}});
  node["metadata"]["annotations"] = {{"gpuctl.io/cordon-reason", "XID 79"},
                                     {"gpuctl.io/cordoned-by", "alice"},
                                     {"gpuctl.io/cordoned-at", "2026-12-02T10:00:00Z"}};
  auto p = pod("mig", json::array({container({{"nvidia.com/mig-1g.5gb", "2"}})}));
  auto inv = build_node_inventory({node}, {p}, false, kNow);
  REQUIRE(inv.nodes.size() == 1);
  const auto& n = inv.nodes[0];
  CHECK(n.readiness == "NotReady");
  CHECK_FALSE(n.schedulable);
  REQUIRE(n.other_resources.size() == 1);
  CHECK(n.other_resources[0].name == "nvidia.com/mig-1g.5gb");
  CHECK(n.other_resources[0].used == 2);
  CHECK(n.other_resources[0].free() == 5);
  // A MIG-only product: no empty whole-GPU row, one row for the MIG profile.
  REQUIRE(inv.products.size() == 1);
  CHECK(inv.products[0].resource == "nvidia.com/mig-1g.5gb");
  CHECK(inv.products[0].capacity == 7);
  CHECK(inv.products[0].used == 2);
  CHECK(n.gpu_pods == 1);
  REQUIRE(n.taints.size() == 1);
  CHECK(gpuctl::kube::to_string(n.taints[0]) == "nvidia.com/gpu=present:NoSchedule");
  REQUIRE(n.problem_conditions.size() == 1);
  CHECK(n.problem_conditions[0].type == "MemoryPressure");
  REQUIRE(n.cordon);
  CHECK(n.cordon->reason == "XID 79");
  CHECK(n.cordon->by == "alice");

  json out = gpuctl::ops::to_json(inv);
  CHECK(out["apiVersion"] == "gpuctl.io/v1alpha1");
  CHECK(out["kind"] == "GPUNodeList");
  CHECK(out["items"][0]["schedulable"] == false);
  CHECK(out["items"][0]["cordon"]["reason"] == "XID 79");
  CHECK(out["items"][0]["resources"][0]["used"] == 2);
  CHECK(out["items"][0]["driverVersion"].is_null());
  CHECK(out["summary"][0]["resource"] == "nvidia.com/mig-1g.5gb");
}

TEST_CASE("ops::collect_node_inventory uses two paginated lists and one discovery whatever the cluster size",
          "[nodes]") {
  gpuctl::testing::FakeClient fc;
  json nodes_page1 = {{"metadata", {{"continue", "n2"}}}, {"items", json::array({gpu_node("a", 2, 2)})}};
  json nodes_page2 = {{"metadata", {{"continue", ""}}}, {"items", json::array({gpu_node("b", 2, 2)})}};
  json pods_page = {{"metadata", {{"continue", ""}}},
                    {"items", json::array({pod("b", json::array({container({{"nvidia.com/gpu", "1"}})}))})}};
  fc.fake
      ->on("GET", "/api/v1/nodes", gpuctl::testing::json_answer(200, nodes_page1.dump()),
           "labelSelector=pool%3Dgpu&limit=500")
      .on("GET", "/api/v1/nodes", gpuctl::testing::json_answer(200, nodes_page2.dump()), "continue=n2")
      .on("GET", "/api/v1/pods", gpuctl::testing::json_answer(200, pods_page.dump()),
          "fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed")
      // DRA's discovery: not served here (tests/unit/test_nodes_dra.cpp has the clusters that do).
      .on("GET", "/apis/resource.k8s.io/v1", gpuctl::testing::json_answer(404, R"({"kind":"Status","code":404})"));
  auto inv = gpuctl::ops::collect_node_inventory(*fc.client, {"pool=gpu", false, false});
  REQUIRE(inv);
  REQUIRE(inv->nodes.size() == 2);
  CHECK(inv->nodes[1].gpus.used == 1);
  CHECK(fc.fake->requests().size() == 4);
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("ops::sort_nodes sorts by the documented keys and rejects others", "[nodes]") {
  auto inv = build_node_inventory({gpu_node("b", 8, 8), gpu_node("a", 8, 2), gpu_node("c", 4, 4)}, {}, false, kNow);
  REQUIRE(gpuctl::ops::sort_nodes(inv.nodes, "free"));
  CHECK(inv.nodes[0].name == "a");
  CHECK(inv.nodes[1].name == "c");
  CHECK(inv.nodes[2].name == "b");
  auto bad = gpuctl::ops::sort_nodes(inv.nodes, "gpus");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == gpuctl::Errc::invalid_argument);
  CHECK(bad.error().message.find("valid: name, status") != std::string::npos);
}
