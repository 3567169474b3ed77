// The live GPU view (`gpuctl gpus`, `gpuctl nodes --live`) through the ssh seam: recorded API
// lists through FakeTransport, scripted host answers through FakeSshRunner, real probe
// transcripts built from the nvidia-smi fixtures.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/fake_ssh_runner.hpp"
#include "fakes/probe_transcript.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/gpu/probe.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"

using nlohmann::json;
using namespace gpuctl;
using testing::cat;
using testing::fixture;
using testing::json_answer;
using testing::probe_step;

namespace {

const char* kPodSelector = "fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed";

json node(const std::string& name, const std::string& ip, int gpus) {
  json n = {{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "NVIDIA-GeForce-RTX-2070"}}}}},
            {"spec", json::object()},
            {"status",
             {{"capacity", {{"cpu", "16"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
              {"allocatable", {{"cpu", "16"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
              {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (!ip.empty()) n["status"]["addresses"] = json::array({{{"type", "InternalIP"}, {"address", ip}}});
  if (gpus == 0) {
    n["metadata"]["labels"] = json::object();
    n["status"]["capacity"].erase("nvidia.com/gpu");
    n["status"]["allocatable"].erase("nvidia.com/gpu");
  }
  return n;
}

json gpu_pod(const std::string& node_name, int gpus) {
  return {
      {"metadata", {{"name", "train-0"}, {"namespace", "ml"}}},
      {"spec",
       {{"nodeName", node_name},
        {"containers",
         json::array({{{"name", "c"}, {"resources", {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}},
      {"status", {{"phase", "Running"}}}};
}

// The pods of one node, as collect_gpu_view asks for them when few nodes are chosen.
std::string node_pods_selector(const std::string& node) {
  return "fieldSelector=spec.nodeName%3D" + node + "%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed";
}

// A node read by its name, as collect_gpu_view reads the nodes named on its command line.
std::string node_name_selector(const std::string& node) { return "fieldSelector=metadata.name%3D" + node; }

json list_of(json items) { return {{"metadata", {{"resourceVersion", "7"}}}, {"items", std::move(items)}}; }

// A whole, healthy probe of a node with two RTX 2070s (the telegraf capture, driver 590.44.01).
std::string healthy_2070_transcript() {
  const std::string list =
      "GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\n"
      "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\n";
  return cat(testing::probe_start(),
             probe_step("all", fixture("nvidia-smi-xml/telegraf__2x-rtx-2070__590.44.01__v13.xml"), "", 0),
             probe_step("list", list, "", 0), testing::probe_done());
}

struct Fleet {
  testing::FakeClient fc;
  testing::FakeSshRunner ssh;
  Fleet() {
    std::vector<json> nodes = {node("gpu-a", "10.0.0.1", 2), node("gpu-b", "10.0.0.2", 2), node("gpu-c", "", 2),
                               node("cpu-0", "10.0.0.9", 0)};
    fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of(nodes).dump()));
    for (const auto& n : nodes) {
      std::string name = n["metadata"]["name"];
      fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of({n}).dump()), node_name_selector(name));
    }
    fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of(json::array()).dump()), node_name_selector("gpu-zz"));
    // Few nodes are chosen: each one's pods are read on their own.
    fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of({gpu_pod("gpu-a", 1)}).dump()),
                node_pods_selector("gpu-a"));
    for (const char* name : {"gpu-b", "gpu-c", "cpu-0"})
      fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of(json::array()).dump()), node_pods_selector(name));
    ssh.on("10.0.0.1", testing::remote_ran(healthy_2070_transcript()));
    ssh.on("10.0.0.2", testing::ssh_failed("ssh: connect to host 10.0.0.2 port 22: Connection timed out\n"));
    fc.fake->serves_no_dra();
  }
};

}  // namespace

TEST_CASE("collect_gpu_view probes every GPU node once through the runner and joins Kubernetes' view", "[gpus][ssh]") {
  Fleet f;
  ops::GpuViewOptions options;
  ops::ProbeOptions probe;
  probe.fanout = 7;
  std::vector<std::pair<std::size_t, std::size_t>> progress;
  options.on_progress = [&](std::size_t done, std::size_t total) { progress.emplace_back(done, total); };
  auto view = ops::collect_gpu_view(*f.fc.client, *ops::make_ssh_source(f.ssh, {}, probe), options);
  REQUIRE(view);

  // One fan-out for the fleet, the fixed probe, only nodes with an address, never the CPU node.
  REQUIRE(f.ssh.calls().size() == 1);
  CHECK(f.ssh.calls()[0].addresses == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  CHECK(f.ssh.calls()[0].remote_command == gpu::probe_remote_command());
  CHECK(f.ssh.calls()[0].max_parallel == 7);
  CHECK(f.ssh.unexpected().empty());
  CHECK(progress.back() == std::make_pair(std::size_t{3}, std::size_t{3}));

  REQUIRE(view->nodes.size() == 3);
  const auto& a = view->nodes[0];
  CHECK(a.kube.name == "gpu-a");
  CHECK(a.probe.outcome == "ok");
  CHECK(a.probe.address == "10.0.0.1");
  REQUIRE(a.probe.report);
  CHECK(a.probe.report->gpus.size() == 2);
  REQUIRE(a.pods.size() == 1);
  CHECK(a.pods[0].resources.at("nvidia.com/gpu") == 1);
  CHECK(view->nodes[1].probe.outcome == "unreachable");
  CHECK(view->nodes[2].probe.outcome == "no_address");
  CHECK(view->nodes[2].probe.message.find("InternalIP") != std::string::npos);

  REQUIRE(view->failures.size() == 2);
  CHECK(view->failures[0].nodes.size() == 1);

  json out = ops::to_json(*view);
  CHECK(out["kind"] == "GPUList");
  CHECK(out["items"][0]["driverVersion"] == "590.44.01");
  CHECK(out["items"][0]["kubernetes"]["used"] == 1);
  CHECK(out["items"][1]["outcome"] == "unreachable");

  // Only the chosen nodes' pods were asked for, never the cluster's.
  std::vector<std::string> pod_queries;
  for (const auto& r : f.fc.fake->requests())
    if (r.url.find("/api/v1/pods?") != std::string::npos) pod_queries.push_back(r.url.substr(r.url.find('?') + 1));
  CHECK(pod_queries.size() == 3);
  CHECK(f.fc.fake->unexpected().empty());

  auto live = ops::summarize(a.probe);
  CHECK(live.outcome == "ok");
  CHECK(live.driver_version == "590.44.01");
  CHECK(live.gpus_answered == 2);
}

TEST_CASE("collect_gpu_view refuses names that are not nodes before reaching any host", "[gpus][ssh]") {
  Fleet f;
  ops::GpuViewOptions options;
  options.names = {"gpu-a", "gpu-zz"};
  auto view = ops::collect_gpu_view(*f.fc.client, *ops::make_ssh_source(f.ssh, {}, {}), options);
  REQUIRE_FALSE(view);
  CHECK(view.error().message.find("no such node: gpu-zz") != std::string::npos);
  CHECK(f.ssh.calls().empty());
}

TEST_CASE("collect_gpu_view fails on a refused pod list before reaching any host", "[gpus][ssh]") {
  testing::FakeClient fc;
  testing::FakeSshRunner ssh;
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of({node("gpu-a", "10.0.0.1", 2)}).dump()));
  fc.fake->on("GET", "/api/v1/pods",
              json_answer(403, R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,)"
                               R"("message":"pods is forbidden: User \"ops\" cannot list resource \"pods\""})"),
              node_pods_selector("gpu-a"));
  auto view = ops::collect_gpu_view(*fc.client, *ops::make_ssh_source(ssh, {}, {}), ops::GpuViewOptions{});
  REQUIRE_FALSE(view);
  CHECK(view.error().message.find("forbidden") != std::string::npos);
  CHECK(ssh.calls().empty());
}

