// gpuctl diagnose through the CLI: the exit-code contract (0, 4, 5, 2), --fail-on, --list-checks
// and the JSON schema, over recorded lists.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/cli_harness.hpp"
#include "fakes/test_support.hpp"

using gpuctl::testing::json_answer;
using gpuctl::testing::dx::h100_node;
using gpuctl::testing::dx::list_of;
using nlohmann::json;

namespace {

// Every read of a whole healthy cluster (but for `nodes`): the device plugin of the GPU Operator
// with one Ready pod and its log, a DCGM exporter, the metrics API, a server at v1.36.3 without DRA.
void answer(gpuctl::testing::CliHarness& cli, json nodes, bool pods_forbidden = false) {
  auto& fake = cli.fake();
  fake.on("GET", "/api/v1/nodes", json_answer(200, list_of(std::move(nodes))));
  if (pods_forbidden) {
    fake.on("GET", "/api/v1/pods",
            json_answer(403, R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,)"
                             R"("message":"pods is forbidden: User \"ops\" cannot list resource \"pods\""})"));
  } else {
    fake.on("GET", "/api/v1/pods", json_answer(200, list_of(json::array())));
  }
  for (const char* path : {"/api/v1/events", "/api/v1/persistentvolumeclaims", "/api/v1/persistentvolumes",
                           "/apis/storage.k8s.io/v1/storageclasses", "/api/v1/resourcequotas", "/api/v1/limitranges",
                           "/apis/batch/v1/jobs"}) {
    fake.on("GET", path, json_answer(200, list_of(json::array())));
  }
  json plugin = {{"metadata",
                  {{"name", "nvidia-device-plugin-daemonset"},
                   {"namespace", "gpu-operator"},
                   {"labels", {{"app", "nvidia-device-plugin-daemonset"}}}}},
                 {"spec", {{"selector", {{"matchLabels", {{"app", "nvidia-device-plugin-daemonset"}}}}}}}};
  json dcgm = {{"metadata", {{"name", "nvidia-dcgm-exporter"}, {"namespace", "gpu-operator"}}}};
  fake.on("GET", "/apis/apps/v1/daemonsets", json_answer(200, list_of({plugin, dcgm})));
  json plugin_pod = {
      {"metadata",
       {{"name", "nvidia-device-plugin-daemonset-abcde"},
        {"namespace", "gpu-operator"},
        {"ownerReferences", json::array({{{"kind", "DaemonSet"}, {"name", "nvidia-device-plugin-daemonset"}}})}}},
      {"spec", {{"nodeName", "gpu-0"}, {"containers", json::array({{{"name", "nvidia-device-plugin"}}})}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})},
        {"containerStatuses", json::array({{{"name", "nvidia-device-plugin"}, {"restartCount", 0}}})}}}};
  fake.on("GET", "/api/v1/namespaces/gpu-operator/pods", json_answer(200, list_of({plugin_pod})),
          "labelSelector=app%3Dnvidia-device-plugin-daemonset");
  fake.on("GET", "/api/v1/namespaces/gpu-operator/pods/nvidia-device-plugin-daemonset-abcde/log",
          gpuctl::testing::FakeAnswer{
              200,
              "2026-12-06T11:00:00Z Starting to serve on /var/lib/kubelet/device-plugins/nvidia.sock\n",
              {{"content-type", "text/plain"}},
              false});
  fake.on("GET", "/version", json_answer(200, R"({"major":"1","minor":"36","gitVersion":"v1.36.3"})"));
  fake.on("GET", "/apis", json_answer(200, R"({"kind":"APIGroupList","groups":[{"name":"metrics.k8s.io"}]})"));
  // A cluster without DRA (resource.k8s.io/v1 not served): the DRA checks have nothing to say.
  fake.on("GET", "/apis/resource.k8s.io/v1",
          json_answer(404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"));
}

}  // namespace

