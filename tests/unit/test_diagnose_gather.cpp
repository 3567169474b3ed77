// diagnose's gathering pass through FakeTransport: each list once, a refused list skips only
// its checks, and what stops every list stops diagnose.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/dra_objects.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"

using gpuctl::testing::dx::list_of;
using nlohmann::json;
using namespace gpuctl::ops::diagnose;
using gpuctl::testing::FakeAnswer;
using gpuctl::testing::json_answer;

namespace {

const char* kForbidden =
    R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,)"
    R"("message":"events is forbidden: User \"ops\" cannot list resource \"events\" in API group \"\" at the cluster scope"})";

}  // namespace

TEST_CASE("diagnose::gather reads each needed list once; a refused one is named, the rest are read", "[diagnose]") {
  gpuctl::testing::FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes",
              json_answer(200, list_of({{{"metadata", {{"name", "gpu-0"}}}, {"status", json::object()}}})),
              "labelSelector=pool%3Da");
  fc.fake->on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, list_of(json::array())));
  fc.fake->on("GET", "/api/v1/namespaces/ml/events", json_answer(403, kForbidden));
  GatherOptions options{{Source::nodes, Source::pods, Source::events}, "pool=a", "ml", {}};
  auto snapshot = gather(*fc.client, options);
  REQUIRE(snapshot);
  CHECK(fc.fake->unexpected().empty());
  CHECK(fc.fake->requests().size() == 3);
  REQUIRE(snapshot->list(Source::nodes).size() == 1);
  CHECK(snapshot->list(Source::nodes)[0]["metadata"]["name"] == "gpu-0");
  CHECK(snapshot->lists.contains(Source::pods));
  CHECK_FALSE(snapshot->lists.contains(Source::events));
  REQUIRE(snapshot->unavailable.contains(Source::events));
  CHECK(snapshot->unavailable.at(Source::events).find("events is forbidden") != std::string::npos);
  CHECK(snapshot->list(Source::jobs).empty());  // never asked for
}

TEST_CASE("diagnose::gather stops when the cluster refuses the credentials", "[diagnose]") {
  gpuctl::testing::FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes",
              json_answer(401, R"({"kind":"Status","status":"Failure","reason":"Unauthorized","code":401,)"
                               R"("message":"Unauthorized"})"));
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of(json::array())));
  auto snapshot = gather(*fc.client, {{Source::nodes, Source::pods}, "", "", {}});
  REQUIRE_FALSE(snapshot);
  CHECK(snapshot.error().is_unauthorized());
}

TEST_CASE("diagnose::needed_sources is the union of the selected checks' reads", "[diagnose]") {
  auto all = select_checks({});
  REQUIRE(all);
  CHECK(needed_sources(*all).size() == 17);  // every source: each check adds its own, each read once
  // A derived read brings what it is read from: plugin logs need the plugin's pods and DaemonSets.
  auto logs = select_checks({{"device-plugin-log-errors"}, {}});
  REQUIRE(logs);
  CHECK(needed_sources(*logs) ==
        std::set<Source>{Source::nodes, Source::daemon_sets, Source::plugin_pods, Source::plugin_logs});
  // Optional reads are read too (gpu-pods-pending names unbound claims when PVCs can be read).
  auto pending = select_checks({{"gpu-pods-pending"}, {}});
  REQUIRE(pending);
  CHECK(needed_sources(*pending) ==
        std::set<Source>{Source::nodes, Source::pods, Source::events, Source::pvcs, Source::dra});
  auto network = select_checks({{"node-network-unavailable"}, {}});
  REQUIRE(network);
  CHECK(needed_sources(*network) == std::set<Source>{Source::nodes});
}