TEST_CASE("more chosen nodes than per-node lists are worth: one list of bound pods, kept only for them",
          "[gpus][ssh]") {
  testing::FakeClient fc;
  fc.fake->serves_no_dra();
  testing::FakeSshRunner ssh;
  json nodes = json::array();
  json pods = json::array();
  ops::GpuViewOptions options;
  for (std::size_t i = 0; i <= ops::kPerNodePodListMax + 1; ++i) {
    std::string name = fmt::format("gpu-{:02}", i);
    nodes.push_back(node(name, "", 8));
    pods.push_back(gpu_pod(name, 2));
    if (i > 0) options.names.push_back(name);  // all but gpu-00
  }
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of(nodes).dump()));
  // The cluster's size: 34 nodes, of which 33 are chosen, more than a quarter.
  json first = list_of({nodes[0]});
  first["metadata"]["remainingItemCount"] = nodes.size() - 1;
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, first.dump()), "limit=1");
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of(pods).dump()), kPodSelector);
  auto view = ops::collect_gpu_view(*fc.client, *ops::make_ssh_source(ssh, {}, {}), options);
  REQUIRE(view);
  CHECK(fc.fake->unexpected().empty());
  REQUIRE(view->nodes.size() == ops::kPerNodePodListMax + 1);
  for (const auto& v : view->nodes) {
    CHECK(v.kube.name != "gpu-00");
    REQUIRE(v.pods.size() == 1);
    CHECK(v.kube.gpus.used == 2);
  }
}

