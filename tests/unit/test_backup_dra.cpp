// Backup and restore of DRA objects: claim templates and the claims users made are kept (without
// status); ResourceSlices and the claims made for pods (from a template, or by the scheduler for
// an extended-resource request) never are, from the cluster or from a kubectl export.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fakes/dra_objects.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/ops/restore/restore.hpp"

using json = nlohmann::json;
namespace ops = gpuctl::ops;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;

namespace {

const ops::BackupKind& kind(std::string_view name) { return *ops::find_backup_kind(name); }

json user_claim() { return gpuctl::testing::dra::claim("team-a", "shared-gpu", "node1", {"gpu-0"}); }

json pod_claim() { return gpuctl::testing::dra::claim("team-a", "train-0-gpu-x7k9m", "node1", {"gpu-1"}, "train-0"); }

json extended_claim() {
  return gpuctl::testing::dra::claim("team-a", "gpu-pod-extended-resources-abcde", "node1", {"gpu-2"}, "gpu-pod", true);
}

json slice() {
  return gpuctl::testing::dra::slice("node1", json::array({gpuctl::testing::dra::gpu_device("gpu-0", "GPU-0")}));
}

json claim_template() {
  return json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "team-a", "uid": "t1"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}})");
}

std::string list_of(std::vector<json> items) {
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", items}}
      .dump();
}

// A list's items as the API server sends them: without apiVersion and kind.
std::string api_list_of(std::vector<json> items) {
  for (auto& item : items) {
    item.erase("apiVersion");
    item.erase("kind");
  }
  return list_of(std::move(items));
}

}  // namespace

TEST_CASE("backup: claim templates and claims are optional namespaced kinds, after the classes, before Jobs",
          "[backup]") {
  const auto& templates = kind("resourceclaimtemplates.resource.k8s.io");
  const auto& claims = kind("ResourceClaim");
  CHECK(templates.namespaced);
  CHECK(templates.optional);
  CHECK(claims.namespaced);
  CHECK(claims.optional);
  CHECK(&kind("deviceclasses") < &templates);
  CHECK(&claims < &kind("jobs"));
  CHECK(ops::backup_kind_of(claim_template()) == &templates);
  CHECK(ops::backup_kind_of(user_claim()) == &claims);
  CHECK(ops::backup_kind_of(slice()) == nullptr);  // never a kind of the archive
}

TEST_CASE("backup: a claim a user made is kept without status, the claims made for pods never", "[backup]") {
  CHECK(ops::left_out_reason(user_claim()).empty());
  CHECK(ops::left_out_reason(claim_template()).empty());
  CHECK(ops::left_out_reason(pod_claim()).find("made for pod train-0 from its claim template") != std::string::npos);
  CHECK(ops::left_out_reason(extended_claim()).find("made by the scheduler") != std::string::npos);
  CHECK(ops::left_out_reason(slice()).find("published by its DRA driver") != std::string::npos);
  CHECK(ops::left_out_reason(json{{"apiVersion", "v1"}, {"kind", "Pod"}}).empty());

  json kept = ops::strip_for_backup(kind("resourceclaims"), user_claim());
  CHECK_FALSE(kept.contains("status"));
  CHECK(kept["metadata"] == json({{"name", "shared-gpu"}, {"namespace", "team-a"}}));  // no creationTimestamp
  CHECK(kept["spec"] == user_claim()["spec"]);
}

