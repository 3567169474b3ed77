// diagnose's DRA checks (issue 19) over inventories as collect_dra builds them: tainted devices by
// NVIDIA's action, incomplete pools, unallocated claims of pending pods, classes that match
// nothing (or cannot be judged), GPUs offered twice; and a cluster without DRA passes them all.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"

using namespace gpuctl::testing::dx;
using d::Finding;
using gpuctl::ops::DraClaim;
using gpuctl::ops::DraClaimRequest;
using gpuctl::ops::DraDevice;
using gpuctl::ops::DraDeviceClass;
using gpuctl::ops::DraDeviceTaint;
using gpuctl::ops::DraDeviceType;
using gpuctl::ops::DraInventory;
using gpuctl::ops::DraPoolProblem;

namespace {

DraDevice gpu(const std::string& node, int index, std::vector<DraDeviceTaint> taints = {}) {
  DraDevice dev;
  dev.driver = "gpu.nvidia.com";
  dev.pool = node;
  dev.node = node;
  dev.name = "gpu-" + std::to_string(index);
  dev.type = DraDeviceType::gpu;
  dev.product = "NVIDIA A100-PCIE-40GB";
  dev.uuid = "GPU-2fa81118-5a5f-aa66-7660-47" + std::to_string(1000000000 + index);
  dev.attributes = {{"type", {{"string", "gpu"}}}, {"productName", {{"string", dev.product}}}};
  dev.taints = std::move(taints);
  return dev;
}

DraDeviceTaint driver_taint(const std::string& key, const std::string& value, const std::string& effect) {
  return {key, value, effect, "2026-12-06T11:40:00Z", ""};
}

DraClaim claim(const std::string& ns, const std::string& name, const std::string& device_class, std::int64_t count,
               std::vector<std::string> selectors = {}) {
  DraClaim c;
  c.namespace_name = ns;
  c.name = name;
  c.created_at = "2026-12-06T11:00:00Z";
  c.requests.push_back({"gpus", device_class, "ExactCount", count, std::move(selectors)});
  return c;
}

DraClaim holding(DraClaim c, const DraDevice& dev, const std::string& pod_name) {
  c.allocated = true;
  c.devices.push_back({dev.driver, dev.pool, dev.name});
  c.reserved_for.push_back({c.namespace_name, pod_name});
  return c;
}

d::Snapshot with_dra(DraInventory inventory, std::map<Source, std::vector<json>> lists = {}) {
  d::Snapshot s = snapshot(std::move(lists));
  inventory.served = true;
  inventory.index_claims();  // as build_dra_inventory does: holder() reads the index
  s.dra = std::move(inventory);
  return s;
}

}  // namespace

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
      "resourceclaims could not be listed (forbidden): User \"ops\" cannot list resource \"resourceclaims\""};
  auto blind = d::check_dra_device_tainted(with_dra(inv));
  REQUIRE(blind.size() == 1);
  CHECK(contains(blind[0].summary, "who holds it is not known (resourceclaims could not be read)"));
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

namespace {

// A pending pod with one claim from a template, made (status.resourceClaimStatuses) as `claim_name`.
json pod_with_template_claim(const std::string& name, const std::string& claim_name, const std::string& message) {
  json p = unschedulable_pod("ml", name, 0, message);
  p["spec"]["resourceClaims"] = json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", "gpu-template"}}});
  p["status"]["resourceClaimStatuses"] = json::array({{{"name", "gpus"}, {"resourceClaimName", claim_name}}});
  return p;
}

// Two free GPUs on gpu-a, a third held, one tainted on gpu-b; classes without selectors, so the
// counts do not depend on the CEL evaluator.
DraInventory cluster_of_four() {
  DraInventory inv;
  inv.devices = {gpu("gpu-a", 0), gpu("gpu-a", 1), gpu("gpu-a", 2),
                 gpu("gpu-b", 0, {driver_taint("gpu.nvidia.com/gpu-lost", "", "NoSchedule")})};
  inv.classes = {DraDeviceClass{"gpu.nvidia.com", {}, ""}};
  inv.claims = {holding(claim("ml", "running-gpus", "gpu.nvidia.com", 1), inv.devices[2], "running")};
  return inv;
}

}  // namespace

