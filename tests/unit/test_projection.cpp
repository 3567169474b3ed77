#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/ops/jobs/jobs.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/time.hpp"

using gpuctl::Errc;
using gpuctl::kube::parse_projected;
using gpuctl::kube::Projection;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using nlohmann::json;

namespace {

// A pod as a real API server sends it: most of it is what no GPU count reads.
json realistic_pod(const std::string& name, const std::string& node, const std::string& gpus) {
  json gpu = {{"nvidia.com/gpu", gpus}, {"cpu", "4"}, {"memory", "16Gi"}};
  return {
      {"kind", "Pod"},
      {"apiVersion", "v1"},
      {"metadata",
       {{"name", name},
        {"namespace", "team-a"},
        {"uid", "0d4c5b7e-1111-4222-8333-944445555666"},
        {"labels", {{"app", "trainer"}, {"batch.kubernetes.io/job-name", "train"}}},
        {"annotations", {{"kubectl.kubernetes.io/last-applied-configuration", std::string(2000, 'x')}}},
        {"managedFields", json::array({{{"manager", "kube-controller-manager"},
                                        {"operation", "Update"},
                                        {"fieldsV1", {{"f:metadata", {{"f:labels", {{".", json::object()}}}}}}}}})}}},
      {"spec",
       {{"nodeName", node},
        {"initContainers", json::array({{{"name", "log-shipper"},
                                         {"image", "fluent-bit:3"},
                                         {"restartPolicy", "Always"},
                                         {"resources", {{"requests", {{"cpu", "100m"}}}}}}})},
        {"containers", json::array({{{"name", "main"},
                                     {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
                                     {"command", json::array({"torchrun", "--nproc-per-node=8", "train.py"})},
                                     {"env", json::array({{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}})},
                                     {"resources", {{"requests", gpu}, {"limits", {{"nvidia.com/gpu", gpus}}}}},
                                     {"volumeMounts", json::array({{{"name", "data"}, {"mountPath", "/data"}}})}}})},
        {"overhead", {{"cpu", "250m"}}},
        {"volumes", json::array({{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "imagenet"}}}}})},
        {"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}})}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})},
        {"containerStatuses",
         json::array({{{"name", "main"}, {"ready", true}, {"state", {{"running", json::object()}}}}})}}}};
}

std::vector<json> items_of(const json& list) { return {list["items"].begin(), list["items"].end()}; }

}  // namespace

TEST_CASE("kube::parse_projected keeps the named fields, looks through arrays, and drops the rest", "[projection]") {
  Projection fields{"metadata.name", "metadata.labels", "spec.containers[].resources", "status.phase"};
  auto pod = parse_projected(realistic_pod("p", "gpu-1", "8").dump(), fields);
  REQUIRE(pod);
  CHECK(*pod ==
        json{{"metadata", {{"name", "p"}, {"labels", {{"app", "trainer"}, {"batch.kubernetes.io/job-name", "train"}}}}},
             {"spec",
              {{"containers", json::array({{{"resources",
                                             {{"requests", {{"nvidia.com/gpu", "8"}, {"cpu", "4"}, {"memory", "16Gi"}}},
                                              {"limits", {{"nvidia.com/gpu", "8"}}}}}}})}}},
             {"status", {{"phase", "Running"}}}});
}

TEST_CASE("kube::parse_projected with the default projection is json::parse", "[projection]") {
  for (const char* file : {"k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json",
                           "k8s-nodes/edgecloud__aks-3-nodes-no-gpu__nodelist.json"}) {
    std::string text = gpuctl::testing::fixture(file);
    auto parsed = parse_projected(text, Projection{});
    REQUIRE(parsed);
    CHECK(*parsed == json::parse(text));
  }
  auto scalars = parse_projected(R"({"a":[1,-2,3.5,true,null,"s",18446744073709551615],"b":{}})", Projection{});
  REQUIRE(scalars);
  CHECK(scalars->dump() == R"({"a":[1,-2,3.5,true,null,"s",18446744073709551615],"b":{}})");
}

