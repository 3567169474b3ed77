// diagnose's DRA checks of devices (issue 19) over inventories as collect_dra builds them:
// tainted devices by NVIDIA's action, incomplete pools, GPUs offered twice; a cluster without DRA
// passes every DRA check. The claims' and classes' checks: test_diagnose_dra_claims.cpp.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_dra_builders.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/dra/dra.hpp"

using namespace gpuctl::testing::dx;
using d::Finding;

TEST_CASE("diagnose dra: a device the driver tainted for Xid 79 is critical, with the pods that still hold it",
          "[diagnose][dra]") {
  DraInventory inv;
  inv.devices = {gpu("gpu-a", 0, {driver_taint("gpu.nvidia.com/xid", "79", "NoSchedule")}), gpu("gpu-a", 1)};
  inv.claims = {holding(claim("ml", "train-gpu", "gpu.nvidia.com", 1), inv.devices[0], "train-0")};
  auto found = d::check_dra_device_tainted(with_dra(inv));
  REQUIRE(found.size() == 1);
  const Finding& f = found[0];
  CHECK(f.check == "dra-device-tainted");
  CHECK(f.severity == Severity::critical);
  CHECK(f.node == "gpu-a");
  CHECK(f.object.kind == "Node");
  CHECK(f.summary ==
        "gpu-a/gpu-0 (GPU-2fa81118-5a5f-aa66-7660-471000000000, NVIDIA A100-PCIE-40GB) is tainted "
        "gpu.nvidia.com/xid=79:NoSchedule by the driver since 2026-12-06T11:40:00Z: Xid 79 (GPU has fallen off the bus "
        "(PCIe)): NVIDIA's action RESTART_BM; still held by claim ml/train-gpu (pod(s) ml/train-0): NoSchedule does "
        "not evict them");
  REQUIRE(f.evidence.size() == 2);
  CHECK(f.evidence[0].source == "ResourceSlice of pool gpu-a (gpu.nvidia.com) device gpu-0 taint");
  CHECK(f.evidence[0].text == "gpu.nvidia.com/xid=79:NoSchedule");
  CHECK(f.evidence[0].time == "2026-12-06T11:40:00Z");
  CHECK(f.evidence[1].text == "allocated gpu.nvidia.com/gpu-a/gpu-0, reserved for pod(s) ml/train-0");
  REQUIRE(f.remedy.size() == 5);
  CHECK(f.remedy[0] ==
        "gpuctl taint --device gpu-a/gpu-0 gpu.nvidia.com/xid=79:NoExecute   (evicts the pods holding this GPU, only "
        "those)");
  CHECK(f.remedy[1] == "gpuctl drain gpu-a --ignore-daemonsets --reason 'Xid 79 on gpu-0'");
  CHECK(f.remedy[2] == "ssh gpu-a sudo reboot");
  CHECK(f.remedy[3] == "gpuctl uncordon gpu-a --verify");
}

TEST_CASE("diagnose dra: each taint's severity follows the taint and NVIDIA's catalogue", "[diagnose][dra]") {
  struct Case {
    DraDeviceTaint taint;
    Severity severity;
    std::string says;
  };
  DraDeviceTaint rule{"example.com/maintenance", "", "NoExecute", "2026-12-06T10:00:00Z", "maint-gpu-a"};
  std::vector<Case> cases = {
      {driver_taint("gpu.nvidia.com/gpu-lost", "", "NoSchedule"), Severity::critical, "the GPU is lost"},
      {driver_taint("gpu.nvidia.com/xid", "48", "NoSchedule"), Severity::critical, "NVIDIA's action RESET_GPU"},
      {driver_taint("gpu.nvidia.com/xid", "92", "NoSchedule"), Severity::error, "NVIDIA's action IGNORE"},
      {driver_taint("gpu.nvidia.com/xid", "99999", "NoSchedule"), Severity::error, "catalogue does not hold"},
      {driver_taint("gpu.nvidia.com/xid", "13", "None"), Severity::info, "an application fault the driver only notes"},
      {driver_taint("gpu.nvidia.com/unmonitored", "", "None"), Severity::info, "cannot watch this GPU's health"},
      {rule, Severity::error, "by DeviceTaintRule maint-gpu-a"},
  };
  for (const auto& c : cases) {
    INFO(c.taint.key << "=" << c.taint.value << ":" << c.taint.effect);
    DraInventory inv;
    inv.devices = {gpu("gpu-a", 3, {c.taint})};
    auto found = d::check_dra_device_tainted(with_dra(inv));
    REQUIRE(found.size() == 1);
    CHECK(found[0].severity == c.severity);
    CHECK(contains(found[0].summary, c.says));
    CHECK_FALSE(contains(found[0].summary, "held by"));  // nobody holds it
    for (const auto& r : found[0].remedy) CHECK_FALSE(contains(r, ":NoExecute   (evicts"));
  }
  // A rule's taint is removed through the rule, named in the evidence and the remedy.
  DraInventory inv;
  inv.devices = {gpu("gpu-a", 3, {rule})};
  auto found = d::check_dra_device_tainted(with_dra(inv));
  REQUIRE(found.size() == 1);
  CHECK(found[0].evidence[0].source == "DeviceTaintRule maint-gpu-a");
  CHECK(found[0].evidence[0].text == "example.com/maintenance:NoExecute");
  CHECK(found[0].remedy.back() ==
        "gpuctl taint --device gpu-a/gpu-3 example.com/maintenance:NoExecute-   (removes DeviceTaintRule maint-gpu-a "
        "once the GPU is fixed)");
}