TEST_CASE("diagnose dra: an unallocated claim of a pending pod, with the scheduler's words and the free devices",
          "[diagnose][dra]") {
  DraInventory inv = cluster_of_four();
  inv.claims.push_back(claim("ml", "big-gpus-x7k9m", "gpu.nvidia.com", 16));
  json big = pod_with_template_claim("big", "big-gpus-x7k9m",
                                     "0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are "
                                     "available: 3 Preemption is not helpful for scheduling.");
  json running = pod("ml", "running", "gpu-a", 0);
  auto found = d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {big, running}}}));
  REQUIRE(found.size() == 1);
  const Finding& f = found[0];
  CHECK(f.severity == Severity::error);
  CHECK(f.object.kind == "ResourceClaim");
  CHECK(f.object.namespace_name == "ml");
  CHECK(f.object.name == "big-gpus-x7k9m");
  CHECK(contains(f.summary, "pod ml/big pending for "));
  CHECK(contains(f.summary,
                 ": claim ml/big-gpus-x7k9m is not allocated: gpus 16 of class gpu.nvidia.com: 2 free device(s) match "
                 "(4 match in all), at most 2 on one node (gpu-a); the scheduler says: Unschedulable: 0/3 nodes are "
                 "available: 3 cannot allocate all claims."));
  REQUIRE(f.evidence.size() == 2);
  CHECK(f.evidence[0].source == "pod ml/big condition PodScheduled");
  CHECK(f.evidence[0].time == "2026-12-06T11:50:00Z");
  CHECK(f.evidence[1].source == "ResourceClaim ml/big-gpus-x7k9m spec.devices.requests");
  CHECK(f.evidence[1].text == "gpus 16 of class gpu.nvidia.com");
  CHECK(f.remedy[0] == "kubectl describe resourceclaim -n ml big-gpus-x7k9m");
  CHECK(f.remedy[1] == "kubectl describe pod -n ml big");

  // Once allocated, or once the pod is scheduled, there is nothing to say.
  inv.claims.back().allocated = true;
  CHECK(d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {big}}})).empty());
}

TEST_CASE("diagnose dra: the scheduler's reason from the newest FailedScheduling event when the condition has none",
          "[diagnose][dra]") {
  DraInventory inv = cluster_of_four();
  DraClaim ext = claim("ml", "ext-gpu-abcde", "gpu.nvidia.com", 1);
  ext.extended_resource = true;
  ext.owner_pod = "ext";  // found through its owner: the pod's status does not name it yet
  inv.claims.push_back(ext);
  json p = unschedulable_pod("ml", "ext", 1, "");
  json older =
      event("Pod", "ml", "ext", "FailedScheduling", "0/3 nodes are available: old words.", "default-scheduler");
  older["lastTimestamp"] = "2026-12-06T11:30:00Z";
  json newer = event("Pod", "ml", "ext", "FailedScheduling", "0/3 nodes are available: 3 cannot allocate all claims.",
                     "default-scheduler");
  auto found = d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {p}}, {Source::events, {newer, older}}}));
  REQUIRE(found.size() == 1);
  CHECK(found[0].object.name == "ext-gpu-abcde");
  CHECK(contains(found[0].summary, "the scheduler says: 0/3 nodes are available: 3 cannot allocate all claims."));
  CHECK(found[0].evidence[0].source == "event FailedScheduling from default-scheduler");
  CHECK(found[0].evidence[0].time == "2026-12-06T11:58:00Z");
  // Without events the finding stands on the claim alone.
  auto bare = d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {p}}}));
  REQUIRE(bare.size() == 1);
  CHECK_FALSE(contains(bare[0].summary, "the scheduler says"));
}

TEST_CASE("diagnose dra: a claim that does not exist, a class that does not exist", "[diagnose][dra]") {
  DraInventory inv = cluster_of_four();
  json named = unschedulable_pod("ml", "shared", 0, "0/3 nodes are available: resourceclaim not found.");
  named["spec"]["resourceClaims"] = json::array({{{"name", "gpus"}, {"resourceClaimName", "shared-gpus"}}});
  inv.claims.push_back(claim("ml", "odd-gpus", "gpu.nvidia.com-typo", 1));
  json odd = pod_with_template_claim("odd", "odd-gpus", "0/3 nodes are available: 3 cannot allocate all claims.");
  auto found = d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {named, odd}}}));
  REQUIRE(found.size() == 2);
  CHECK(found[0].object.kind == "Pod");
  CHECK(contains(found[0].summary, "claim ml/shared-gpus (spec.resourceClaims[gpus]) does not exist"));
  CHECK(contains(found[1].summary,
                 "gpus 1 of class gpu.nvidia.com-typo: device class gpu.nvidia.com-typo does not exist"));

  // Without the claims list a claim would look missing: one info finding says what is not known.
  inv.warnings = {
      "resourceclaims could not be listed (forbidden): User \"ops\" cannot list resource \"resourceclaims\""};
  inv.claims.clear();
  auto blind = d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {named, odd}}}));
  REQUIRE(blind.size() == 1);
  CHECK(blind[0].severity == Severity::info);
  CHECK(contains(blind[0].summary, "ResourceClaims could not be read"));
  CHECK(blind[0].evidence[0].text == inv.warnings[0]);
}

