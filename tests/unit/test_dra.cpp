#include <catch2/catch.hpp>

#include "fakes/dra_objects.hpp"
#include "gpuctl/ops/dra/dra.hpp"

using namespace gpuctl::testing;
using gpuctl::ops::build_dra_inventory;
using gpuctl::ops::DraCount;
using gpuctl::ops::DraDeviceType;
using nlohmann::json;

namespace {

json four_gpus(json taints_of_1 = json::array()) {
  return json::array({dra::gpu_device("gpu-0", "GPU-0"),
                      dra::gpu_device("gpu-1", "GPU-1", "NVIDIA A100-SXM4-80GB", taints_of_1),
                      dra::gpu_device("gpu-2", "GPU-2"), dra::gpu_device("gpu-3", "GPU-3")});
}

const DraCount& whole_gpus(const std::map<std::string, std::vector<DraCount>>& counts, const std::string& node) {
  REQUIRE(counts.contains(node));
  REQUIRE(counts.at(node).front().type == DraDeviceType::gpu);
  return counts.at(node).front();
}

}  // namespace

TEST_CASE("dra: devices of a complete pool are read with the driver's attributes", "[dra]") {
  auto inv = build_dra_inventory({dra::slice("n1", four_gpus())}, {}, {}, {});
  REQUIRE(inv.devices.size() == 4);
  const auto& d = inv.devices[1];
  CHECK(d.node == "n1");
  CHECK(d.pool == "n1");
  CHECK(d.driver == "gpu.nvidia.com");
  CHECK(d.name == "gpu-1");
  CHECK(d.type == DraDeviceType::gpu);
  CHECK(d.product == "NVIDIA A100-SXM4-80GB");
  CHECK(d.uuid == "GPU-1");
  CHECK(d.memory_bytes == 80LL * 1024 * 1024 * 1024);
  // Unqualified attributes belong to the driver's domain; qualified ones to theirs.
  REQUIRE(d.attribute("gpu.nvidia.com", "productName") != nullptr);
  CHECK(*d.attribute("gpu.nvidia.com", "productName") == "NVIDIA A100-SXM4-80GB");
  REQUIRE(d.attribute("resource.kubernetes.io", "pciBusID") != nullptr);
  CHECK(d.attribute("other.example.com", "productName") == nullptr);
  CHECK(inv.pool_problems.empty());
}

TEST_CASE("dra: only complete pools of the newest generation count", "[dra]") {
  SECTION("one slice of two published: the pool is left out and named") {
    auto inv = build_dra_inventory({dra::slice("n1", four_gpus(), 2, 2)}, {}, {}, {});
    CHECK(inv.devices.empty());
    REQUIRE(inv.pool_problems.size() == 1);
    CHECK(inv.pool_problems[0].node == "n1");
    CHECK(inv.pool_problems[0].problem == "incomplete: 1 of 2 slices of generation 2 published");
  }
  SECTION("an older generation's slice is ignored, the newest complete one counts") {
    auto old_slice = dra::slice("n1", json::array({dra::gpu_device("gpu-9", "GPU-9")}), 1, 1, "gpu.nvidia.com", "old");
    auto inv = build_dra_inventory({old_slice, dra::slice("n1", four_gpus(), 2, 1)}, {}, {}, {});
    CHECK(inv.devices.size() == 4);
    CHECK(inv.pool_problems.empty());
  }
  SECTION("slices that disagree on the pool's size, or a device published twice") {
    auto a = dra::slice("n1", json::array({dra::gpu_device("gpu-0", "GPU-0")}), 1, 2, "gpu.nvidia.com", "a");
    auto b = dra::slice("n1", json::array({dra::gpu_device("gpu-1", "GPU-1")}), 1, 3, "gpu.nvidia.com", "b");
    auto inv = build_dra_inventory({a, b}, {}, {}, {});
    CHECK(inv.devices.empty());
    REQUIRE(inv.pool_problems.size() == 1);
    CHECK(inv.pool_problems[0].problem.find("disagree on resourceSliceCount") != std::string::npos);
    auto twice = dra::slice("n2", json::array({dra::gpu_device("gpu-0", "GPU-0"), dra::gpu_device("gpu-0", "GPU-X")}));
    auto inv2 = build_dra_inventory({twice}, {}, {}, {});
    REQUIRE(inv2.pool_problems.size() == 1);
    CHECK(inv2.pool_problems[0].problem == "device gpu-0 is published twice");
  }
}

