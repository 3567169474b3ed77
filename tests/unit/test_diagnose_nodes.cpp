// diagnose's check table and its node checks, over a real GPU node (tests/fixtures/k8s-nodes,
// rke2 with an A16 vGPU) made to fail one way at a time.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/util/time.hpp"

using nlohmann::json;
using namespace gpuctl::ops::diagnose;

namespace {

json healthy_gpu_node() {
  return json::parse(gpuctl::testing::fixture("k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json"))["items"][0];
}

json& condition(json& node, const std::string& type) {
  for (auto& c : node["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  node["status"]["conditions"].push_back({{"type", type}});
  return node["status"]["conditions"].back();
}

json gpu_pod(const std::string& node, const std::string& name, int gpus, const std::string& phase = "Running") {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             json::array({{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}},
          {"status", {{"phase", phase}}}};
}

Snapshot snapshot_of(std::vector<json> nodes, std::vector<json> pods = {}) {
  Snapshot s;
  s.now = *gpuctl::util::parse_rfc3339("2026-12-06T12:00:00Z");
  s.lists[Source::nodes] = std::move(nodes);
  s.lists[Source::pods] = std::move(pods);
  return s;
}

Report run_all(const Snapshot& s) { return run_checks(s, *select_checks({})); }

}  // namespace

TEST_CASE("diagnose: a healthy GPU node and CPU nodes make every check pass", "[diagnose]") {
  auto cpu = json::parse(gpuctl::testing::fixture("k8s-nodes/edgecloud__aks-3-nodes-no-gpu__nodelist.json"))["items"];
  std::vector<json> nodes(cpu.begin(), cpu.end());
  nodes.push_back(healthy_gpu_node());
  Snapshot s = snapshot_of(nodes, {gpu_pod("nori", "train-0", 1)});
  // The rest of a healthy cluster: NVIDIA's Helm-chart device plugin with a Ready pod on nori,
  // the DCGM exporter, the metrics API, and an API server the rke2 kubelet (v1.31.6) may talk to.
  s.lists[Source::daemon_sets] = {{{"metadata",
                                    {{"name", "nvdp-nvidia-device-plugin"},
                                     {"namespace", "nvidia"},
                                     {"labels", {{"app.kubernetes.io/name", "nvidia-device-plugin"}}}}}},
                                  {{"metadata", {{"name", "dcgm-exporter"}, {"namespace", "monitoring"}}}}};
  json plugin_pod = gpu_pod("nori", "nvdp-nvidia-device-plugin-x2x9z", 0);
  plugin_pod["metadata"]["namespace"] = "nvidia";
  plugin_pod["metadata"]["ownerReferences"] =
      json::array({{{"kind", "DaemonSet"}, {"name", "nvdp-nvidia-device-plugin"}}});
  plugin_pod["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  s.lists[Source::plugin_pods] = {plugin_pod};
  s.lists[Source::server_version] = {{{"gitVersion", "v1.32.2"}}};
  s.lists[Source::api_groups] = {{{"groups", json::array({{{"name", "metrics.k8s.io"}}})}}};
  Report r = run_all(s);
  for (const auto& f : r.findings) FAIL_CHECK(f.check + ": " + f.summary);
  REQUIRE(r.checks.size() == checks().size());
  for (const auto& c : r.checks) {
    INFO(c.id);
    CHECK(c.status == CheckStatus::pass);
  }
  REQUIRE(r.verdicts.size() == 1);
  CHECK(r.verdicts[0].node == "nori");
  CHECK_FALSE(r.verdicts[0].layer.has_value());
}

TEST_CASE("diagnose: node-not-ready names how long and the GPU pods stranded there", "[diagnose]") {
  json node = healthy_gpu_node();
  condition(node, "Ready") = {{"type", "Ready"},
                              {"status", "Unknown"},
                              {"reason", "NodeStatusUnknown"},
                              {"message", "Kubelet stopped posting node status."},
                              {"lastTransitionTime", "2026-12-06T09:47:00Z"}};
  auto found = check_node_not_ready(snapshot_of(
      {node}, {gpu_pod("nori", "train-0", 1), gpu_pod("nori", "done", 1, "Succeeded"), gpu_pod("other", "x", 1)}));
  REQUIRE(found.size() == 1);
  CHECK(found[0].severity == Severity::critical);
  CHECK(found[0].node == "nori");
  CHECK(found[0].summary == "nori is Unknown for 133m (NodeStatusUnknown); 1 GPU pod(s) stranded there: ml/train-0");
  REQUIRE(found[0].evidence.size() == 1);
  CHECK(found[0].evidence[0].text == "Ready=Unknown reason=NodeStatusUnknown: Kubelet stopped posting node status.");
  CHECK(found[0].evidence[0].time == "2026-12-06T09:47:00Z");
  CHECK(found[0].remedy[0] == "kubectl describe node nori");

  // A node without any Ready condition has never reported.
  node["status"]["conditions"] = json::array();
  found = check_node_not_ready(snapshot_of({node}));
  REQUIRE(found.size() == 1);
  CHECK(found[0].summary == "nori is Unknown");
}

TEST_CASE("diagnose: network and pressure conditions of GPU nodes, never of CPU nodes", "[diagnose]") {
  json node = healthy_gpu_node();
  condition(node, "NetworkUnavailable") = {{"type", "NetworkUnavailable"},
                                           {"status", "True"},
                                           {"reason", "NoRouteCreated"},
                                           {"lastTransitionTime", "2026-12-06T11:30:00Z"}};
  condition(node, "DiskPressure")["status"] = "True";
  condition(node, "DiskPressure")["lastTransitionTime"] = "2026-12-06T11:55:00Z";
  json cpu =
      json::parse(gpuctl::testing::fixture("k8s-nodes/edgecloud__aks-3-nodes-no-gpu__nodelist.json"))["items"][0];
  condition(cpu, "DiskPressure")["status"] = "True";
  Snapshot s = snapshot_of({node, cpu});

  auto network = check_node_network_unavailable(s);
  REQUIRE(network.size() == 1);
  CHECK(network[0].summary ==
        "nori has no working pod network for 30m (NoRouteCreated); pods placed there hang in ContainerCreating");
  auto pressure = check_node_pressure(s);
  REQUIRE(pressure.size() == 1);
  CHECK(pressure[0].summary == "nori is under DiskPressure for 5m: the kubelet evicts pods and admits no new ones");
  CHECK(pressure[0].severity == Severity::warning);
}

TEST_CASE("diagnose: device-plugin-missing and gpu-unhealthy-devices read what the plugin registered", "[diagnose]") {
  json unregistered = healthy_gpu_node();
  unregistered["metadata"]["name"] = "gpu-new";
  unregistered["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A16";
  unregistered["status"]["capacity"].erase("nvidia.com/gpu");
  unregistered["status"]["allocatable"].erase("nvidia.com/gpu");
  json sick = healthy_gpu_node();
  sick["status"]["capacity"]["nvidia.com/gpu"] = "8";
  sick["status"]["allocatable"]["nvidia.com/gpu"] = "6";
  auto node_checks = select_checks({{"node-not-ready", "device-plugin-missing", "gpu-unhealthy-devices"}, {}});
  Report r = run_checks(snapshot_of({unregistered, sick}), *node_checks);

  REQUIRE(r.findings.size() == 2);
  // Critical first.
  CHECK(r.findings[0].check == "device-plugin-missing");
  CHECK(r.findings[0].node == "gpu-new");
  CHECK(r.findings[0].summary.find("labelled as a GPU node (nvidia.com/gpu.product=NVIDIA-A16)") != std::string::npos);
  CHECK(r.findings[1].check == "gpu-unhealthy-devices");
  CHECK(r.findings[1].summary == "nori: 2 of 8 nvidia.com/gpu unhealthy (capacity 8, allocatable 6)");
  CHECK(r.findings[1].remedy[0] == "gpuctl gpus nori");
  auto status = [&](std::string_view id) {
    return std::find_if(r.checks.begin(), r.checks.end(), [&](const CheckRun& c) { return c.id == id; })->status;
  };
  CHECK(status("device-plugin-missing") == CheckStatus::fail);
  CHECK(status("gpu-unhealthy-devices") == CheckStatus::fail);
  CHECK(status("node-not-ready") == CheckStatus::pass);
  // Each GPU node's verdict: the first failing layer, in the order an admin rules them out.
  REQUIRE(r.verdicts.size() == 2);
  CHECK(r.verdicts[0].node == "gpu-new");
  CHECK(r.verdicts[0].layer == Layer::gpus_registered);
  CHECK(r.verdicts[1].node == "nori");
  CHECK(r.verdicts[1].layer == Layer::gpus_healthy);
  CHECK(r.verdicts[1].check == "gpu-unhealthy-devices");
}

TEST_CASE("diagnose: a list that could not be read skips the checks that need it, and only those", "[diagnose]") {
  Snapshot s = snapshot_of({healthy_gpu_node()});
  s.lists.erase(Source::pods);
  s.unavailable[Source::pods] = "pods is forbidden: User \"ops\" cannot list resource \"pods\"";
  Report r = run_all(s);
  for (const auto& c : r.checks) {
    INFO(c.id);
    const auto& needs = find_check(c.id)->needs;
    if (std::find(needs.begin(), needs.end(), Source::pods) != needs.end()) {
      CHECK(c.status == CheckStatus::skipped);
      CHECK(c.skipped_because == "could not list pods: pods is forbidden: User \"ops\" cannot list resource \"pods\"");
    } else {
      CHECK(c.status != CheckStatus::skipped);
    }
  }
  auto skipped = std::count_if(r.checks.begin(), r.checks.end(),
                               [](const CheckRun& c) { return c.status == CheckStatus::skipped; });
  CHECK(skipped == 14);  // 13 API-side checks (dra-claim-unallocated among them) and gpu-idle-allocated
}

TEST_CASE("diagnose: --check and --skip select by id and refuse unknown ids", "[diagnose]") {
  auto only = select_checks({{"node-pressure", "node-not-ready"}, {}});
  REQUIRE(only);
  REQUIRE(only->size() == 2);
  CHECK((*only)[0]->id == "node-not-ready");  // table order, not the order given
  auto skipped = select_checks({{}, {"node-pressure"}});
  REQUIRE(skipped);
  CHECK(skipped->size() == checks().size() - 1);
  auto bad = select_checks({{"node-pressur"}, {}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == gpuctl::Errc::invalid_argument);
  CHECK(bad.error().message == "no check named node-pressur (list them with: gpuctl diagnose --list-checks)");
  CHECK(parse_severity("error") == Severity::error);
  CHECK_FALSE(parse_severity("fatal"));
  for (const auto& c : checks()) {
    INFO(c.id);
    CHECK(find_check(c.id) == &c);
    CHECK_FALSE(c.needs.empty());
  }
}
