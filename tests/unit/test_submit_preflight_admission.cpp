// Pre-flight checks of `gpuctl submit` that mirror admission and volume binding: quota,
// LimitRange, claims; plus reading the input through the fake transport and the dry-run Pod.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "test_submit_preflight_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::preflight;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;

namespace {

json quota(const std::string& name, json hard, json used = nullptr, json extra_spec = json::object()) {
  json q = {{"metadata", {{"name", name}, {"namespace", "team-a"}}}, {"spec", extra_spec}};
  q["spec"]["hard"] = std::move(hard);
  if (!used.is_null()) q["status"] = {{"hard", q["spec"]["hard"]}, {"used", std::move(used)}};
  return q;
}

json limit_range(const std::string& name, json item) {
  return {{"metadata", {{"name", name}, {"namespace", "team-a"}}},
          {"spec", {{"limits", json::array({std::move(item)})}}}};
}

json with_claim(json job, const std::string& volume, const std::string& claim) {
  auto& spec = job["spec"]["template"]["spec"];
  spec["volumes"].push_back({{"name", volume}, {"persistentVolumeClaim", {{"claimName", claim}}}});
  spec["containers"][0]["volumeMounts"].push_back({{"name", volume}, {"mountPath", "/data"}});
  return job;
}

json claim(const std::string& name, const std::string& phase, const std::string& cls = "",
           std::vector<std::string> modes = {"ReadWriteOnce"}) {
  json c = {{"metadata", {{"name", name}, {"namespace", "team-a"}}}, {"spec", {{"accessModes", modes}}}};
  if (!cls.empty()) c["spec"]["storageClassName"] = cls;
  if (!phase.empty()) c["status"]["phase"] = phase;
  return c;
}

json list_of(std::vector<json> items) {
  return json{{"kind", "List"}, {"metadata", json::object()}, {"items", std::move(items)}};
}

std::vector<std::string> messages(const std::vector<ops::PreflightFinding>& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings) out.push_back(std::string(ops::to_string(f.severity)) + ": " + f.message);
  return out;
}

}  // namespace

TEST_CASE("quota passes when the pods fit", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(4);
  in.quotas = {quota("gpu", {{"requests.nvidia.com/gpu", "8"}}, {{"requests.nvidia.com/gpu", "4"}})};
  CHECK(ops::check_quota(in).empty());
}

TEST_CASE("quota refuses a pod that would exceed it, with the numbers", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(4);
  in.quotas = {quota("gpu", {{"requests.nvidia.com/gpu", "8"}}, {{"requests.nvidia.com/gpu", "6"}})};
  auto f = ops::check_quota(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].check == "quota");
  CHECK(f[0].severity == ops::FindingSeverity::refusal);
  CHECK(f[0].message ==
        "quota team-a/gpu allows 8 requests.nvidia.com/gpu, 6 in use, each pod of this job asks for 4; "
        "the API server would refuse its pods");
}

TEST_CASE("quota refuses when the parallel pods together would exceed it", "[preflight]") {
  ops::PreflightInput in;
  json j = job(4);
  j["spec"]["parallelism"] = 4;
  in.job = j;
  in.quotas = {quota("gpu", {{"requests.nvidia.com/gpu", "16"}}, {{"requests.nvidia.com/gpu", "6"}})};
  auto f = ops::check_quota(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "quota team-a/gpu allows 16 requests.nvidia.com/gpu, 6 in use, the job's 4 pods ask for 4 each (16): "
        "only 2 of them would be admitted");
  // Completions below parallelism: only that many run at once.
  j["spec"]["completions"] = 2;
  in.job = j;
  CHECK(ops::check_quota(in).empty());
}

TEST_CASE("quota counts cpu, memory and pods keys too", "[preflight]") {
  ops::PreflightInput in;
  in.job = job_with_resources({{"nvidia.com/gpu", "1"}, {"cpu", "8"}, {"memory", "64Gi"}});
  in.quotas = {quota("compute", {{"requests.cpu", "16"}, {"memory", "200Gi"}, {"pods", "10"}},
                     {{"requests.cpu", "10"}, {"memory", "40Gi"}, {"pods", "10"}})};
  auto m = messages(ops::check_quota(in));
  CHECK(m == std::vector<std::string>{
                 "refusal: quota team-a/compute allows 16 requests.cpu, 10 in use, each pod of this job asks for 8; "
                 "the API server would refuse its pods",
                 "refusal: quota team-a/compute allows 10 pods, 10 in use, each pod of this job asks for 1; "
                 "the API server would refuse its pods"});
}

