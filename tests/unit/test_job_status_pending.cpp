// Why a pending job's pod cannot be placed, named (issue 20): the taints it does not tolerate with
// the nodes that carry them, the values a label key has when its selector matches no node, and the
// claims it waits for. Nodes are recorded node lists (tests/fixtures/k8s-nodes) with taints and
// labels set as an admin would set them; the scheduler's words are its own.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/jobs/jobs.hpp"

using namespace gpuctl;
using gpuctl::testing::CliHarness;
using gpuctl::testing::fixture;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

const auto kNow = *util::parse_rfc3339("2026-12-02T11:00:00Z");
constexpr const char* kProductKey = "nvidia.com/gpu.product";

// The recorded RKE2 GPU node (one NVIDIA-A16-4Q vGPU, GPU Feature Discovery labels) as `name`,
// and the recorded AKS nodes (no GPU).
json gpu_node(const std::string& name) {
  json node = json::parse(fixture("k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json"))["items"][0];
  node["metadata"]["name"] = name;
  return node;
}

std::vector<json> cpu_nodes() {
  auto list = json::parse(fixture("k8s-nodes/edgecloud__aks-3-nodes-no-gpu__nodelist.json"));
  return list["items"].get<std::vector<json>>();
}

json tainted(json node, const std::string& key, const std::string& value) {
  node["spec"]["taints"].push_back({{"key", key}, {"value", value}, {"effect", "NoSchedule"}});
  return node;
}

json gpu_job(const json& pod_spec) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", "train"}, {"namespace", "ml"}, {"uid", "uid-train"}}},
          {"spec", {{"template", {{"spec", pod_spec}}}}},
          {"status", {{"startTime", "2026-12-02T10:00:05Z"}, {"active", 1}}}};
}

json gpu_spec() {
  return {{"containers", json::array({{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}};
}

// The pod as the scheduler leaves it: PodScheduled False, Unschedulable, with its words.
json unschedulable_pod(const json& spec, const std::string& message) {
  return {
      {"metadata", {{"name", "train-x7k2p"}, {"namespace", "ml"}}},
      {"spec", spec},
      {"status",
       {{"phase", "Pending"},
        {"conditions",
         json::array(
             {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}, {"message", message}}})}}}};
}

// What kube-scheduler 1.36 wrote on the e2e cluster (10 nodes) for both jobs of
// tests/e2e/test_jobs_pending.py: the one its placement allows but a taint keeps off, and the one
// whose nodeSelector matches no node. The same words for both: the scheduler counts, gpuctl names.
constexpr const char* kRecordedMessage =
    "0/10 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 8 node(s) had untolerated "
    "taint(s). still not schedulable, preemption: 0/10 nodes are available: 10 Preemption is not helpful for "
    "scheduling.";
constexpr const char* kTaintMessage = kRecordedMessage;
constexpr const char* kSelectorMessage = kRecordedMessage;

std::vector<json> cluster() {
  std::vector<json> nodes = cpu_nodes();
  nodes.push_back(tainted(gpu_node("gx-a16-0"), "gpu-maintenance", "true"));
  nodes.push_back(tainted(gpu_node("gx-a16-1"), "gpu-maintenance", "true"));
  return nodes;
}

}  // namespace

TEST_CASE("ops::summarize_job names the taints a pending pod does not tolerate with their nodes", "[job-status]") {
  const std::vector<json> nodes = cluster();
  json pod = unschedulable_pod(gpu_spec(), kTaintMessage);
  auto s = ops::summarize_job(gpu_job(gpu_spec()), {pod}, {}, kNow, &nodes);
  REQUIRE(s.pending);
  CHECK(s.pending->pod == "train-x7k2p");
  REQUIRE(s.pending->untolerated_taints.size() == 1);
  CHECK(kube::to_string(s.pending->untolerated_taints[0].taint) == "gpu-maintenance=true:NoSchedule");
  CHECK(s.pending->untolerated_taints[0].nodes == std::vector<std::string>{"gx-a16-0", "gx-a16-1"});
  CHECK_FALSE(s.pending->unmatched_selector);
  CHECK(s.reason ==
        "not scheduled: no node can take it now (10 nodes): 2 do not match its node selector or affinity, 8 have "
        "taints it does not tolerate (gpu-maintenance=true:NoSchedule on gx-a16-0, gx-a16-1); preempting "
        "lower-priority pods would not help");

  SECTION("a tolerated taint is not named, and without the nodes nothing is guessed from the text") {
    json spec = gpu_spec();
    spec["tolerations"] = json::array({{{"key", "gpu-maintenance"}, {"operator", "Exists"}}});
    std::vector<json> more = nodes;
    more.push_back(tainted(gpu_node("gx-a16-2"), "dedicated", "llm"));
    auto t = ops::summarize_job(gpu_job(spec), {unschedulable_pod(spec, kTaintMessage)}, {}, kNow, &more);
    REQUIRE(t.pending);
    REQUIRE(t.pending->untolerated_taints.size() == 1);
    CHECK(kube::to_string(t.pending->untolerated_taints[0].taint) == "dedicated=llm:NoSchedule");
    auto blind = ops::summarize_job(gpu_job(gpu_spec()), {pod}, {}, kNow);
    REQUIRE(blind.pending);
    CHECK(blind.pending->untolerated_taints.empty());
    CHECK(blind.reason ==
          "not scheduled: no node can take it now (10 nodes): 2 do not match its node selector or affinity, 8 have "
          "taints it does not tolerate; preempting lower-priority pods would not help");
  }
  SECTION("a long node list is cut in words, kept whole in JSON") {
    std::vector<json> many = cpu_nodes();
    for (int i = 0; i < 7; ++i) many.push_back(tainted(gpu_node("gx-" + std::to_string(i)), "gpu-maintenance", "true"));
    auto t = ops::summarize_job(gpu_job(gpu_spec()), {pod}, {}, kNow, &many);
    CHECK(t.reason.find("(gpu-maintenance=true:NoSchedule on gx-0, gx-1, gx-2, gx-3, gx-4 +2 more)") !=
          std::string::npos);
    auto doc = ops::to_json(t);
    CHECK(doc["pending"]["untoleratedTaints"][0]["nodes"].size() == 7);
    CHECK(doc["pending"]["untoleratedTaints"][0]["taint"] == "gpu-maintenance=true:NoSchedule");
    CHECK(doc["pending"]["untoleratedTaints"][0]["key"] == "gpu-maintenance");
  }
}