TEST_CASE("dra: capacity, used, unhealthy and free per node, tainted and allocated devices counted once", "[dra]") {
  auto xid = json::array({dra::device_taint("gpu.nvidia.com/xid", "79", "NoSchedule")});
  auto slices = std::vector<json>{dra::slice("n1", four_gpus(xid))};
  // gpu-0 held by a user claim, gpu-1 (tainted) still held by an extended-resource claim.
  auto claims = std::vector<json>{dra::claim("team-a", "train-gpus", "n1", {"gpu-0"}, "train"),
                                  dra::claim("team-a", "pod-x-gpu", "n1", {"gpu-1"}, "pod-x", true)};
  auto inv = build_dra_inventory(slices, claims, {}, {});
  auto counts = gpuctl::ops::dra_counts_by_node(inv);
  const auto& c = whole_gpus(counts, "n1");
  CHECK(c.capacity == 4);
  CHECK(c.unhealthy == 1);
  CHECK(c.used == 2);
  CHECK(c.used_unhealthy == 1);
  CHECK(c.free() == 2);  // gpu-2 and gpu-3
  const auto* holder = inv.holder({"gpu.nvidia.com", "n1", "gpu-1"});
  REQUIRE(holder != nullptr);
  CHECK(holder->extended_resource);
  CHECK(holder->owner_pod == "pod-x");
  REQUIRE(holder->reserved_for.size() == 1);
  CHECK(holder->reserved_for[0].name == "pod-x");
  CHECK(inv.holder({"gpu.nvidia.com", "n1", "gpu-3"}) == nullptr);
}

TEST_CASE("dra: a None taint is a warning, not unhealthy", "[dra]") {
  auto none = json::array({dra::device_taint("gpu.nvidia.com/unmonitored", "", "None")});
  auto inv = build_dra_inventory({dra::slice("n1", four_gpus(none))}, {}, {}, {});
  auto counts = gpuctl::ops::dra_counts_by_node(inv);
  CHECK(whole_gpus(counts, "n1").unhealthy == 0);
  CHECK(whole_gpus(counts, "n1").free() == 4);
  CHECK(inv.devices[1].taints.size() == 1);
}

TEST_CASE("dra: a DeviceTaintRule taints exactly the device it selects", "[dra]") {
  auto rule = dra::taint_rule("gpuctl-n1-gpu-2", "n1", "gpu-2", "example.com/maintenance", "NoExecute");
  auto empty_rule = rule;
  empty_rule["metadata"]["name"] = "selects-nothing";
  empty_rule["spec"]["deviceSelector"] = json::object();
  auto inv =
      build_dra_inventory({dra::slice("n1", four_gpus()), dra::slice("n2", four_gpus())}, {}, {}, {rule, empty_rule});
  auto counts = gpuctl::ops::dra_counts_by_node(inv);
  CHECK(whole_gpus(counts, "n1").unhealthy == 1);
  CHECK(whole_gpus(counts, "n2").unhealthy == 0);
  REQUIRE(inv.taint_rules.size() == 2);
  CHECK(inv.taint_rules[0].devices_matched == 1);
  CHECK(inv.taint_rules[1].devices_matched == 0);
  const auto& tainted = inv.devices[2];
  REQUIRE(tainted.name == "gpu-2");
  REQUIRE(tainted.taints.size() == 1);
  CHECK(tainted.taints[0].rule == "gpuctl-n1-gpu-2");
  CHECK(tainted.taints[0].time_added == "2026-12-01T11:00:00Z");
}