TEST_CASE("diagnose dra: a request's selector gpuctl cannot evaluate is counted as unknown, not as no match",
          "[diagnose][dra]") {
  DraInventory inv = cluster_of_four();
  const std::string expr = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')";
  inv.claims.push_back(claim("ml", "h100-gpus", "gpu.nvidia.com", 1, {expr}));
  json p = pod_with_template_claim("h100", "h100-gpus", "0/3 nodes are available: 3 cannot allocate all claims.");
  auto found = d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {p}}}));
  REQUIRE(found.size() == 1);
  CHECK(contains(found[0].summary, "gpus 1 of class gpu.nvidia.com where " + expr + ": "));
  auto verdict = gpuctl::ops::evaluate_device_selector(expr, inv.devices[0]);
  if (verdict.kind == gpuctl::ops::CelVerdict::Kind::unsupported) {
    CHECK(contains(
        found[0].summary,
        "0 free device(s) match (0 match in all); whether 2 more free device(s) match could not be evaluated"));
  } else {
    // The A100s do not match an H100 selector: none free, and none at all.
    CHECK(verdict.kind == gpuctl::ops::CelVerdict::Kind::no_match);
    CHECK(contains(found[0].summary, "0 free device(s) match (0 match in all); the scheduler says"));
  }
}

TEST_CASE("diagnose dra: a class that matches nothing is a warning when claimed, info otherwise, never a guess",
          "[diagnose][dra]") {
  DraInventory empty;
  empty.classes = {DraDeviceClass{"gpu.nvidia.com", {}, "nvidia.com/gpu"}};
  auto none = d::check_dra_class_matches_nothing(with_dra(empty));
  REQUIRE(none.size() == 1);
  CHECK(none[0].severity == Severity::info);
  CHECK(none[0].object.kind == "DeviceClass");
  CHECK(none[0].summary ==
        "DeviceClass gpu.nvidia.com matches none of the 0 published device(s); no claim requests it");
  empty.claims = {claim("ml", "a", "gpu.nvidia.com", 1), claim("ml", "b", "other", 1)};
  auto claimed = d::check_dra_class_matches_nothing(with_dra(empty));
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].severity == Severity::warning);
  CHECK(contains(claimed[0].summary, "; 1 claim(s) request it and cannot be allocated: ml/a"));
  empty.claims.clear();
  empty.warnings = {"resourceclaims could not be listed (forbidden): resourceclaims.resource.k8s.io is forbidden"};
  auto unknown = d::check_dra_class_matches_nothing(with_dra(empty));
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0].severity == Severity::info);
  CHECK(contains(unknown[0].summary, "; whether a claim requests it is not known (resourceclaims could not be read)"));

  DraInventory inv = cluster_of_four();
  CHECK(d::check_dra_class_matches_nothing(with_dra(inv)).empty());  // no selectors: every device

  const std::string expr = "device.driver == 'nothing.example.com'";
  inv.classes.push_back(DraDeviceClass{"nothing.example.com", {expr}, ""});
  inv.claims.push_back(claim("ml", "n", "nothing.example.com", 1));
  auto found = d::check_dra_class_matches_nothing(with_dra(inv));
  REQUIRE(found.size() == 1);
  CHECK(found[0].object.name == "nothing.example.com");
  CHECK(found[0].evidence[0].text == expr);
  auto verdict = gpuctl::ops::evaluate_device_selector(expr, inv.devices[0]);
  if (verdict.kind == gpuctl::ops::CelVerdict::Kind::unsupported) {
    CHECK(found[0].severity == Severity::info);
    CHECK(contains(found[0].summary,
                   "no published device is known to match it; its selectors could not be evaluated"
                   " for 4 of the 4 device(s)"));
    CHECK_FALSE(contains(found[0].summary, "matches none"));
  } else {
    CHECK(found[0].severity == Severity::warning);
    CHECK(contains(found[0].summary, "matches none of the 4 published device(s); 1 claim(s) request it"));
  }
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