TEST_CASE("diagnose dra: dra-device-tainted is silent on healthy devices, other drivers and nodes -l left out",
          "[diagnose][dra]") {
  DraInventory inv;
  DraDevice other = gpu("gpu-a", 1, {driver_taint("example.com/broken", "", "NoSchedule")});
  other.driver = "fpga.example.com";
  inv.devices = {gpu("gpu-a", 0), other, gpu("gpu-b", 0, {driver_taint("gpu.nvidia.com/gpu-lost", "", "NoSchedule")})};
  CHECK(d::check_dra_device_tainted(with_dra(inv)).size() == 1);  // gpu-b's
  // -l selected only gpu-a: gpu-b is not in this diagnosis.
  CHECK(d::check_dra_device_tainted(with_dra(inv, {{Source::nodes, {h100_node("gpu-a", 0, 0)}}})).empty());
  // Who holds a device is unknown when the claims could not be read: said, never "nobody".
  inv.warnings = {
      "DRA objects not read (resourceclaims forbidden): GPUs published through DRA are left out of these counts"};
  auto blind = d::check_dra_device_tainted(with_dra(inv));
  REQUIRE(blind.size() == 1);
  CHECK(contains(blind[0].summary, "who holds it is not known (resourceclaims could not be read)"));
}

TEST_CASE("diagnose dra: taint rules gpuctl cannot read or evaluate are said, not taken as none", "[diagnose][dra]") {
  DraInventory inv;
  inv.devices = {gpu("gpu-a", 0)};
  gpuctl::ops::DraTaintRule rule;
  rule.name = "quarantine-h100s";
  rule.selectors = {"device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"};
  rule.taint = {"example.com/quarantine", "", "NoExecute", "", "quarantine-h100s"};
  rule.unresolved = "CEL evaluation is not built yet";
  inv.taint_rules = {rule};
  inv.warnings = {
      "DRA objects not read (devicetaintrules forbidden): GPUs published through DRA are left out of these counts"};
  auto found = d::check_dra_device_tainted(with_dra(inv));
  REQUIRE(found.size() == 2);
  CHECK(found[0].severity == Severity::info);
  CHECK(found[0].summary == "DeviceTaintRules could not be read, so the taints they add to devices are not known");
  CHECK(found[0].evidence[0].text == inv.warnings[0]);
  CHECK(found[1].severity == Severity::info);
  CHECK(found[1].object.kind == "DeviceTaintRule");
  CHECK(found[1].object.name == "quarantine-h100s");
  CHECK(found[1].summary ==
        "DeviceTaintRule quarantine-h100s (example.com/quarantine:NoExecute) selects devices by CEL gpuctl could not "
        "evaluate (CEL evaluation is not built yet): 0 device(s) known to be tainted by it, others may be");
  CHECK(found[1].evidence[0].text == rule.selectors[0]);
  // A rule resolved for every device says nothing beyond the taints it added.
  inv.taint_rules[0].unresolved.clear();
  inv.warnings.clear();
  CHECK(d::check_dra_device_tainted(with_dra(inv)).empty());
}

TEST_CASE("diagnose dra: a cluster without DRA, or a snapshot without it, passes every DRA check", "[diagnose][dra]") {
  DraInventory absent;  // served == false: what collect_dra gives when resource.k8s.io/v1 is not served
  absent.devices = {gpu("gpu-a", 0, {driver_taint("gpu.nvidia.com/gpu-lost", "", "NoSchedule")})};
  d::Snapshot s = snapshot({{Source::nodes, {h100_node("gpu-a", 8, 8)}}, {Source::pods, {}}});
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) s.dra = absent;
    for (const auto& c : d::checks()) {
      if (!contains(std::string(c.id), "dra-")) continue;
      INFO(c.id);
      CHECK(c.run(s).empty());
    }
  }
}

