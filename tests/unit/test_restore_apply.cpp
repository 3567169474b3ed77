// Restore's writes through a fake transport: what is sent for a node (labels by server-side
// apply, taints by a resourceVersion-guarded merge patch that is planned again after a 409), a
// node's conflicting field named and the rest still applied, a client dry run that only reads,
// and a kind the cluster does not serve.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/restore/restore.hpp"

using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;
namespace ops = gpuctl::ops;

namespace {

constexpr const char* kNodes = "/api/v1/nodes";
constexpr const char* kNode = "/api/v1/nodes/gpu-1";

ops::RestoreSource source_of(std::vector<json> objects) {
  ops::RestoreSource s;
  s.source = "b.tar.gz";
  s.manifest = {{"cluster", {{"server", "https://k8s.test:6443"}}}};
  for (auto& o : objects) {
    const ops::BackupKind* kind = ops::backup_kind_of(o);
    REQUIRE(kind != nullptr);
    const std::string ns = kind->namespaced ? o["metadata"]["namespace"].get<std::string>() : "";
    s.objects.push_back({kind, ns, o["metadata"]["name"].get<std::string>(), o});
  }
  return s;
}

json archived_node() {
  return json::parse(R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1",
    "labels": {"nvidia.com/gpu.product": "NVIDIA-H100", "pool": "train"}},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})");
}

json live_node(const std::string& resource_version) {
  return {{"metadata", {{"name", "gpu-1"}, {"resourceVersion", resource_version}, {"labels", {{"pool", "batch"}}}}},
          {"spec", {{"taints", {{{"key", "dedicated"}, {"value", "x"}, {"effect", "NoSchedule"}}}}}}};
}

std::string list_of(const json& item) { return json{{"items", {item}}, {"metadata", json::object()}}.dump(); }

const char* kConflict = R"({"kind": "Status", "code": 409, "reason": "Conflict",
  "message": "Apply failed with 1 conflict: conflict with \"node-labeller\" using v1: .metadata.labels.pool",
  "details": {"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"node-labeller\" using v1",
                          "field": ".metadata.labels.pool"}]}})";

}  // namespace

TEST_CASE("restore_apply: a node's labels are applied, its taints patched on the version read, replanned after 409",
          "[restore_apply]") {
  FakeClient c;
  c.fake->on("GET", kNodes, json_answer(200, list_of(live_node("5"))));
  c.fake->on("PATCH", kNode,
             json_answer(409, R"({"kind": "Status", "code": 409, "reason": "Conflict", "message": "modified"})"));
  c.fake->on("GET", kNode, json_answer(200, live_node("6").dump()));
  c.fake->on("PATCH", kNode, json_answer(200, live_node("7").dump()));  // the taints, again
  c.fake->on("PATCH", kNode, json_answer(200, live_node("8").dump()));  // the labels
  ops::RestoreOptions options;
  auto report = ops::restore(*c.client, source_of({archived_node()}), options);
  REQUIRE(report);
  CHECK(c.fake->unexpected().empty());
  REQUIRE(report->items.size() == 1);
  CHECK(report->items[0].result == ops::RestoreResult::applied);
  const auto& sent = c.fake->requests();
  REQUIRE(sent.size() == 5);
  const json second_taints = json::parse(sent[3].body);
  CHECK(second_taints["metadata"]["resourceVersion"] == "6");
  CHECK(second_taints["spec"]["taints"].size() == 2);  // "dedicated" kept, nvidia.com/gpu added
  const json labels = json::parse(sent[4].body);
  CHECK(labels["metadata"]["labels"] == json({{"nvidia.com/gpu.product", "NVIDIA-H100"}, {"pool", "train"}}));
  CHECK_FALSE(labels.contains("spec"));
  CHECK(sent[4].url.find("fieldManager=gpuctl") != std::string::npos);
  CHECK(sent[4].url.find("force=true") == std::string::npos);
}

TEST_CASE("restore_apply: a node label another manager owns is a conflict naming it, the rest is applied",
          "[restore_apply]") {
  FakeClient c;
  json live = live_node("5");
  live["spec"]["taints"].push_back({{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}});
  c.fake->on("GET", kNodes, json_answer(200, list_of(live)));
  c.fake->on("PATCH", kNode, json_answer(409, kConflict));
  c.fake->on("PATCH", kNode, json_answer(200, live.dump()));
  auto report = ops::restore(*c.client, source_of({archived_node()}), {});
  REQUIRE(report);
  CHECK(c.fake->unexpected().empty());
  const auto& item = report->items.at(0);
  CHECK(item.result == ops::RestoreResult::conflict);
  REQUIRE(item.conflicts.size() == 1);
  CHECK(item.conflicts[0].manager == "node-labeller");
  CHECK(item.conflicts[0].field == ".metadata.labels.pool");
  const json rest = json::parse(c.fake->requests().back().body);
  CHECK(rest["metadata"]["labels"] == json({{"nvidia.com/gpu.product", "NVIDIA-H100"}}));
  CHECK_FALSE(ops::restore_succeeded(*report));

  FakeClient forced;  // --force-conflicts: one apply, with force=true
  forced.fake->on("GET", kNodes, json_answer(200, list_of(live)));
  forced.fake->on("PATCH", kNode, json_answer(200, live.dump()));
  ops::RestoreOptions options;
  options.force_conflicts = true;
  auto taken = ops::restore(*forced.client, source_of({archived_node()}), options);
  REQUIRE(taken);
  CHECK(taken->items.at(0).result == ops::RestoreResult::applied);
  CHECK(forced.fake->requests().back().url.find("force=true") != std::string::npos);
}

TEST_CASE("restore_apply: a client dry run only reads, a kind not served is skipped, another cluster refused",
          "[restore_apply]") {
  json queue = json::parse(R"({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
    "metadata": {"name": "gpus"}, "spec": {}})");
  FakeClient c;
  c.fake->on("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
             json_answer(404, R"({"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"})"));
  c.fake->on("GET", kNodes, json_answer(200, list_of(live_node("5"))));
  ops::RestoreOptions options;
  options.dry_run = ops::DryRun::client;
  auto report = ops::restore(*c.client, source_of({queue, archived_node()}), options);
  REQUIRE(report);
  CHECK(c.fake->unexpected().empty());
  CHECK(c.fake->count("GET") == c.fake->requests().size());
  REQUIRE(report->items.size() == 2);
  CHECK(report->items[0].result == ops::RestoreResult::skipped);
  CHECK(report->items[0].reason == "kind not served by this cluster (kueue.x-k8s.io/v1beta1 ClusterQueue)");
  CHECK(report->items[1].result == ops::RestoreResult::planned);
  CHECK(report->items[1].changes.size() == 3);  // two labels, one taint
  CHECK(ops::to_json(*report)["summary"] ==
        json({{"create", 0}, {"update", 1}, {"unchanged", 0}, {"skip", 1}, {"conflict", 0}, {"failed", 0}}));

  auto other = source_of({archived_node()});
  other.manifest["cluster"]["server"] = "https://elsewhere:6443";
  FakeClient untouched;
  auto refused = ops::restore(*untouched.client, other, {});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == gpuctl::Errc::invalid_argument);
  CHECK(untouched.fake->requests().empty());
}
