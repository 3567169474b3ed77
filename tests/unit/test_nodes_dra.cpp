// `gpuctl nodes` on a mixed fleet: device-plugin nodes and nodes whose GPUs NVIDIA's DRA driver
// publishes, never counting the same GPUs twice.
#include <catch2/catch.hpp>

#include "fakes/dra_objects.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/time.hpp"

using namespace gpuctl::testing;
using gpuctl::ops::build_dra_inventory;
using gpuctl::ops::build_node_inventory;
using nlohmann::json;

namespace {

const auto kNow = *gpuctl::util::parse_rfc3339("2026-12-02T12:00:00Z");

json node(const std::string& name, json capacity, json labels = json::object()) {
  return {{"metadata", {{"name", name}, {"labels", labels}, {"creationTimestamp", "2026-12-01T12:00:00Z"}}},
          {"spec", json::object()},
          {"status",
           {{"capacity", capacity},
            {"allocatable", capacity},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

json gpu_pod(const std::string& ns, const std::string& name, const std::string& node_name, const std::string& gpus) {
  return {{"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"nodeName", node_name},
            {"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}})}}},
          {"status", {{"phase", "Running"}}}};
}

json gpus(int n, const std::string& prefix, const std::string& product = "NVIDIA H100 80GB HBM3") {
  json out = json::array();
  for (int i = 0; i < n; ++i) {
    out.push_back(dra::gpu_device("gpu-" + std::to_string(i), prefix + std::to_string(i), product));
  }
  return out;
}

const gpuctl::ops::NodeGpuInfo& by_name(const gpuctl::ops::NodeInventory& inv, const std::string& name) {
  for (const auto& n : inv.nodes) {
    if (n.name == name) return n;
  }
  FAIL("no node " << name);
  return inv.nodes.front();
}

}  // namespace

TEST_CASE("nodes: a DRA node counts its devices and claims, a plugin node its extended resources", "[nodes][dra]") {
  auto nodes = std::vector<json>{
      node("plugin-0", {{"cpu", "96"}, {"nvidia.com/gpu", "8"}}, {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}),
      // A DRA node: no nvidia.com/gpu in its capacity, no product label.
      node("dra-0", {{"cpu", "96"}}),
  };
  // On the DRA node, one pod got 2 GPUs through a plain nvidia.com/gpu request (a claim the
  // scheduler made) and one through its own claim: the pod's request must not count again.
  auto pods = std::vector<json>{gpu_pod("a", "p-plugin", "plugin-0", "3"), gpu_pod("a", "p-ext", "dra-0", "2")};
  auto claims = std::vector<json>{dra::claim("a", "p-ext-gpu-x", "dra-0", {"gpu-0", "gpu-1"}, "p-ext", true, 2),
                                  dra::claim("b", "train-gpus", "dra-0", {"gpu-2"}, "train")};
  auto xid = json::array({dra::device_taint("gpu.nvidia.com/xid", "79", "NoSchedule")});
  json devices = gpus(4, "GPU-D");
  devices[3]["taints"] = xid;
  auto dra_inv = build_dra_inventory({dra::slice("dra-0", devices)}, claims, {}, {});
  auto inv = build_node_inventory(nodes, pods, false, kNow, &dra_inv);
  REQUIRE(inv.nodes.size() == 2);

  const auto& d = by_name(inv, "dra-0");
  CHECK(d.gpu_node);
  CHECK(d.source == "dra");
  CHECK(d.product == "NVIDIA H100 80GB HBM3");  // from the devices, the node has no label
  CHECK(d.gpus.capacity == 4);
  CHECK(d.gpus.allocatable == 3);
  CHECK(d.gpus.used == 3);  // the claims, not the pod's request on top
  CHECK(d.gpus.free() == 0);
  CHECK(d.unhealthy() == 1);
  CHECK(d.gpu_pods == 2);  // p-ext once, though both its request and its claim name it
  REQUIRE(d.device_taints.size() == 1);
  CHECK(d.device_taints[0].device == "gpu-3");
  CHECK(d.device_taints[0].taint.value == "79");
  CHECK_FALSE(d.device_plugin_gpus);

  const auto& p = by_name(inv, "plugin-0");
  CHECK(p.source == "devicePlugin");
  CHECK(p.gpus.used == 3);
  CHECK(p.gpus.free() == 5);

  // Both products differ here; each summary row names its source.
  REQUIRE(inv.products.size() == 2);
  CHECK(inv.products[0].product == "NVIDIA H100 80GB HBM3");
  CHECK(inv.products[0].source == "dra");
  CHECK(inv.products[0].capacity == 4);
  CHECK(inv.products[0].free == 0);
  CHECK(inv.products[1].source == "devicePlugin");
  CHECK(inv.products[1].free == 5);

  json doc = gpuctl::ops::to_json(inv);
  CHECK(doc["items"][0]["source"] == "dra");
  CHECK(doc["items"][0]["deviceTaints"][0]["key"] == "gpu.nvidia.com/xid");
  CHECK(doc["summary"][0]["source"] == "dra");
}

TEST_CASE("nodes: one product on plugin and DRA nodes is one summary row naming both", "[nodes][dra]") {
  auto label = json{{"nvidia.com/gpu.product", "NVIDIA H100 80GB HBM3"}};
  auto nodes = std::vector<json>{node("plugin-0", {{"nvidia.com/gpu", "8"}}, label), node("dra-0", {}, label)};
  auto dra_inv = build_dra_inventory({dra::slice("dra-0", gpus(8, "GPU-D"))},
                                     {dra::claim("a", "c", "dra-0", {"gpu-0"}, "p")}, {}, {});
  auto inv = build_node_inventory(nodes, {}, false, kNow, &dra_inv);
  REQUIRE(inv.products.size() == 1);
  CHECK(inv.products[0].source == "devicePlugin,dra");
  CHECK(inv.products[0].nodes == 2);
  CHECK(inv.products[0].capacity == 16);
  CHECK(inv.products[0].used == 1);
  CHECK(inv.products[0].free == 15);
}

TEST_CASE("nodes: a node advertising its GPUs through both mechanisms counts DRA's and keeps the plugin's apart",
          "[nodes][dra]") {
  auto nodes = std::vector<json>{node("both-0", {{"nvidia.com/gpu", "4"}})};
  auto dra_inv = build_dra_inventory({dra::slice("both-0", gpus(4, "GPU-B"))}, {}, {}, {});
  auto inv = build_node_inventory(nodes, {gpu_pod("a", "p", "both-0", "1")}, false, kNow, &dra_inv);
  const auto& n = by_name(inv, "both-0");
  CHECK(n.source == "dra");
  CHECK(n.gpus.capacity == 4);
  CHECK(n.gpus.used == 0);
  REQUIRE(n.device_plugin_gpus);
  CHECK(n.device_plugin_gpus->capacity == 4);
  CHECK(n.device_plugin_gpus->used == 1);
  CHECK(inv.products[0].capacity == 4);  // not 8
}

TEST_CASE("nodes: a node whose GPUs are all MIG-partitioned shows its MIG devices in the default view",
          "[nodes][dra]") {
  SECTION("through the device plugin (mixed strategy, every GPU partitioned)") {
    auto nodes = std::vector<json>{node("mig-0", {{"nvidia.com/gpu", "0"}, {"nvidia.com/mig-1g.10gb", "14"}})};
    auto inv = build_node_inventory(nodes, {}, false, kNow);
    auto offered = inv.nodes[0].offered();
    CHECK(offered.name == "nvidia.com/mig-1g.10gb");
    CHECK(offered.capacity == 14);
    CHECK(offered.free() == 14);
  }
  SECTION("through DRA, with two profiles") {
    json devices = json::array({dra::mig_device("gpu-0-mig-1g.10gb-0", "MIG-0", "GPU-0"),
                                dra::mig_device("gpu-0-mig-1g.10gb-1", "MIG-1", "GPU-0"),
                                dra::mig_device("gpu-1-mig-3g.40gb-0", "MIG-2", "GPU-1", "3g.40gb")});
    auto dra_inv = build_dra_inventory({dra::slice("mig-0", devices)},
                                       {dra::claim("a", "c", "mig-0", {"gpu-0-mig-1g.10gb-1"}, "p")}, {}, {});
    auto inv = build_node_inventory({node("mig-0", {})}, {}, false, kNow, &dra_inv);
    const auto& n = inv.nodes[0];
    CHECK(n.gpus.capacity == 0);
    REQUIRE(n.other_resources.size() == 2);
    CHECK(n.other_resources[0].name == "nvidia.com/mig-1g.10gb");
    CHECK(n.other_resources[0].source == "dra");
    auto offered = n.offered();
    CHECK(offered.name == "nvidia.com/mig-1g.10gb,nvidia.com/mig-3g.40gb");
    CHECK(offered.capacity == 3);
    CHECK(offered.used == 1);
    CHECK(offered.free() == 2);
    // The summary keeps one row per profile, and no empty whole-GPU row.
    REQUIRE(inv.products.size() == 2);
    CHECK(inv.products[0].resource == "nvidia.com/mig-1g.10gb");
  }
}

TEST_CASE("nodes: collect_node_inventory reads the DRA lists once each where resource.k8s.io/v1 is served",
          "[nodes][dra]") {
  FakeClient fc;
  auto list = [](json items) { return json_answer(200, json{{"metadata", json::object()}, {"items", items}}.dump()); };
  json discovery = {{"resources", json::array({{{"name", "resourceslices"}}, {{"name", "resourceclaims"}}})}};
  json group = {{"versions", json::array({{{"groupVersion", "resource.k8s.io/v1"}, {"version", "v1"}},
                                          {{"groupVersion", "resource.k8s.io/v1beta2"}, {"version", "v1beta2"}}})}};
  json beta = {{"resources", json::array({{{"name", "devicetaintrules"}}})}};
  fc.fake->on("GET", "/api/v1/nodes", list(json::array({node("dra-0", {})})))
      .on("GET", "/api/v1/pods", list(json::array()))
      .on("GET", "/apis/resource.k8s.io/v1", json_answer(200, discovery.dump()))
      .on("GET", "/apis/resource.k8s.io", json_answer(200, group.dump()))
      .on("GET", "/apis/resource.k8s.io/v1beta2", json_answer(200, beta.dump()))
      .on("GET", "/apis/resource.k8s.io/v1/resourceslices", list(json::array({dra::slice("dra-0", gpus(2, "G"))})))
      .on("GET", "/apis/resource.k8s.io/v1/resourceclaims", json_answer(403, R"({"kind":"Status","code":403})"))
      .on("GET", "/apis/resource.k8s.io/v1/deviceclasses", list(json::array()))
      .on("GET", "/apis/resource.k8s.io/v1beta2/devicetaintrules",
          list(json::array({dra::taint_rule("r", "dra-0", "gpu-1", "k", "NoSchedule")})));
  auto inv = gpuctl::ops::collect_node_inventory(*fc.client, {});
  INFO((inv ? std::string() : inv.error().message));
  REQUIRE(inv);
  CHECK(fc.fake->unexpected().empty());
  REQUIRE(inv->nodes.size() == 1);
  CHECK(inv->nodes[0].gpus.capacity == 2);
  CHECK(inv->nodes[0].gpus.allocatable == 1);  // the rule's taint
  REQUIRE(inv->warnings.size() == 1);
  CHECK(inv->warnings[0] ==
        "DRA objects not read (resourceclaims forbidden): GPUs published through DRA are left out of these counts");
  CHECK(fc.fake->requests().size() == 9);  // 2 lists, 3 discovery documents, 4 DRA lists
}

TEST_CASE("nodes: a cluster without resource.k8s.io/v1 is read as before", "[nodes][dra]") {
  FakeClient fc;
  auto list = [](json items) { return json_answer(200, json{{"metadata", json::object()}, {"items", items}}.dump()); };
  fc.fake->on("GET", "/api/v1/nodes", list(json::array({node("p", {{"nvidia.com/gpu", "2"}})})))
      .on("GET", "/api/v1/pods", list(json::array()))
      .on("GET", "/apis/resource.k8s.io/v1", json_answer(404, R"({"kind":"Status","code":404})"));
  auto inv = gpuctl::ops::collect_node_inventory(*fc.client, {});
  REQUIRE(inv);
  CHECK(fc.fake->unexpected().empty());
  CHECK(fc.fake->requests().size() == 3);
  CHECK(inv->nodes[0].gpus.capacity == 2);
  CHECK(inv->warnings.empty());
}