TEST_CASE("kube::Projection: a parent path keeps its whole subtree, in either order", "[projection]") {
  std::string text = R"({"m":{"a":1,"b":{"c":2,"d":3}},"x":4})";
  CHECK(*parse_projected(text, Projection{"m", "m.a"}) == json::parse(R"({"m":{"a":1,"b":{"c":2,"d":3}}})"));
  CHECK(*parse_projected(text, Projection{"m.a", "m"}) == json::parse(R"({"m":{"a":1,"b":{"c":2,"d":3}}})"));
  CHECK(*parse_projected(text, Projection{"m.b.c", "x"}) == json::parse(R"({"m":{"b":{"c":2}},"x":4})"));
  // A shape table names "spec" before "spec.nodeName": only the leaves are kept whole.
  Projection from_shapes(std::vector<gpuctl::kube::FieldShape>{{"m", gpuctl::kube::JsonType::object},
                                                               {"m.b", gpuctl::kube::JsonType::object},
                                                               {"m.b.d", gpuctl::kube::JsonType::integer}});
  CHECK(*parse_projected(text, from_shapes) == json::parse(R"({"m":{"b":{"d":3}}})"));
}

TEST_CASE("kube::parse_projected keeps a field of the wrong type as it is, for the shape check to name",
          "[projection]") {
  json pod = realistic_pod("p", "gpu-1", "1");
  pod["spec"]["nodeName"] = 7;
  pod["spec"]["containers"] = "not a list";
  auto projected = parse_projected(pod.dump(), gpuctl::ops::inventory_pod_fields());
  REQUIRE(projected);
  CHECK(gpuctl::kube::pod_shape_problem(*projected) == gpuctl::kube::pod_shape_problem(pod));
  CHECK_FALSE(gpuctl::kube::pod_shape_problem(*projected).empty());
}

TEST_CASE("kube::parse_projected refuses malformed and too deeply nested text, and says where", "[projection]") {
  auto broken = parse_projected(R"({"items":[{"a":1},)", Projection{"items.a"});
  REQUIRE_FALSE(broken);
  CHECK(broken.error().code == Errc::parse);
  CHECK_THAT(broken.error().message, Catch::Contains("byte"));
  std::string deep = std::string(300, '[') + std::string(300, ']');
  auto too_deep = parse_projected(deep, Projection{});
  REQUIRE_FALSE(too_deep);
  CHECK_THAT(too_deep.error().message, Catch::Contains("nested deeper than 200"));
  // A dropped subtree is scanned, never built: its depth costs nothing.
  auto dropped = parse_projected(R"({"keep":1,"drop":)" + deep + "}", Projection{"keep"});
  REQUIRE(dropped);
  CHECK(*dropped == json{{"keep", 1}});
  // Duplicate keys: the last wins, as in json::parse.
  CHECK(*parse_projected(R"({"a":1,"a":2})", Projection{"a"}) == json{{"a", 2}});
}

TEST_CASE("ops::build_node_inventory reads projected nodes and pods exactly as whole ones", "[projection][nodes]") {
  const auto now = *gpuctl::util::parse_rfc3339("2026-12-02T12:00:00Z");
  for (const char* file : {"k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json",
                           "k8s-nodes/edgecloud__aks-3-nodes-no-gpu__nodelist.json"}) {
    std::string text = gpuctl::testing::fixture(file);
    json whole_list = json::parse(text);
    auto projected_list = parse_projected(text, Projection::list_of(gpuctl::ops::inventory_node_fields()));
    REQUIRE(projected_list);
    CHECK(projected_list->dump().size() < whole_list.dump().size());
    std::vector<json> pods, projected_pods;
    // A NoExecute taint's timeAdded is read (kubectl's notation shows it) though no shape checks it.
    whole_list["items"][0]["spec"]["taints"].push_back(
        {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}, {"timeAdded", "2026-12-02T11:00:00Z"}});
    text = whole_list.dump();
    projected_list = parse_projected(text, Projection::list_of(gpuctl::ops::inventory_node_fields()));
    REQUIRE(projected_list);
    for (const auto& node : whole_list["items"]) {
      std::string name = node["metadata"]["name"];
      for (const char* gpus : {"1", "0", "2"}) {
        pods.push_back(realistic_pod(name + "-" + gpus, name, gpus));
        projected_pods.push_back(*parse_projected(pods.back().dump(), gpuctl::ops::inventory_pod_fields()));
      }
    }
    pods.push_back(json{{"metadata", {{"name", "bad"}}}, {"spec", {{"containers", 5}}}});
    projected_pods.push_back(*parse_projected(pods.back().dump(), gpuctl::ops::inventory_pod_fields()));
    auto whole = gpuctl::ops::build_node_inventory(items_of(whole_list), pods, true, now);
    auto projected = gpuctl::ops::build_node_inventory(items_of(*projected_list), projected_pods, true, now);
    CHECK(gpuctl::ops::to_json(projected) == gpuctl::ops::to_json(whole));
    CHECK(projected.skipped == whole.skipped);
    CHECK(projected.skipped.size() == 1);
  }
}