TEST_CASE("diagnose dra: an incomplete pool is an error on its node, with the slices to read", "[diagnose][dra]") {
  DraInventory inv;
  inv.pool_problems = {{"gpu.nvidia.com", "gpu-b", "gpu-b", "generation 2 has 1 of 2 slices"}};
  auto found = d::check_dra_pool_incomplete(with_dra(inv));
  REQUIRE(found.size() == 1);
  CHECK(found[0].severity == Severity::error);
  CHECK(found[0].node == "gpu-b");
  CHECK(found[0].summary ==
        "pool gpu-b of gpu.nvidia.com on gpu-b is left out of the counts: generation 2 has 1 of 2 slices; its devices "
        "cannot be allocated through DRA until the driver republishes the pool");
  CHECK(found[0].evidence[0].text == "generation 2 has 1 of 2 slices");
  CHECK(found[0].remedy[0] ==
        "kubectl get resourceslices --field-selector spec.driver=gpu.nvidia.com,spec.nodeName=gpu-b -o yaml");
  CHECK(d::check_dra_pool_incomplete(with_dra(DraInventory{})).empty());
}

TEST_CASE("diagnose dra: a node whose GPUs the device plugin and the DRA driver both offer is a warning",
          "[diagnose][dra]") {
  DraInventory inv;
  inv.devices = {gpu("gpu-a", 0), gpu("gpu-a", 1), gpu("gpu-b", 0)};
  json both = h100_node("gpu-a", 2, 2);
  json dra_only = h100_node("gpu-b", 0, 0);
  dra_only["status"]["capacity"] = json::object();
  json plugin_only = h100_node("gpu-c", 8, 8);
  auto found = d::check_dra_double_advertised(with_dra(inv, {{Source::nodes, {both, dra_only, plugin_only}}}));
  REQUIRE(found.size() == 1);
  CHECK(found[0].severity == Severity::warning);
  CHECK(found[0].node == "gpu-a");
  CHECK(found[0].summary ==
        "gpu-a advertises nvidia.com/gpu=2 through the device plugin and publishes 2 NVIDIA DRA device(s) (gpu-0, "
        "gpu-1): the same GPUs are offered twice, so a device-plugin pod and a DRA claim can be given one GPU");
  CHECK(found[0].evidence[0].text == "nvidia.com/gpu=2");
  CHECK(found[0].remedy[0] == "gpuctl nodes gpu-a");
}

TEST_CASE("diagnose dra: the checks are in the table with their needs", "[diagnose][dra]") {
  for (const char* id : {"dra-device-tainted", "dra-pool-incomplete", "dra-claim-unallocated",
                         "dra-class-matches-nothing", "dra-double-advertised"}) {
    INFO(id);
    const d::Check* c = d::find_check(id);
    REQUIRE(c != nullptr);
    CHECK(std::find(c->needs.begin(), c->needs.end(), Source::dra) != c->needs.end());
    CHECK_FALSE(std::string(c->title).empty());
  }
  CHECK(d::find_check("dra-double-advertised")->needs == std::vector<Source>{Source::nodes, Source::dra});
  CHECK(d::find_check("dra-claim-unallocated")->uses_if_readable == std::vector<Source>{Source::events});
  CHECK(d::to_string(Source::dra) == "DRA objects (resource.k8s.io)");
}

TEST_CASE("diagnose dra: a node whose GPUs are DRA devices only expects no device plugin", "[diagnose][dra]") {
  json dra_node = h100_node("dra-0", 0, 0);  // GFD's product label stays; no nvidia.com/* resource
  dra_node["status"]["capacity"] = json::object();
  dra_node["status"]["allocatable"] = json::object();
  DraInventory inv;
  inv.devices = {gpu("dra-0", 0), gpu("dra-0", 1)};
  json plugin = {{"metadata", {{"name", "nvidia-device-plugin-daemonset"}, {"namespace", "gpu-operator"}}}};
  std::map<Source, std::vector<json>> lists = {
      {Source::nodes, {dra_node}}, {Source::daemon_sets, {plugin}}, {Source::plugin_pods, {}}};
  // Without DRA read, both say the plugin is missing there; with it, neither does.
  CHECK(d::check_device_plugin_missing(snapshot(lists)).size() == 1);
  CHECK(d::check_device_plugin_missing(with_dra(inv, lists)).empty());
  auto unhealthy = d::check_device_plugin_unhealthy(snapshot(lists));
  REQUIRE(unhealthy.size() == 1);
  CHECK(contains(unhealthy[0].summary, "dra-0 has no device plugin pod"));
  CHECK(d::check_device_plugin_unhealthy(with_dra(inv, lists)).empty());
  lists[Source::daemon_sets] = {};  // a DRA-only fleet runs no device plugin DaemonSet at all
  CHECK(d::check_device_plugin_unhealthy(snapshot(lists)).size() == 1);
  CHECK(d::check_device_plugin_unhealthy(with_dra(inv, lists)).empty());
  // A node offering nvidia.com/gpu as well still needs its plugin (and is dra-double-advertised).
  lists[Source::nodes] = {h100_node("dra-0", 2, 2)};
  CHECK(d::check_device_plugin_unhealthy(with_dra(inv, lists)).size() == 1);
  CHECK(d::check_dra_double_advertised(with_dra(inv, lists)).size() == 1);
}
