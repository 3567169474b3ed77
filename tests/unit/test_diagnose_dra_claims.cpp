// diagnose's DRA checks of claims and classes (issue 19): unallocated claims of pending pods with
// the scheduler's words and the free devices that match, classes that match nothing; what the
// CEL evaluator cannot judge is said to be unknown, never "no match".
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_dra_builders.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"

using namespace gpuctl::testing::dx;
using d::Finding;

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
  CHECK(contains(
      f.summary,
      ": claim ml/big-gpus-x7k9m is not allocated: request gpus: 16 of class gpu.nvidia.com; 2 free device(s) match "
      "(4 match in all), at most 2 on one node (gpu-a); the scheduler says: Unschedulable: 0/3 nodes are "
      "available: 3 cannot allocate all claims."));
  REQUIRE(f.evidence.size() == 2);
  CHECK(f.evidence[0].source == "pod ml/big condition PodScheduled");
  CHECK(f.evidence[0].time == "2026-12-06T11:50:00Z");
  CHECK(f.evidence[1].source == "ResourceClaim ml/big-gpus-x7k9m spec.devices.requests");
  CHECK(f.evidence[1].text == "request gpus: 16 of class gpu.nvidia.com");
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
                 "request gpus: 1 of class gpu.nvidia.com-typo; device class gpu.nvidia.com-typo does not exist"));

  // Without the claims list a claim would look missing: one info finding says what is not known.
  inv.warnings = {
      "DRA objects not read (resourceclaims forbidden): GPUs published through DRA are left out of these counts"};
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
  CHECK(contains(found[0].summary, "request gpus: 1 of class gpu.nvidia.com where " + expr + "; "));
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
  empty.warnings = {
      "DRA objects not read (resourceclaims forbidden): GPUs published through DRA are left out of these counts"};
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

TEST_CASE("diagnose dra: a pod using DRA claims is a GPU pod, and its pending state is the claims' check's",
          "[diagnose][dra]") {
  json node = h100_node("dra-0", 0, 0);
  node["status"]["capacity"] = json::object();
  json claimed = pod("ml", "train", "dra-0", 0);
  claimed["spec"]["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}});
  json plain = pod("ml", "web", "dra-0", 0);
  // gpu-node-untainted counts only the pod that uses no GPU at all.
  auto untainted = d::check_gpu_node_untainted(snapshot({{Source::nodes, {node}}, {Source::pods, {claimed, plain}}}));
  REQUIRE(untainted.size() == 1);
  CHECK(contains(untainted[0].summary, "runs 1 pod(s) that use no GPU (ml: 1)"));
  // A pending pod whose GPUs come from a claim has no nvidia.com/* numbers for gpu-pods-pending.
  json pending = pod_with_template_claim("big", "big-gpus", "0/1 nodes are available: 1 cannot allocate all claims.");
  CHECK(d::check_gpu_pods_pending(snapshot({{Source::nodes, {node}}, {Source::pods, {pending}}})).empty());
  DraInventory inv = cluster_of_four();
  inv.claims.push_back(claim("ml", "big-gpus", "gpu.nvidia.com", 16));
  CHECK(d::check_dra_claim_unallocated(with_dra(inv, {{Source::pods, {pending}}})).size() == 1);
}

TEST_CASE("diagnose dra: gpu-pods-pending counts the devices a DeviceClass serves nvidia.com/gpu with",
          "[diagnose][dra]") {
  // gpu-a publishes gpu-0..2 (gpu-2 held by a claim) and advertises no nvidia.com/gpu; gpu-b's one
  // device is tainted. The class maps nvidia.com/gpu (DRAExtendedResource) and has no selectors.
  auto dra_only = [](const std::string& name) {
    json n = h100_node(name, 0, 0);
    n["status"]["capacity"] = json::object();
    n["status"]["allocatable"] = json::object();
    return n;
  };
  json holder = pod("ml", "running", "gpu-a", 1);  // its nvidia.com/gpu is the claim's gpu-2: not counted twice
  auto pending = [](int gpus) {
    return unschedulable_pod("ml", "plain", gpus, "0/2 nodes are available: 2 cannot allocate all claims.");
  };
  DraInventory inv = cluster_of_four();
  inv.classes[0].extended_resource_name = "nvidia.com/gpu";
  auto lists = [&](int gpus) {
    return std::map<Source, std::vector<json>>{{Source::nodes, {dra_only("gpu-a"), dra_only("gpu-b")}},
                                               {Source::pods, {holder, pending(gpus)}}};
  };
  // Without DRA the nodes offer nothing.
  auto plugin_only = d::check_gpu_pods_pending(snapshot(lists(2)));
  REQUIRE(plugin_only.size() == 1);
  CHECK(contains(plugin_only[0].summary, "no node offers nvidia.com/gpu: it can never run"));
  // With the class, gpu-a offers 3 healthy devices, one of them held: 2 are free.
  auto fits = d::check_gpu_pods_pending(with_dra(inv, lists(2)));
  REQUIRE(fits.size() == 1);
  CHECK(contains(fits[0].summary, "2 nvidia.com/gpu are free on gpu-a; the scheduler's reason is in the evidence"));
  auto busy = d::check_gpu_pods_pending(with_dra(inv, lists(3)));
  REQUIRE(busy.size() == 1);
  CHECK(contains(busy[0].summary, "no nvidia.com/gpu free now: the 1 node(s) it may use have 2 free in total"));
  auto never = d::check_gpu_pods_pending(with_dra(inv, lists(4)));
  REQUIRE(never.size() == 1);
  CHECK(contains(never[0].summary,
                 "it asks for 4 nvidia.com/gpu per pod and the largest node offers 3 (gpu-a): it "
                 "can never run"));
}