namespace {

using gpuctl::testing::FakeClient;
namespace dra = gpuctl::testing::dra;

const char* kResourceV1 =
    R"({"kind":"APIResourceList","groupVersion":"resource.k8s.io/v1","resources":[{"name":"resourceslices"},)"
    R"({"name":"resourceclaims"},{"name":"deviceclasses"}]})";

// A 1.36 server: resource.k8s.io/v1 serves the GA kinds, v1beta2 the DeviceTaintRules.
void serve_resource_api(FakeClient& fc) {
  auto& fake = *fc.fake;
  fake.on("GET", "/apis/resource.k8s.io/v1", json_answer(200, kResourceV1));
  fake.on("GET", "/apis/resource.k8s.io",
          json_answer(200, R"({"kind":"APIGroup","name":"resource.k8s.io","versions":[)"
                           R"({"groupVersion":"resource.k8s.io/v1","version":"v1"},)"
                           R"({"groupVersion":"resource.k8s.io/v1beta2","version":"v1beta2"}]})"));
  fake.on("GET", "/apis/resource.k8s.io/v1beta2",
          json_answer(200, R"({"kind":"APIResourceList","groupVersion":"resource.k8s.io/v1beta2",)"
                           R"("resources":[{"name":"devicetaintrules"}]})"));
}

// gpu-a with two A100s, gpu-0 tainted by the driver for Xid 79 and held by ml/train's claim; a
// pending pod ml/big whose claim (from a template) asks for 16.
void answer_dra_lists(FakeClient& fc, FakeAnswer claims) {
  auto& fake = *fc.fake;
  json xid = dra::device_taint("gpu.nvidia.com/xid", "79", "NoSchedule");
  json slice = dra::slice("gpu-a", {dra::gpu_device("gpu-0", "GPU-0a", "NVIDIA A100-SXM4-80GB", json::array({xid})),
                                    dra::gpu_device("gpu-1", "GPU-1a")});
  fake.on("GET", "/apis/resource.k8s.io/v1/resourceslices", json_answer(200, list_of({slice})));
  fake.on("GET", "/apis/resource.k8s.io/v1/resourceclaims", std::move(claims));
  fake.on("GET", "/apis/resource.k8s.io/v1/deviceclasses",
          json_answer(200, list_of({dra::device_class("gpu.nvidia.com", "gpu", "nvidia.com/gpu")})));
  fake.on("GET", "/apis/resource.k8s.io/v1beta2/devicetaintrules", json_answer(200, list_of(json::array())));
}

json claims_list() {
  json big = dra::claim("ml", "big-gpus-x7k9m", "gpu-a", json::array(), "big", false, 16);
  big["status"] = json::object();  // made for the pending pod, never allocated
  return list_of({dra::claim("ml", "train-gpus", "gpu-a", {"gpu-0"}, "train"), big});
}

json pending_pod() {
  json p =
      gpuctl::testing::dx::unschedulable_pod("ml", "big", 0, "0/1 nodes are available: 1 cannot allocate all claims.");
  p["spec"]["resourceClaims"] = json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", "gpus16"}}});
  p["status"]["resourceClaimStatuses"] = json::array({{{"name", "gpus"}, {"resourceClaimName", "big-gpus-x7k9m"}}});
  // What a DRA-backed nvidia.com/gpu request would name: here the same claim, found once.
  p["status"]["extendedResourceClaimStatus"] = {{"resourceClaimName", "big-gpus-x7k9m"}};
  return p;
}

// The core lists the DRA checks read beside DRA: pods, nodes (for -l) and events.
void answer_core(FakeClient& fc, json pods, json nodes) {
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of(std::move(pods))));
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of(std::move(nodes))));
  fc.fake->on("GET", "/api/v1/events", json_answer(200, list_of(json::array())));
}

std::vector<const Check*> dra_checks() {
  auto selected = select_checks({{"dra-device-tainted", "dra-pool-incomplete", "dra-claim-unallocated",
                                  "dra-class-matches-nothing", "dra-double-advertised"},
                                 {}});
  REQUIRE(selected);
  return *selected;
}