TEST_CASE("ops::summarize_job names the label values that exist when a nodeSelector matches no node", "[job-status]") {
  std::vector<json> nodes = cpu_nodes();
  nodes.push_back(gpu_node("gx-a16-0"));
  json h100 = gpu_node("gx-h100-0");
  h100["metadata"]["labels"][kProductKey] = "NVIDIA-H100-80GB-HBM3";
  nodes.push_back(h100);
  json spec = gpu_spec();
  spec["nodeSelector"] = {{kProductKey, "A100"}};
  auto s = ops::summarize_job(gpu_job(spec), {unschedulable_pod(spec, kSelectorMessage)}, {}, kNow, &nodes);
  REQUIRE(s.pending);
  REQUIRE(s.pending->unmatched_selector);
  CHECK(s.pending->unmatched_selector->selector == "nodeSelector nvidia.com/gpu.product=A100");
  REQUIRE(s.pending->unmatched_selector->labels.size() == 1);
  const auto& label = s.pending->unmatched_selector->labels[0];
  CHECK(label.values == std::vector<std::string>{"NVIDIA-A16-4Q", "NVIDIA-H100-80GB-HBM3"});
  CHECK(label.nodes_without == 3);
  CHECK(s.reason ==
        "not scheduled: no node can take it now (10 nodes): 2 do not match its node selector or affinity "
        "(nodeSelector nvidia.com/gpu.product=A100 matches no node; the cluster has "
        "nvidia.com/gpu.product=NVIDIA-A16-4Q, NVIDIA-H100-80GB-HBM3), 8 have taints it does not tolerate; "
        "preempting lower-priority pods would not help");
  auto doc = ops::to_json(s);
  CHECK(doc["pending"]["unmatchedSelector"]["labels"][0] == json{{"key", kProductKey},
                                                                 {"wanted", "A100"},
                                                                 {"values", {"NVIDIA-A16-4Q", "NVIDIA-H100-80GB-HBM3"}},
                                                                 {"nodesWithout", 3}});

  SECTION("required node affinity, and a key no node has") {
    json affine = gpu_spec();
    affine["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
        json::array(
            {{{"matchExpressions",
               json::array({{{"key", "cloud.example.com/zone"}, {"operator", "In"}, {"values", {"a", "b"}}}})}}});
    auto t = ops::summarize_job(gpu_job(affine), {unschedulable_pod(affine, kSelectorMessage)}, {}, kNow, &nodes);
    REQUIRE(t.pending);
    REQUIRE(t.pending->unmatched_selector);
    CHECK(t.reason.find("(node affinity cloud.example.com/zone in (a,b) matches no node; no node has the label "
                        "cloud.example.com/zone)") != std::string::npos);
  }
  // The recorded message as it reads with every node under a taint.
  SECTION("when every node has a taint it does not tolerate, the scheduler never reaches the selector") {
    std::vector<json> all_tainted;
    for (const auto& n : nodes) all_tainted.push_back(tainted(n, "gpu-maintenance", "true"));
    auto t = ops::summarize_job(
        gpu_job(spec),
        {unschedulable_pod(spec,
                           "0/10 nodes are available: 10 node(s) had untolerated taint(s). still not "
                           "schedulable, preemption: 0/10 nodes are available: 10 Preemption is not helpful for "
                           "scheduling.")},
        {}, kNow, &all_tainted);
    CHECK(
        t.reason.ends_with("; nodeSelector nvidia.com/gpu.product=A100 matches no node; the cluster has "
                           "nvidia.com/gpu.product=NVIDIA-A16-4Q, NVIDIA-H100-80GB-HBM3"));
  }
}

TEST_CASE("ops::summarize_job names the claims a pending pod waits for, with the scheduler's words", "[job-status]") {
  json spec = gpu_spec();
  spec["resourceClaims"] = json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", "a100x8"}},
                                        {{"name", "shared"}, {"resourceClaimName", "team-pool"}}});
  json pod = unschedulable_pod(spec,
                               "0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are "
                               "available: 3 Preemption is not helpful for scheduling.");
  pod["status"]["resourceClaimStatuses"] =
      json::array({{{"name", "gpus"}, {"resourceClaimName", "train-x7k2p-gpus-4mz9q"}}});
  auto s = ops::summarize_job(gpu_job(spec), {pod}, {}, kNow);
  REQUIRE(s.pending);
  REQUIRE(s.pending->unbound_claims.size() == 2);
  CHECK(s.pending->unbound_claims[0].name == "train-x7k2p-gpus-4mz9q");
  CHECK(s.pending->unbound_claims[0].source == "from template a100x8");
  CHECK(s.reason ==
        "not scheduled: no node can take it now (3 nodes): 3 nodes: cannot allocate all claims (ResourceClaim "
        "train-x7k2p-gpus-4mz9q (from template a100x8), ResourceClaim team-pool (spec.resourceClaims[shared])); "
        "preempting lower-priority pods would not help");
  auto doc = ops::to_json(s);
  CHECK(doc["pending"]["unboundClaims"][1] ==
        json{{"kind", "ResourceClaim"}, {"name", "team-pool"}, {"source", "spec.resourceClaims[shared]"}});
  CHECK(doc["pending"]["schedulerMessage"] == s.pending->scheduler_message);

  SECTION("an unbound PersistentVolumeClaim, when the scheduler says so") {
    json with_volume = gpu_spec();
    with_volume["volumes"] = json::array({{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "imagenet"}}}}});
    json waiting = unschedulable_pod(with_volume, fixture("k8s-errors/sched__insufficient-gpu__1-node__k8s-1.1x.txt"));
    CHECK(ops::summarize_job(gpu_job(with_volume), {waiting}, {}, kNow).pending->unbound_claims.empty());
    waiting = unschedulable_pod(
        with_volume,
        "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes "
        "are available: 4 Preemption is not helpful for scheduling.");
    auto t = ops::summarize_job(gpu_job(with_volume), {waiting}, {}, kNow);
    CHECK(t.reason.find("its PersistentVolumeClaims are not bound (PersistentVolumeClaim imagenet (volume data))") !=
          std::string::npos);
  }
}