TEST_CASE("quota warns about keys Kubernetes never enforces and about uncounted quotas", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(4);
  in.quotas = {quota("plain", {{"nvidia.com/gpu", "2"}, {"limits.nvidia.com/gpu", "2"}}, {{"nvidia.com/gpu", "0"}}),
               quota("fresh", {{"requests.nvidia.com/gpu", "8"}})};
  auto f = ops::check_quota(in);
  CHECK_FALSE(ops::has_refusal(f));
  CHECK(messages(f) ==
        std::vector<std::string>{
            "warning: quota team-a/plain sets nvidia.com/gpu: 2, which Kubernetes accepts but never enforces "
            "(only requests.nvidia.com/gpu counts); gpuctl quota fix team-a rewrites it",
            "warning: quota team-a/plain sets limits.nvidia.com/gpu: 2, which Kubernetes accepts but never "
            "enforces (only requests.nvidia.com/gpu counts); gpuctl quota fix team-a rewrites it",
            "warning: quota team-a/fresh has not been counted yet (no status.used for "
            "requests.nvidia.com/gpu): the API server refuses pods until kube-controller-manager fills it in"});
}

TEST_CASE("quota applies only quotas whose scopes match the pod", "[preflight]") {
  ops::PreflightInput in;
  json full = {{"requests.nvidia.com/gpu", "8"}};
  json used = {{"requests.nvidia.com/gpu", "8"}};
  json high = {{"scopeSelector",
                {{"matchExpressions",
                  json::array({{{"scopeName", "PriorityClass"}, {"operator", "In"}, {"values", {"high"}}}})}}}};
  in.quotas = {quota("high", full, used, high)};

  json j = job(1);
  j["spec"]["template"]["spec"]["priorityClassName"] = "low";
  in.job = j;
  CHECK(ops::check_quota(in).empty());  // not this pod's class
  j["spec"]["template"]["spec"]["priorityClassName"] = "high";
  in.job = j;
  CHECK(ops::check_quota(in).size() == 1);
  // No class named: the cluster's default class may apply, so no refusal rests on it.
  in.job = job(1);
  CHECK(ops::check_quota(in).empty());

  in.quotas = {quota("terminating", full, used, json{{"scopes", {"Terminating"}}})};
  CHECK(ops::check_quota(in).empty());  // the template sets no activeDeadlineSeconds
  in.quotas = {quota("not-terminating", full, used, json{{"scopes", {"NotTerminating"}}})};
  CHECK(ops::check_quota(in).size() == 1);
  in.quotas = {quota("unknown-scope", full, used, json{{"scopes", {"SomethingNew"}}})};
  CHECK(ops::check_quota(in).empty());
}

TEST_CASE("limit-range refuses a container or pod over the maximum", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(8);
  in.limit_ranges = {limit_range(
      "gpu-max", {{"type", "Container"}, {"max", {{"nvidia.com/gpu", "4"}}}, {"default", {{"nvidia.com/gpu", "4"}}}})};
  auto f = ops::check_limit_range(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].check == "limit-range");
  CHECK(f[0].message ==
        "LimitRange team-a/gpu-max allows at most 4 nvidia.com/gpu per container, container \"main\" asks for 8; "
        "the API server would refuse every pod");

  in.limit_ranges = {limit_range("pod-max", {{"type", "Pod"}, {"max", {{"nvidia.com/gpu", "4"}}}})};
  f = ops::check_limit_range(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "LimitRange team-a/pod-max allows at most 4 nvidia.com/gpu per pod, each pod of this job asks for 8; "
        "the API server would refuse every pod");

  in.job = job(4);
  CHECK(ops::check_limit_range(in).empty());
  in.limit_ranges = {limit_range("cpu-only", {{"type", "Container"}, {"max", {{"cpu", "1"}}}})};
  in.job = job(8);
  CHECK(ops::check_limit_range(in).empty());  // not about GPUs
}

TEST_CASE("limit-range minimums and defaults for containers without GPUs", "[preflight]") {
  ops::PreflightInput in;
  in.job = job(1);
  in.limit_ranges = {limit_range("gpu-min", {{"type", "Container"}, {"min", {{"nvidia.com/gpu", "2"}}}})};
  auto f = ops::check_limit_range(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "LimitRange team-a/gpu-min requires at least 2 nvidia.com/gpu per container, container \"main\" asks "
        "for 1; the API server would refuse every pod");

  // A sidecar without GPUs gets the default a Container max implies.
  json j = job(4);
  j["spec"]["template"]["spec"]["containers"].push_back({{"name", "sidecar"}, {"image", "log:1"}});
  in.job = j;
  in.limit_ranges = {limit_range(
      "gpu-max", {{"type", "Container"}, {"max", {{"nvidia.com/gpu", "4"}}}, {"default", {{"nvidia.com/gpu", "4"}}}})};
  f = ops::check_limit_range(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == ops::FindingSeverity::warning);
  CHECK(f[0].message ==
        "LimitRange team-a/gpu-max gives container \"sidecar\", which asks for no nvidia.com/gpu, the default "
        "of 4: each pod takes that many more");

  // A Pod-type maximum refuses pods that set no limit for it, as LimitRanger does.
  in.job = job(0);
  in.limit_ranges = {limit_range("pod-max", {{"type", "Pod"}, {"max", {{"nvidia.com/gpu", "4"}}}})};
  f = ops::check_limit_range(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "LimitRange team-a/pod-max limits nvidia.com/gpu per pod, and the API server refuses pods that set no "
        "nvidia.com/gpu limit, as this job's do");
}