TEST_CASE("backup: collecting lists templates and claims and keeps only the claims users made", "[backup]") {
  FakeClient c;
  auto& fake = *c.fake;
  fake.on("GET", "/version", json_answer(200, R"({"gitVersion": "v1.36.3"})"));
  // Discovery: resource.k8s.io/v1 serves every DRA kind; the other optional groups are absent.
  const json v1 = {{"resources", json::array({{{"name", "deviceclasses"}},
                                              {{"name", "devicetaintrules"}},
                                              {{"name", "resourceclaimtemplates"}},
                                              {{"name", "resourceclaims"}},
                                              {{"name", "resourceslices"}}})}};
  for (int i = 0; i < 4; ++i) {
    fake.on("GET", "/apis/resource.k8s.io", json_answer(200, R"({"versions": [{"groupVersion": "resource.k8s.io/v1",
      "version": "v1"}]})"));
    fake.on("GET", "/apis/resource.k8s.io/v1", json_answer(200, v1.dump()));
  }
  for (const char* group : {"/apis/nvidia.com", "/apis/kueue.x-k8s.io", "/apis/scheduling.run.ai"}) {
    for (int i = 0; i < 4; ++i) fake.on("GET", group, json_answer(404, R"({"kind": "Status", "code": 404})"));
  }
  for (const char* path :
       {"/api/v1/namespaces", "/apis/scheduling.k8s.io/v1/priorityclasses", "/apis/node.k8s.io/v1/runtimeclasses",
        "/apis/storage.k8s.io/v1/storageclasses", "/apis/resource.k8s.io/v1/deviceclasses", "/api/v1/persistentvolumes",
        "/api/v1/persistentvolumeclaims", "/api/v1/resourcequotas", "/api/v1/limitranges",
        "/apis/resource.k8s.io/v1/devicetaintrules", "/apis/apps/v1/daemonsets", "/apis/batch/v1/jobs",
        "/api/v1/nodes"}) {
    fake.on("GET", path, json_answer(200, list_of({})));
  }
  fake.on("GET", "/apis/resource.k8s.io/v1/resourceclaimtemplates", json_answer(200, api_list_of({claim_template()})));
  fake.on("GET", "/apis/resource.k8s.io/v1/resourceclaims",
          json_answer(200, api_list_of({user_claim(), pod_claim(), extended_claim()})));

  auto contents = ops::collect_backup(*c.client, {}, "test");
  REQUIRE(contents);
  CHECK(fake.unexpected().empty());
  std::vector<std::string> kept;
  for (const auto& o : contents->objects) kept.push_back(o.path());
  CHECK(kept == std::vector<std::string>{"resourceclaimtemplates.resource.k8s.io/team-a/one-gpu.yaml",
                                         "resourceclaims.resource.k8s.io/team-a/shared-gpu.yaml"});
  CHECK(contents->objects[1].object["apiVersion"] == "resource.k8s.io/v1");
  CHECK_FALSE(contents->objects[1].object.contains("status"));
}

TEST_CASE("restore_plan: a kubectl export's slices and pod claims are named and left, user claims restored",
          "[restore_plan]") {
  const std::string text = list_of({slice(), pod_claim(), extended_claim(), user_claim(), claim_template()});
  auto source = ops::read_restore_source(text, "dra.yaml");
  REQUIRE(source);
  REQUIRE(source->objects.size() == 2);
  CHECK(source->objects[0].kind == &kind("resourceclaimtemplates"));
  CHECK(source->objects[1].kind == &kind("resourceclaims"));
  CHECK(source->objects[1].name == "shared-gpu");
  CHECK_FALSE(source->objects[1].object.contains("status"));
  REQUIRE(source->ignored.size() == 3);
  CHECK(source->ignored[0].starts_with("ResourceSlice node1-gpu.nvidia.com-a: published by its DRA driver"));
  CHECK(source->ignored[1].starts_with("ResourceClaim team-a/train-0-gpu-x7k9m: made for pod train-0"));
  CHECK(source->ignored[2].starts_with("ResourceClaim team-a/gpu-pod-extended-resources-abcde: made by the scheduler"));

  // An export of nothing but slices holds nothing to restore.
  auto only_slices = ops::read_restore_source(list_of({slice()}), "slices.yaml");
  REQUIRE_FALSE(only_slices);
  CHECK(only_slices.error().code == gpuctl::Errc::invalid_argument);
}
