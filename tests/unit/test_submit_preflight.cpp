// The pre-flight checks of `gpuctl submit`: GPU capacity and free GPUs now. Quota, LimitRange,
// claims, reading the input and the dry-run Pod are in test_submit_preflight_admission.cpp.
#include <catch2/catch.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "test_submit_preflight_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::preflight;

TEST_CASE("preflight_checks lists the checks in the order they run", "[preflight]") {
  std::vector<std::string> names;
  for (const auto& c : ops::preflight_checks()) names.emplace_back(c.name);
  CHECK(names == std::vector<std::string>{"gpu-capacity", "gpu-free-now", "device-capacity", "device-free-now", "quota",
                                          "limit-range", "volume-claim", "queue", "gang"});
}

TEST_CASE("gpu-capacity passes when one reachable node is big enough", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(8, h100_selector());
  in.nodes = {gpu_node("h1", kH100, 8), gpu_node("a1", kA100, 4)};
  CHECK(ops::check_gpu_capacity(in).empty());
  CHECK(ops::run_preflight(in).empty());
}

TEST_CASE("gpu-capacity says nothing for a job without GPUs", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(0);
  in.nodes = {gpu_node("c1", "", 0)};
  CHECK(ops::check_gpu_capacity(in).empty());
  CHECK(ops::check_gpu_free_now(in).empty());
}

TEST_CASE("gpu-capacity refuses with the largest node and the excluded ones", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(16, h100_selector());
  in.nodes = {gpu_node("h1", kH100, 8), gpu_node("h2", kH100, 8), gpu_node("h3", kH100, 4),
              cordoned(gpu_node("h4", kH100, 16)), gpu_node("a1", kA100, 16)};
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].check == "gpu-capacity");
  CHECK(f[0].severity == ops::FindingSeverity::refusal);
  CHECK(f[0].message ==
        "no schedulable node with product NVIDIA-H100-80GB-HBM3 has 16 GPUs: the largest has 8 "
        "(4 nodes of that product, 3 schedulable; 1 cordoned)");
  CHECK(ops::has_refusal(ops::run_preflight(in)));
}

TEST_CASE("gpu-capacity counts untolerated taints and honours tolerations", "[preflight]") {
  ops::PreflightInput in;
  in.nodes = {tainted(gpu_node("h1", kH100, 8), "dedicated", "ml", "NoSchedule"),
              tainted(gpu_node("h2", kH100, 8), "dedicated", "ml", "NoSchedule"), cordoned(gpu_node("h3", kH100, 8)),
              gpu_node("h4", kH100, 2)};
  in.job = job(8, h100_selector());
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no schedulable node with product NVIDIA-H100-80GB-HBM3 has 8 GPUs: the largest has 2 "
        "(4 nodes of that product, 1 schedulable; 2 with taint dedicated=ml:NoSchedule not tolerated, 1 cordoned)");

  in.job = job(8, h100_selector(), json::array({{{"key", "dedicated"}, {"operator", "Equal"}, {"value", "ml"}}}));
  CHECK(ops::check_gpu_capacity(in).empty());
  // PreferNoSchedule never blocks.
  in.job = job(8, h100_selector());
  in.nodes = {tainted(gpu_node("h1", kH100, 8), "dedicated", "ml", "PreferNoSchedule")};
  CHECK(ops::check_gpu_capacity(in).empty());
}

TEST_CASE("gpu-capacity when no node of that product is schedulable", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(8, h100_selector());
  in.nodes = {cordoned(gpu_node("h1", kH100, 8)), tainted(gpu_node("h2", kH100, 8), "maintenance", "", "NoExecute")};
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no schedulable node with product NVIDIA-H100-80GB-HBM3 has 8 GPUs: none of the 2 nodes of that product is "
        "schedulable (1 cordoned, 1 with taint maintenance:NoExecute not tolerated)");
  in.nodes = {cordoned(gpu_node("h1", kH100, 8))};
  f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no schedulable node with product NVIDIA-H100-80GB-HBM3 has 8 GPUs: the only node of that product is "
        "not schedulable (cordoned)");
}

TEST_CASE("gpu-capacity when no node matches the selector names the products there are", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(1, h100_selector());
  in.nodes = {gpu_node("a1", kA100, 8), gpu_node("a2", kA100, 8), gpu_node("l1", "NVIDIA-L4", 1),
              gpu_node("c1", "", 0)};
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no node matches the job's placement nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 (0 of 4 nodes); GPU products "
        "on the "
        "nodes: nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB (2 nodes), nvidia.com/gpu.product=NVIDIA-L4 (1 node)");

  in.job = job(1, json{{"pool", "training"}});
  f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "no node matches the job's placement pool=training (0 of 4 nodes)");
}