TEST_CASE("a small share of a large cluster is read node by node, whatever the number of nodes", "[gpus][ssh]") {
  testing::FakeClient fc;
  fc.fake->serves_no_dra();
  testing::FakeSshRunner ssh;
  json nodes = json::array();
  ops::GpuViewOptions options;
  options.label_selector = "pool=a";
  const std::size_t chosen = ops::kPerNodePodListMax + 8;
  for (std::size_t i = 0; i < chosen; ++i) {
    std::string name = fmt::format("gpu-{:02}", i);
    nodes.push_back(node(name, "", 8));
    json pods = (i % 2 == 0) ? json::array({gpu_pod(name, 1)}) : json::array();
    fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of(pods).dump()), node_pods_selector(name));
  }
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of(nodes).dump()), "labelSelector=pool%3Da");
  json first = list_of({nodes[0]});
  first["metadata"]["remainingItemCount"] = 4 * chosen;  // the selector chose under a quarter
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, first.dump()), "limit=1");
  auto view = ops::collect_gpu_view(*fc.client, *ops::make_ssh_source(ssh, {}, {}), options);
  REQUIRE(view);
  CHECK(fc.fake->unexpected().empty());
  REQUIRE(view->nodes.size() == chosen);
  for (std::size_t i = 0; i < chosen; ++i) {
    INFO(view->nodes[i].kube.name);
    CHECK(view->nodes[i].pods.size() == (i % 2 == 0 ? 1u : 0u));
  }
}

TEST_CASE("a named non-GPU node is probed all the same, and a host's broken output stays that host's", "[gpus][ssh]") {
  Fleet f;
  f.ssh.on("10.0.0.9", testing::remote_ran("Welcome to cpu-0\n", 0));
  ops::GpuViewOptions options;
  options.names = {"cpu-0", "gpu-a"};
  auto view = ops::collect_gpu_view(*f.fc.client, *ops::make_ssh_source(f.ssh, {}, {}), options);
  REQUIRE(view);
  REQUIRE(f.ssh.calls().size() == 1);
  CHECK(f.ssh.calls()[0].addresses == std::vector<std::string>{"10.0.0.9", "10.0.0.1"});
  REQUIRE(view->nodes.size() == 2);
  CHECK(view->nodes[0].kube.name == "cpu-0");
  CHECK(view->nodes[0].probe.outcome != "ok");
  CHECK(view->nodes[1].probe.outcome == "ok");

  // Named nodes are read by their names, never the whole node list.
  int node_reads = 0;
  for (const auto& r : f.fc.fake->requests()) {
    if (r.url.find("/api/v1/nodes?") == std::string::npos) continue;
    ++node_reads;
    CHECK(r.url.find("fieldSelector=metadata.name%3D") != std::string::npos);
  }
  CHECK(node_reads == 2);
}

TEST_CASE("gpuctl gpus and nodes --live reach the nodes through the environment's runner with the flags' settings",
          "[gpus][ssh][cli]") {
  testing::CliHarness cli;
  cli.fake().serves_no_dra();
  cli.fake().on("GET", "/api/v1/nodes", json_answer(200, list_of({node("gpu-a", "10.0.0.1", 2)}).dump()));
  cli.fake().on("GET", "/api/v1/pods", json_answer(200, list_of(json::array()).dump()), node_pods_selector("gpu-a"));
  cli.ssh().on("10.0.0.1", testing::remote_ran(healthy_2070_transcript()));
  auto r = cli.run(
      {"gpus", "-o", "json", "--ssh-user", "ops", "--ssh-port", "2222", "--ssh-timeout", "9s", "--fanout", "3"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json out = json::parse(r.out);
  CHECK(out["items"][0]["outcome"] == "ok");
  REQUIRE(cli.ssh_settings().size() == 1);
  CHECK(cli.ssh_settings()[0].user == "ops");
  CHECK(cli.ssh_settings()[0].port == 2222);
  CHECK(cli.ssh_settings()[0].deadline == std::chrono::seconds(9));
  REQUIRE(cli.ssh().calls().size() == 1);
  CHECK(cli.ssh().calls()[0].max_parallel == 3);

  // nodes --live: the same view, read once, through the same seam.
  cli.fake().on("GET", "/api/v1/nodes", json_answer(200, list_of({node("gpu-a", "10.0.0.1", 2)}).dump()));
  cli.fake().on("GET", "/api/v1/pods", json_answer(200, list_of(json::array()).dump()), kPodSelector);
  cli.fake().on("GET", "/api/v1/nodes", json_answer(200, list_of({node("gpu-a", "10.0.0.1", 2)}).dump()));
  cli.fake().on("GET", "/api/v1/pods", json_answer(200, list_of(json::array()).dump()), node_pods_selector("gpu-a"));
  auto live = cli.run({"nodes", "--live", "-o", "json"});
  INFO(live.err);
  REQUIRE(live.exit_code == 0);
  CHECK(json::parse(live.out)["items"][0]["live"]["driverVersion"] == "590.44.01");
  CHECK(cli.ssh().calls().size() == 2);
}