TEST_CASE("dra: a partitioned GPU and its MIG devices are never both free", "[dra]") {
  auto devices =
      json::array({dra::gpu_device("gpu-0", "GPU-0"), dra::mig_device("gpu-0-mig-1g.10gb-0", "MIG-a", "GPU-0"),
                   dra::mig_device("gpu-0-mig-1g.10gb-1", "MIG-b", "GPU-0"), dra::gpu_device("gpu-1", "GPU-1"),
                   dra::mig_device("gpu-1-mig-1g.10gb-0", "MIG-c", "GPU-1")});
  // One partition of gpu-0 allocated; gpu-1 allocated whole.
  auto claims = std::vector<json>{dra::claim("ns", "a", "n1", {"gpu-0-mig-1g.10gb-0"}, "p1"),
                                  dra::claim("ns", "b", "n1", {"gpu-1"}, "p2")};
  auto inv = build_dra_inventory({dra::slice("n1", devices)}, claims, {}, {});
  auto counts = gpuctl::ops::dra_counts_by_node(inv);
  REQUIRE(counts["n1"].size() == 2);
  const auto& gpus = counts["n1"][0];
  const auto& mig = counts["n1"][1];
  CHECK(gpus.capacity == 2);
  CHECK(gpus.used == 2);  // gpu-0 through its partition, gpu-1 itself
  CHECK(gpus.free() == 0);
  CHECK(mig.type == DraDeviceType::mig);
  CHECK(mig.profile == "1g.10gb");
  CHECK(mig.capacity == 3);
  CHECK(mig.used == 2);  // MIG-a itself, MIG-c through its whole GPU
  CHECK(mig.free() == 1);
}

TEST_CASE("dra: only NVIDIA's GPUs and MIG devices are counted, vfio and other drivers are not", "[dra]") {
  json vfio = dra::gpu_device("gpu-vfio-0", "GPU-0");
  vfio["attributes"]["type"] = {{"string", "vfio"}};
  auto other = dra::slice("n1", json::array({dra::gpu_device("dev-0", "X")}), 1, 1, "gpu.example.com");
  auto inv = build_dra_inventory({dra::slice("n1", json::array({vfio})), other}, {}, {}, {});
  CHECK(inv.devices.size() == 2);
  CHECK(gpuctl::ops::dra_counts_by_node(inv).empty());
}

TEST_CASE("dra: hostile objects read as absent fields, never a crash", "[dra]") {
  std::vector<json> junk = {json(nullptr),
                            json(3),
                            json::array(),
                            json::object(),
                            json({{"spec", {{"devices", "x"}, {"pool", 7}}}}),
                            json({{"spec", {{"devices", json::array({1, json::object()})}}}})};
  gpuctl::ops::DraInventory inv;
  REQUIRE_NOTHROW(inv = build_dra_inventory(junk, junk, junk, junk));
  REQUIRE_NOTHROW(gpuctl::ops::dra_counts_by_node(inv));
}

TEST_CASE("dra: a claim's requests, class and firstAvailable", "[dra]") {
  auto c = gpuctl::ops::read_claim(dra::claim("ns", "c", "n1", json::array(), "", false, 2, "mig.nvidia.com"));
  CHECK_FALSE(c.allocated);
  REQUIRE(c.requests.size() == 1);
  CHECK(c.requests[0].device_class == "mig.nvidia.com");
  CHECK(c.requests[0].count == 2);
  json prioritized = dra::claim("ns", "p", "n1", json::array());
  prioritized["spec"]["devices"]["requests"][0] = {
      {"name", "gpu"},
      {"firstAvailable", json::array({{{"name", "big"}, {"deviceClassName", "gpu.nvidia.com"}, {"count", 4}},
                                      {{"name", "small"}, {"deviceClassName", "mig.nvidia.com"}}})}};
  auto p = gpuctl::ops::read_claim(prioritized);
  REQUIRE(p.requests.size() == 1);
  CHECK(p.requests[0].device_class == "gpu.nvidia.com");
  CHECK(p.requests[0].count == 4);
  auto cls = gpuctl::ops::read_device_class(dra::device_class("gpu.nvidia.com", "gpu", "nvidia.com/gpu"));
  CHECK(cls.extended_resource_name == "nvidia.com/gpu");
  REQUIRE(cls.selectors.size() == 1);
  CHECK(cls.selectors[0].find("device.driver == 'gpu.nvidia.com'") == 0);
}