TEST_CASE("cli: gpuctl jobs reads the nodes once, and only when a pod waits unscheduled", "[job-status][cli]") {
  CliHarness h;
  auto list_body = [](std::vector<json> items) {
    return json{{"kind", "List"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", std::move(items)}}.dump();
  };
  json pod = unschedulable_pod(gpu_spec(), kTaintMessage);
  pod["metadata"]["ownerReferences"] =
      json::array({{{"kind", "Job"}, {"controller", true}, {"uid", "uid-train"}, {"name", "train"}}});
  json other = gpu_job(gpu_spec());
  other["metadata"]["name"] = "eval";
  other["metadata"]["uid"] = "uid-eval";
  json other_pod = unschedulable_pod(gpu_spec(), kTaintMessage);
  other_pod["metadata"]["name"] = "eval-q2";
  other_pod["metadata"]["ownerReferences"] =
      json::array({{{"kind", "Job"}, {"controller", true}, {"uid", "uid-eval"}}});
  auto serve = [&](std::vector<json> pods) {
    h.fake().on("GET", "/apis/batch/v1/namespaces/ml/jobs", json_answer(200, list_body({gpu_job(gpu_spec()), other})));
    h.fake().on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, list_body(std::move(pods))));
    h.fake().on("GET", "/api/v1/namespaces/ml/events", json_answer(200, list_body({})));
  };
  serve({pod, other_pod});
  h.fake().on("GET", "/api/v1/nodes", json_answer(200, list_body(cluster())));
  auto r = h.run({"jobs", "-n", "ml", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  auto doc = json::parse(r.out);
  for (const auto& item : doc["items"]) {
    CHECK(item["pending"]["untoleratedTaints"][0]["nodes"] == json{"gx-a16-0", "gx-a16-1"});
  }
  CHECK(h.fake().unexpected().empty());

  // Running pods: no node list is read (none is scripted, so a read would be unexpected).
  pod["spec"]["nodeName"] = "gx-a16-0";
  pod["status"] = {{"phase", "Running"}};
  serve({pod});
  auto running = h.run({"jobs", "-n", "ml"});
  CHECK(running.exit_code == 0);
  CHECK(h.fake().unexpected().empty());

  // A user who may not list nodes still gets the scheduler's verdict, without the detail.
  serve({other_pod});
  h.fake().on("GET", "/api/v1/nodes",
              json_answer(403, R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403})"));
  auto refused = h.run({"jobs", "-n", "ml", "eval"});
  CHECK(refused.exit_code == 0);
  CHECK(refused.out.find("8 have taints it does not tolerate; preempting") != std::string::npos);
}