TEST_CASE("gpuctl diagnose exits 0 on a healthy fleet, 4 on a finding at --fail-on, 5 when a check could not run",
          "[diagnose][cli]") {
  gpuctl::testing::CliHarness cli;
  answer(cli, {h100_node("gpu-0", 8, 8)});
  auto healthy = cli.run({"diagnose", "--no-ssh"});
  INFO(healthy.err);
  CHECK(healthy.exit_code == 0);  // the node side skipped on request: not exit 5
  CHECK(healthy.err.find("No problems found by 28 check(s).") != std::string::npos);
  CHECK(healthy.err.find("13 node-side check(s) skipped (--no-ssh): node-unreachable,driver-broken,") !=
        std::string::npos);
  CHECK(cli.ssh().calls().empty());

  answer(cli, {h100_node("gpu-0", 8, 6)});
  auto sick = cli.run({"diagnose", "--no-ssh"});
  CHECK(sick.exit_code == 4);
  CHECK(sick.out.find("gpu-0: 2 of 8 nvidia.com/gpu unhealthy (capacity 8, allocatable 6)") != std::string::npos);
  CHECK(sick.out.find("gpuctl gpus gpu-0") != std::string::npos);

  // The finding is an error: below --fail-on critical, and never with --fail-on never.
  answer(cli, {h100_node("gpu-0", 8, 6)});
  CHECK(cli.run({"diagnose", "--no-ssh", "--fail-on", "critical"}).exit_code == 0);

  // pods forbidden: node-not-ready cannot run; nothing else is found.
  answer(cli, {h100_node("gpu-0", 8, 8)}, true);
  auto partial = cli.run({"diagnose", "--no-ssh"});
  INFO(partial.err);
  CHECK(partial.exit_code == 5);
  CHECK(partial.err.find("No problems found by 15 check(s); 13 could not run.") != std::string::npos);
  CHECK(partial.err.find("check node-not-ready skipped: could not list pods: forbidden: pods is forbidden") !=
        std::string::npos);

  // Findings win over an incomplete run.
  answer(cli, {h100_node("gpu-0", 8, 6)}, true);
  CHECK(cli.run({"diagnose", "--no-ssh"}).exit_code == 4);
}

TEST_CASE("gpuctl diagnose -o json, --list-checks and bad flags", "[diagnose][cli]") {
  gpuctl::testing::CliHarness cli;
  answer(cli, {h100_node("gpu-0", 8, 7)});
  auto r = cli.run({"diagnose", "-o", "json", "--check", "gpu-unhealthy-devices,node-pressure"});
  INFO(r.err);
  REQUIRE(r.exit_code == 4);
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "DiagnoseReport");
  CHECK(doc["checks"].size() == 2);
  CHECK(doc["summary"]["error"] == 1);
  CHECK(doc["summary"]["checksFailed"] == 1);
  CHECK(doc["findings"][0]["object"] == json{{"kind", "Node"}, {"namespace", ""}, {"name", "gpu-0"}});
  CHECK(doc["findings"][0]["evidence"][0]["text"] == "capacity[nvidia.com/gpu]=8 allocatable[nvidia.com/gpu]=7");

  auto listed = cli.run({"diagnose", "--list-checks", "-o", "json"});
  REQUIRE(listed.exit_code == 0);
  json checks = json::parse(listed.out);
  CHECK(checks["kind"] == "DiagnoseCheckList");
  CHECK(checks["items"][0]["id"] == "node-unreachable");  // the node side first, in layer order
  CHECK(checks["items"][0]["needs"] == json::array({"nodes", "the GPU nodes over ssh"}));
  CHECK(checks["items"].size() == 41);

  auto unknown = cli.run({"diagnose", "--skip", "node-pressur"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("no check named node-pressur") != std::string::npos);
  CHECK(cli.run({"diagnose", "--fail-on", "fatal"}).exit_code == 2);
}

TEST_CASE("gpuctl diagnose costs one read of each list, whatever the number of checks (README's cost statement)",
          "[diagnose][cli]") {
  gpuctl::testing::CliHarness cli;
  answer(cli, {h100_node("gpu-0", 8, 8)});
  auto all = cli.run({"diagnose", "--no-ssh"});
  INFO(all.err);
  REQUIRE(all.exit_code == 0);
  // 10 lists, /version, /apis, the plugin DaemonSet's pods and its one container's log, and
  // DRA's discovery (resource.k8s.io/v1 is not served: nothing more to read).
  CHECK(cli.fake().requests().size() == 15);
  CHECK(cli.fake().unexpected().empty());

  // One check reads only what it needs: device-plugin-log-errors reads the nodes (for -l), the
  // DaemonSets, the plugin's pods and its log.
  gpuctl::testing::CliHarness one;
  answer(one, {h100_node("gpu-0", 8, 8)});
  auto logs = one.run({"diagnose", "--check", "device-plugin-log-errors"});
  INFO(logs.err);
  REQUIRE(logs.exit_code == 0);
  CHECK(one.fake().requests().size() == 4);
}

TEST_CASE("gpuctl diagnose refuses bad windows, thresholds and selectors before any request", "[diagnose][cli]") {
  gpuctl::testing::CliHarness cli;
  for (std::vector<std::string> args : {std::vector<std::string>{"diagnose", "--since", "0"},
                                        {"diagnose", "--since", "an hour"},
                                        {"diagnose", "--restart-threshold", "0"},
                                        {"diagnose", "--jobs-older-than", "-1h"},
                                        {"diagnose", "--device-plugin-selector", "app in (a"}}) {
    auto r = cli.run(args);
    INFO(args.back() << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
  }
  CHECK(cli.fake().requests().empty());
}