TEST_CASE("kube::Client::list_pages fetches the next page while this one decodes, and drops a wrong guess",
          "[projection]") {
  // The peek reads the first metadata; a second metadata after the items (no API server writes
  // one) overrides it, as json::parse would: the prefetched page is dropped, the right one read.
  FakeClient fc;
  fc.fake
      ->on("GET", "/api/v1/pods",
           json_answer(200, R"({"metadata":{"continue":"wrong"},"items":[{"metadata":{"name":"a"}}],)"
                            R"("metadata":{"continue":"right"}})"),
           "limit=500")
      .on("GET", "/api/v1/pods", json_answer(200, R"({"metadata":{},"items":[{"metadata":{"name":"x"}}]})"),
          "continue=wrong")
      .on("GET", "/api/v1/pods", json_answer(200, R"({"metadata":{},"items":[{"metadata":{"name":"b"}}]})"),
          "continue=right");
  auto list = fc.client->list("/api/v1/pods");
  REQUIRE(list);
  REQUIRE(list->items.size() == 2);
  CHECK(list->items[1]["metadata"]["name"] == "b");
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("kube::Client::list_pages hands over each projected page and says when the list restarts", "[projection]") {
  auto page = [](const std::string& name, const std::string& cont) {
    return json{{"metadata", {{"resourceVersion", "9"}, {"continue", cont}}},
                {"items", json::array({realistic_pod(name, "n", "1")})}}
        .dump();
  };
  const char* expired = R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410})";
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, page("a", "t1")), "limit=1")
      .on("GET", "/api/v1/pods", json_answer(410, expired), "continue=t1")
      .on("GET", "/api/v1/pods", json_answer(200, page("a", "t2")), "limit=1")
      .on("GET", "/api/v1/pods", json_answer(200, page("b", "")), "continue=t2");
  gpuctl::kube::ListOptions options;
  options.limit = 1;
  options.fields = Projection{"metadata.name"};
  std::vector<json> seen;
  int restarts = 0;
  gpuctl::kube::ListPageSink sink;
  sink.on_items = [&](std::vector<json>& items) -> gpuctl::Result<void> {
    for (auto& item : items) seen.push_back(std::move(item));
    return {};
  };
  sink.on_restart = [&] {
    ++restarts;
    seen.clear();
  };
  auto summary = fc.client->list_pages("/api/v1/pods", options, sink);
  REQUIRE(summary);
  CHECK(summary->restarts == 1);
  CHECK(summary->pages == 2);
  CHECK(restarts == 1);
  CHECK(seen == std::vector<json>{json{{"metadata", {{"name", "a"}}}}, json{{"metadata", {{"name", "b"}}}}});
}

TEST_CASE("kube::Client::list_pages stops at the first error its reader returns", "[projection]") {
  FakeClient fc;
  fc.fake
      ->on("GET", "/api/v1/pods",
           json_answer(200, R"({"metadata":{"continue":"t1"},"items":[{"metadata":{"name":"a"}}]})"), "limit=500")
      .on("GET", "/api/v1/pods",
          json_answer(200, R"({"metadata":{"continue":"t2"},"items":[{"metadata":{"name":"b"}}]})"), "continue=t1")
      .on("GET", "/api/v1/pods", json_answer(200, R"({"metadata":{},"items":[]})"), "continue=t2");
  gpuctl::kube::ListPageSink sink;
  sink.on_items = [](std::vector<json>&) -> gpuctl::Result<void> {
    return gpuctl::fail(Errc::cancelled, "interrupted");
  };
  auto summary = fc.client->list_pages("/api/v1/pods", {}, sink);
  REQUIRE_FALSE(summary);
  CHECK(summary.error().code == Errc::cancelled);
  // The second page was already on its way (pipelined) when the reader said stop; no third.
  REQUIRE(fc.fake->requests().size() == 2);
  CHECK_THAT(fc.fake->requests()[1].url, Catch::Contains("continue=t1"));
}