TEST_CASE("gpu-capacity with an affinity or no placement at all", "[preflight]") {
  ops::PreflightInput in;
  json j = job(16);
  j["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
   ["nodeSelectorTerms"] = json::array(
       {{{"matchExpressions",
          json::array({{{"key", "nvidia.com/gpu.product"}, {"operator", "In"}, {"values", {kH100, kA100}}}})}}});
  in.job = j;
  in.nodes = {gpu_node("h1", kH100, 8), gpu_node("a1", kA100, 4), gpu_node("l1", "NVIDIA-L4", 32)};
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no schedulable node matching nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3,NVIDIA-A100-SXM4-80GB) has 16 "
        "GPUs: "
        "the largest has 8 (2 nodes matching, 2 schedulable)");

  in.job = job(64);
  f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "no schedulable node has 64 GPUs: the largest has 32 (3 nodes in the cluster, 3 schedulable)");
  in.nodes.clear();
  f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "the cluster has no nodes to run pods asking for 64 GPUs");
}

TEST_CASE("gpu-capacity checks MIG and other nvidia.com resources too", "[preflight]") {
  ops::PreflightInput in;
  in.job = job_with_resources({{"nvidia.com/mig-1g.10gb", "2"}});
  json mig = gpu_node("m1", kH100, 0);
  mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "1";
  in.nodes = {mig};
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no schedulable node has 2 nvidia.com/mig-1g.10gb: the largest has 1 (1 node in the cluster, 1 schedulable)");
  mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7";
  in.nodes = {mig};
  CHECK(ops::check_gpu_capacity(in).empty());
}

TEST_CASE("gpu-capacity over the real rke2 vGPU node", "[preflight]") {
  json list = json::parse(testing::fixture("k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json"));
  ops::PreflightInput in;
  for (const auto& n : list["items"]) in.nodes.push_back(n);
  in.job = job(1, json{{"nvidia.com/gpu.product", "NVIDIA-A16-4Q"}});
  CHECK(ops::check_gpu_capacity(in).empty());
  in.job = job(2, json{{"nvidia.com/gpu.product", "NVIDIA-A16-4Q"}});
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "no schedulable node with product NVIDIA-A16-4Q has 2 GPUs: the largest has 1 (1 node of that product, 1 "
        "schedulable)");
}

TEST_CASE("gpu-free-now warns when the GPUs exist but are busy", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(8, h100_selector());
  in.nodes = {gpu_node("h1", kH100, 8), gpu_node("h2", kH100, 8), gpu_node("h3", kH100, 8), gpu_node("a1", kA100, 8)};
  in.pods = {running_pod("p1", "h1", 4), running_pod("p2", "h2", 6), running_pod("p3", "h3", 8),
             running_pod("p4", "a1", 0)};
  auto f = ops::check_gpu_free_now(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].check == "gpu-free-now");
  CHECK(f[0].severity == ops::FindingSeverity::warning);
  CHECK(f[0].message ==
        "the 8 GPUs per pod exist but are busy: at most 4 free on one node now (6 free across 3 nodes); "
        "the job will wait in Pending");
  CHECK_FALSE(ops::has_refusal(ops::run_preflight(in)));

  // Finished pods hold nothing.
  in.pods[0]["status"]["phase"] = "Succeeded";
  CHECK(ops::check_gpu_free_now(in).empty());
}

TEST_CASE("gpu-free-now counts how many of the parallel pods fit now", "[preflight]") {
  ops::PreflightInput in;
  json j = job(4, h100_selector());
  j["spec"]["parallelism"] = 4;
  in.job = j;
  in.nodes = {gpu_node("h1", kH100, 8), gpu_node("h2", kH100, 8)};
  in.pods = {running_pod("p1", "h1", 6)};
  auto f = ops::check_gpu_free_now(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "only 2 of the job's 4 pods (4 GPUs each) fit on the GPUs free now (10 free across 2 nodes); "
        "the rest will wait in Pending");
  // completions caps the pods that run at once; a suspended job starts none.
  j["spec"]["completions"] = 2;
  in.job = j;
  CHECK(ops::check_gpu_free_now(in).empty());
  j["spec"]["completions"] = 4;
  j["spec"]["suspend"] = true;
  in.job = j;
  CHECK(ops::check_gpu_free_now(in).empty());
  // A forbidden pod list: nothing said rather than a guess.
  j["spec"].erase("suspend");
  in.job = j;
  in.pods_listed = false;
  CHECK(ops::check_gpu_free_now(in).empty());
}

TEST_CASE("gpu-free-now leaves unreachable nodes to gpu-capacity", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(8, h100_selector());
  in.nodes = {cordoned(gpu_node("h1", kH100, 8)), gpu_node("h2", kH100, 4)};
  CHECK(ops::check_gpu_free_now(in).empty());
  CHECK(ops::check_gpu_capacity(in).size() == 1);
}

TEST_CASE("to_json gives the stable PreflightReport schema", "[preflight]") {
  std::vector<ops::PreflightFinding> findings = {{"quota", ops::FindingSeverity::warning, "w"},
                                                 {"gpu-capacity", ops::FindingSeverity::refusal, "r"}};
  json j = ops::to_json(findings);
  CHECK(j["apiVersion"] == "gpuctl.io/v1alpha1");
  CHECK(j["kind"] == "PreflightReport");
  CHECK(j["refused"] == true);
  CHECK(j["findings"][0] == json{{"check", "quota"}, {"severity", "warning"}, {"message", "w"}});
  CHECK(ops::to_json({})["refused"] == false);
}