TEST_CASE("volume-claim refuses a missing or unbound claim", "[preflight]") {
  ops::PreflightInput in;
  in.job = with_claim(job(1), "data", "datasets");
  auto f = ops::check_volume_claims(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].check == "volume-claim");
  CHECK(f[0].message ==
        "PersistentVolumeClaim team-a/datasets (volume \"data\") does not exist: the pods would never start; "
        "create it first or fix --volume");

  in.claims["datasets"] = claim("datasets", "Bound");
  CHECK(ops::check_volume_claims(in).empty());

  in.claims["datasets"] = claim("datasets", "Lost");
  CHECK(messages(ops::check_volume_claims(in)) ==
        std::vector<std::string>{
            "refusal: PersistentVolumeClaim team-a/datasets is Lost, not Bound: the pods would never start; "
            "fix or recreate the claim"});

  in.claims["datasets"] = claim("datasets", "Pending", "fast");
  in.storage_classes["fast"] = json{{"metadata", {{"name", "fast"}}}, {"volumeBindingMode", "Immediate"}};
  CHECK(messages(ops::check_volume_claims(in)) ==
        std::vector<std::string>{
            "refusal: PersistentVolumeClaim team-a/datasets is Pending, not Bound (storage class fast binds "
            "Immediate): the pods would wait until it binds"});

  in.storage_classes["fast"]["volumeBindingMode"] = "WaitForFirstConsumer";
  CHECK(ops::check_volume_claims(in).empty());  // binds when the pod is scheduled

  in.storage_classes.clear();
  CHECK(messages(ops::check_volume_claims(in)) ==
        std::vector<std::string>{
            "refusal: PersistentVolumeClaim team-a/datasets is Pending and its storage class fast does not "
            "exist: it will never bind"});
  in.unreadable_storage_classes.insert("fast");
  auto w = ops::check_volume_claims(in);
  REQUIRE(w.size() == 1);
  CHECK(w[0].severity == ops::FindingSeverity::warning);

  in.claims["datasets"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  CHECK(messages(ops::check_volume_claims(in)) ==
        std::vector<std::string>{
            "refusal: PersistentVolumeClaim team-a/datasets is being deleted: the pods would never start"});
}

TEST_CASE("volume-claim warns when a ReadWriteOnce claim is mounted elsewhere", "[preflight]") {
  ops::PreflightInput in;
  in.job = with_claim(job(1), "data", "ckpt");
  in.claims["ckpt"] = claim("ckpt", "Bound");
  json user = running_pod("old-train", "h7", 8, "team-a");
  user["spec"]["volumes"] = json::array({{{"name", "v"}, {"persistentVolumeClaim", {{"claimName", "ckpt"}}}}});
  in.pods = {running_pod("other", "h1", 1, "team-b"), user};
  auto f = ops::check_volume_claims(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == ops::FindingSeverity::warning);
  CHECK(f[0].message ==
        "PersistentVolumeClaim team-a/ckpt is ReadWriteOnce and already mounted by pod team-a/old-train on node "
        "h7: pods of this job placed on another node cannot attach it");
  in.claims["ckpt"] = claim("ckpt", "Bound", "", {"ReadWriteMany"});
  CHECK(ops::check_volume_claims(in).empty());
}