TEST_CASE("ops::build_job_list reads projected jobs, pods and events exactly as whole ones", "[projection][jobs]") {
  const auto now = *gpuctl::util::parse_rfc3339("2026-12-02T12:00:00Z");
  auto job = [](const std::string& name, json status) {
    json j = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"creationTimestamp", "2026-12-02T10:00:00Z"},
                {"managedFields", json::array({{{"manager", "kubectl"}}})}}},
              {"spec",
               {{"parallelism", 2},
                {"completions", 2},
                {"backoffLimit", 1},
                {"selector", {{"matchLabels", {{"batch.kubernetes.io/controller-uid", "uid-" + name}}}}},
                {"template", {{"spec", realistic_pod("t", "", "4")["spec"]}}}}},
              {"status", std::move(status)}};
    j["spec"]["template"]["spec"].erase("nodeName");
    return j;
  };
  auto owned = [](json pod, const std::string& job_name) {
    pod["metadata"]["ownerReferences"] =
        json::array({{{"kind", "Job"}, {"name", job_name}, {"uid", "uid-" + job_name}, {"controller", true}}});
    return pod;
  };
  std::vector<json> jobs = {
      job("train", {{"active", 2}, {"ready", 1}, {"startTime", "2026-12-02T10:00:01Z"}}),
      job("crashed", {{"failed", 2},
                      {"startTime", "2026-12-02T10:00:01Z"},
                      {"conditions", json::array({{{"type", "Failed"},
                                                   {"status", "True"},
                                                   {"reason", "BackoffLimitExceeded"},
                                                   {"lastTransitionTime", "2026-12-02T10:30:00Z"}}})}}),
      job("starved", json::object())};
  json failed = owned(realistic_pod("crashed-a", "gpu-2", "4"), "crashed");
  failed["status"] = {
      {"phase", "Failed"},
      {"containerStatuses",
       json::array({{{"name", "main"},
                     {"state",
                      {{"terminated",
                        {{"exitCode", 137}, {"reason", "OOMKilled"}, {"finishedAt", "2026-12-02T10:29:00Z"}}}}}}})}};
  json pending = owned(realistic_pod("train-b", "", "4"), "train");
  pending["spec"].erase("nodeName");
  pending["status"] = {
      {"phase", "Pending"},
      {"conditions", json::array({{{"type", "PodScheduled"},
                                   {"status", "False"},
                                   {"reason", "Unschedulable"},
                                   {"message", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}})}};
  std::vector<json> pods = {owned(realistic_pod("train-a", "gpu-1", "4"), "train"), pending, failed};
  std::vector<json> events = {
      {{"metadata", {{"name", "e1"}, {"namespace", "team-a"}, {"creationTimestamp", "2026-12-02T10:00:02Z"}}},
       {"involvedObject", {{"kind", "Job"}, {"name", "starved"}, {"namespace", "team-a"}, {"uid", "uid-starved"}}},
       {"reason", "FailedCreate"},
       {"type", "Warning"},
       {"count", 3},
       {"message",
        "pods \"starved-x\" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=4, "
        "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"},
       {"lastTimestamp", "2026-12-02T10:05:00Z"}},
      {{"metadata", {{"name", "e2"}, {"namespace", "team-a"}, {"creationTimestamp", "2026-12-02T10:06:00Z"}}},
       {"regarding", {{"kind", "Job"}, {"name", "starved"}, {"namespace", "team-a"}, {"uid", "uid-starved"}}},
       {"reason", "FailedCreate"},
       {"type", "Warning"},
       {"note", "Error creating: pods \"starved-y\" is forbidden: exceeded quota: gpu"},
       {"series", {{"count", 5}, {"lastObservedTime", "2026-12-02T10:07:00.000000Z"}}},
       {"eventTime", "2026-12-02T10:06:00.000000Z"}}};
  auto project = [](const std::vector<json>& objects, const Projection& projection) {
    std::vector<json> out;
    for (const auto& o : objects) out.push_back(*parse_projected(o.dump(), projection));
    return out;
  };
  auto whole = gpuctl::ops::build_job_list(jobs, pods, events, true, now);
  auto projected = gpuctl::ops::build_job_list(project(jobs, Projection(gpuctl::kube::job_shapes())),
                                               project(pods, Projection(gpuctl::kube::pod_shapes())),
                                               project(events, Projection(gpuctl::kube::event_shapes())), true, now);
  REQUIRE(whole.jobs.size() == 3);
  CHECK(gpuctl::ops::to_json(projected) == gpuctl::ops::to_json(whole));
}