const Finding* finding_of(const Report& r, std::string_view check) {
  for (const auto& f : r.findings) {
    if (f.check == check) return &f;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("diagnose::gather reads DRA beside the lists, and the pods' claims survive the projection",
          "[diagnose][dra]") {
  FakeClient fc;
  serve_resource_api(fc);
  answer_dra_lists(fc, json_answer(200, claims_list()));
  answer_core(fc, {pending_pod()}, {gpuctl::testing::dx::h100_node("gpu-a", 0, 0)});
  auto selected = dra_checks();
  auto snapshot = gather(*fc.client, {needed_sources(selected), "", "", {}});
  REQUIRE(snapshot);
  CHECK(fc.fake->unexpected().empty());
  REQUIRE(snapshot->dra.has_value());
  CHECK(snapshot->dra->served);
  CHECK(snapshot->dra->devices.size() == 2);
  CHECK(snapshot->dra->taint_rule_version == "v1beta2");
  const json& pod = snapshot->list(Source::pods).at(0);
  CHECK(pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "gpus16");
  CHECK(pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"] == "big-gpus-x7k9m");
  CHECK(pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == "big-gpus-x7k9m");

  Report r = run_checks(*snapshot, selected);
  const Finding* tainted = finding_of(r, "dra-device-tainted");
  REQUIRE(tainted != nullptr);
  CHECK(tainted->severity == Severity::critical);
  CHECK(tainted->summary.find("gpu-a/gpu-0 (GPU-0a, NVIDIA A100-SXM4-80GB) is tainted gpu.nvidia.com/xid=79") == 0);
  CHECK(tainted->summary.find("still held by claim ml/train-gpus (pod(s) ml/train)") != std::string::npos);
  const Finding* pending = finding_of(r, "dra-claim-unallocated");
  REQUIRE(pending != nullptr);
  CHECK(pending->object.name == "big-gpus-x7k9m");
  CHECK(pending->summary.find("the scheduler says: Unschedulable: 0/1 nodes are available: 1 cannot allocate all "
                              "claims.") != std::string::npos);
}

TEST_CASE("diagnose::gather: a cluster without resource.k8s.io/v1 passes the DRA checks", "[diagnose][dra]") {
  FakeClient fc;
  fc.fake->on("GET", "/apis/resource.k8s.io/v1",
              json_answer(404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"));
  answer_core(fc, {pending_pod()}, {gpuctl::testing::dx::h100_node("gpu-a", 8, 8)});
  auto selected = dra_checks();
  auto snapshot = gather(*fc.client, {needed_sources(selected), "", "", {}});
  REQUIRE(snapshot);
  CHECK(fc.fake->unexpected().empty());
  CHECK(fc.fake->requests().size() == 4);  // pods, nodes, events; of DRA discovery only
  REQUIRE(snapshot->dra.has_value());
  CHECK_FALSE(snapshot->dra->served);
  Report r = run_checks(*snapshot, selected);
  CHECK(r.findings.empty());
  for (const auto& c : r.checks) {
    INFO(c.id);
    CHECK(c.status == CheckStatus::pass);
  }
}

TEST_CASE("diagnose::gather: refused claims are said by the checks, refused slices skip them", "[diagnose][dra]") {
  const char* forbidden_claims =
      R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":"resourceclaims.resource.k8s.io )"
      R"(is forbidden: User \"ops\" cannot list resource \"resourceclaims\" in API group \"resource.k8s.io\" at the )"
      R"(cluster scope"})";
  FakeClient fc;
  serve_resource_api(fc);
  answer_dra_lists(fc, json_answer(403, forbidden_claims));
  answer_core(fc, {pending_pod()}, {gpuctl::testing::dx::h100_node("gpu-a", 0, 0)});
  auto selected = dra_checks();
  auto snapshot = gather(*fc.client, {needed_sources(selected), "", "", {}});
  REQUIRE(snapshot);
  CHECK_FALSE(snapshot->unavailable.contains(Source::dra));
  Report r = run_checks(*snapshot, selected);
  const Finding* tainted = finding_of(r, "dra-device-tainted");
  REQUIRE(tainted != nullptr);
  CHECK(tainted->summary.find("who holds it is not known (resourceclaims could not be read)") != std::string::npos);
  const Finding* blind = finding_of(r, "dra-claim-unallocated");
  REQUIRE(blind != nullptr);
  CHECK(blind->severity == Severity::info);  // never "claim ml/big-gpus-x7k9m does not exist"
  CHECK(blind->evidence[0].text.find("resourceclaims forbidden") != std::string::npos);

  FakeClient refused;
  serve_resource_api(refused);
  refused.fake->on("GET", "/apis/resource.k8s.io/v1/resourceslices",
                   json_answer(403, R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,)"
                                    R"("message":"resourceslices.resource.k8s.io is forbidden"})"));
  for (const char* path : {"/apis/resource.k8s.io/v1/resourceclaims", "/apis/resource.k8s.io/v1/deviceclasses",
                           "/apis/resource.k8s.io/v1beta2/devicetaintrules"}) {
    refused.fake->on("GET", path, json_answer(200, list_of(json::array())));
  }
  answer_core(refused, json::array(), json::array());
  auto blinded = gather(*refused.client, {needed_sources(selected), "", "", {}});
  REQUIRE(blinded);
  REQUIRE(blinded->unavailable.contains(Source::dra));
  Report skipped = run_checks(*blinded, selected);
  for (const auto& c : skipped.checks) {
    INFO(c.id);
    CHECK(c.status == CheckStatus::skipped);
    CHECK(c.skipped_because == "could not list DRA objects (resource.k8s.io): forbidden: resourceslices");
  }
}

TEST_CASE("diagnose::gather stops when DRA's discovery meets refused credentials", "[diagnose][dra]") {
  FakeClient fc;
  fc.fake->on("GET", "/apis/resource.k8s.io/v1",
              json_answer(401, R"({"kind":"Status","status":"Failure","reason":"Unauthorized","code":401,)"
                               R"("message":"Unauthorized"})"));
  auto snapshot = gather(*fc.client, {{Source::dra}, "", "", {}});
  REQUIRE_FALSE(snapshot);
  CHECK(snapshot.error().is_unauthorized());
}

TEST_CASE("diagnose::gather reads the latest failed pod's log tail of each failed GPU job, as gpuctl jobs does",
          "[diagnose][jobs]") {
  using gpuctl::testing::dx::owned;
  using gpuctl::testing::dx::pod;
  const std::string failed_at = gpuctl::util::format_rfc3339(std::chrono::system_clock::now());
  json job = {{"metadata", {{"name", "train"}, {"namespace", "ml"}}},
              {"spec",
               {{"template",
                 {{"spec",
                   {{"containers",
                     json::array({{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}}}}},
              {"status",
               {{"conditions", json::array({{{"type", "Failed"},
                                             {"status", "True"},
                                             {"reason", "BackoffLimitExceeded"},
                                             {"lastTransitionTime", failed_at}}})}}}};
  auto failed_pod = [](const std::string& name, const std::string& finished, const std::string& message) {
    json p = owned(pod("ml", name, "gpu-1", 1, "Failed"), "Job", "train");
    json t = {{"exitCode", 1}, {"reason", "Error"}, {"finishedAt", finished}};
    if (!message.empty()) t["message"] = message;
    p["status"]["containerStatuses"] = json::array({{{"name", "main"}, {"state", {{"terminated", t}}}}});
    return p;
  };
  // The older attempt's termination message names a cause; the latest one's does not.
  json older = failed_pod("train-a", "2026-12-06T11:00:00Z", "Failed to initialize NVML: Unknown Error");
  json latest = failed_pod("train-b", "2026-12-06T11:10:00Z", "");
  gpuctl::testing::FakeClient fc;
  fc.fake->on("GET", "/apis/batch/v1/jobs", json_answer(200, list_of({job})));
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of({older, latest})));
  fc.fake->on(
      "GET", "/api/v1/namespaces/ml/pods/train-b/log",
      FakeAnswer{200,
                 "2026-12-06T11:09:59.1Z step 40\n"
                 "2026-12-06T11:09:59.2Z torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, "
                 "unhandled system error\n2026-12-06T11:09:59.3Z Last error:\n",
                 {}});
  auto selected = select_checks({{"gpu-job-failed"}, {}});
  REQUIRE(selected);
  auto snapshot = gather(*fc.client, {needed_sources(*selected), "", "", {}});
  REQUIRE(snapshot);
  CHECK(fc.fake->unexpected().empty());
  std::vector<std::string> logs;
  for (const auto& r : fc.fake->requests()) {
    if (r.url.find("/log?") != std::string::npos) logs.push_back(r.url.substr(r.url.find("/api/")));
  }
  // One read: the latest failed pod's failed container, its last lines bounded in bytes.
  CHECK(logs == std::vector<std::string>{"/api/v1/namespaces/ml/pods/train-b/log?container=main&tailLines=50&"
                                         "limitBytes=262144&timestamps=true"});
  Report r = run_checks(*snapshot, *selected);
  const Finding* f = finding_of(r, "gpu-job-failed");
  REQUIRE(f != nullptr);
  INFO(f->summary);
  // The older pod's NVML message is read first; the log's line is quoted with its time.
  CHECK(f->summary.find("NVML answered Unknown Error") != std::string::npos);
  const Evidence& quoted = f->evidence.back();
  CHECK(quoted.source == "log of pod ml/train-b container main");
  CHECK(quoted.text ==
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system error");
  CHECK(quoted.time == "2026-12-06T11:09:59.2Z");
}