TEST_CASE("pod_from_job_template builds the pod the Job controller would create", "[preflight]") {
  json j = job(2);
  j["spec"]["template"]["metadata"]["annotations"] = {{"note", "x"}};
  json pod = ops::pod_from_job_template(j);
  CHECK(pod["apiVersion"] == "v1");
  CHECK(pod["kind"] == "Pod");
  CHECK(pod["metadata"]["generateName"] == "train-");
  CHECK(pod["metadata"]["namespace"] == "team-a");
  CHECK(pod["metadata"]["labels"] ==
        json{{"app", "train"}, {"batch.kubernetes.io/job-name", "train"}, {"job-name", "train"}});
  CHECK(pod["metadata"]["annotations"] == json{{"note", "x"}});
  CHECK(pod["spec"] == j["spec"]["template"]["spec"]);
  CHECK_FALSE(pod["metadata"].contains("name"));

  j["spec"]["completionMode"] = "Indexed";
  pod = ops::pod_from_job_template(j);
  CHECK(pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0");
  CHECK(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0");
}

TEST_CASE("collect_preflight_input reads nodes, bound pods, quotas, limit ranges, claims and classes", "[preflight]") {
  FakeClient fc;
  auto& fake = *fc.fake;
  fake.on("GET", kube::paths::nodes(), json_answer(200, list_of({gpu_node("h1", kH100, 8)}).dump()));
  fake.on("GET", kube::paths::pods(), json_answer(200, list_of({running_pod("p", "h1", 4)}).dump()),
          "fieldSelector=spec.nodeName");
  fake.on(
      "GET", kube::paths::resource_quotas("team-a"),
      json_answer(
          200, list_of({quota("gpu", {{"requests.nvidia.com/gpu", "8"}}, {{"requests.nvidia.com/gpu", "0"}})}).dump()));
  fake.on("GET", kube::paths::limit_ranges("team-a"), json_answer(200, list_of({}).dump()));
  fake.on("GET", kube::paths::persistent_volume_claim("team-a", "data"),
          json_answer(200, claim("data", "Pending", "wffc").dump()));
  fake.on(
      "GET", kube::paths::persistent_volume_claim("team-a", "gone"),
      json_answer(
          404,
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"persistentvolumeclaims \"gone\" not found","reason":"NotFound","code":404})"));
  fake.on(
      "GET", kube::paths::storage_class("wffc"),
      json_answer(200, json{{"metadata", {{"name", "wffc"}}}, {"volumeBindingMode", "WaitForFirstConsumer"}}.dump()));

  json j = with_claim(with_claim(job(4), "d", "data"), "g", "gone");
  auto in = ops::collect_preflight_input(*fc.client, j);
  REQUIRE(in);
  CHECK(fake.unexpected().empty());
  CHECK(in->nodes.size() == 1);
  CHECK(in->pods.size() == 1);
  CHECK(in->pods_listed);
  CHECK(in->quotas.size() == 1);
  CHECK(in->limit_ranges.empty());
  CHECK(in->claims.size() == 1);
  CHECK(in->claims.contains("data"));
  CHECK(in->storage_classes.contains("wffc"));
  CHECK(fake.count("GET") == 7);

  auto findings = ops::run_preflight(*in);
  CHECK(messages(findings) ==
        std::vector<std::string>{
            "refusal: PersistentVolumeClaim team-a/gone (volume \"g\") does not exist: the pods would never "
            "start; create it first or fix --volume"});
}

TEST_CASE("collect_preflight_input tolerates a forbidden pod list and storage class, fails on other errors",
          "[preflight]") {
  const std::string forbidden =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden","reason":"Forbidden","code":403})";
  FakeClient fc;
  auto& fake = *fc.fake;
  fake.on("GET", kube::paths::nodes(), json_answer(200, list_of({}).dump()));
  fake.on("GET", kube::paths::pods(), json_answer(403, forbidden));
  fake.on("GET", kube::paths::resource_quotas("team-a"), json_answer(200, list_of({}).dump()));
  fake.on("GET", kube::paths::limit_ranges("team-a"), json_answer(200, list_of({}).dump()));
  fake.on("GET", kube::paths::persistent_volume_claim("team-a", "data"),
          json_answer(200, claim("data", "Pending", "secret").dump()));
  fake.on("GET", kube::paths::storage_class("secret"), json_answer(403, forbidden));
  auto in = ops::collect_preflight_input(*fc.client, with_claim(job(1), "d", "data"));
  REQUIRE(in);
  CHECK_FALSE(in->pods_listed);
  CHECK(in->unreadable_storage_classes == std::set<std::string>{"secret"});

  FakeClient broken;
  broken.fake->on("GET", kube::paths::nodes(), json_answer(200, list_of({}).dump()));
  broken.fake->on("GET", kube::paths::pods(), json_answer(200, list_of({}).dump()));
  broken.fake->on("GET", kube::paths::resource_quotas("team-a"), json_answer(200, list_of({}).dump()));
  broken.fake->on("GET", kube::paths::limit_ranges("team-a"), json_answer(200, list_of({}).dump()));
  broken.fake->on("GET", kube::paths::persistent_volume_claim("team-a", "data"), json_answer(403, forbidden));
  auto failed = ops::collect_preflight_input(*broken.client, with_claim(job(1), "d", "data"));
  REQUIRE_FALSE(failed);
  CHECK(failed.error().is_forbidden());
  CHECK(failed.error().message.starts_with("reading PersistentVolumeClaim team-a/data: "));
}
