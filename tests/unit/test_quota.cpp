// gpuctl quota in the library: the ineffective-key check, the view from recorded objects, the
// builders (golden JSON), set/fix plans, option validation, and the writes through a fake transport.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/quota/quota.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

json quota(const std::string& ns, const std::string& name, json hard, json used = nullptr, bool managed = false) {
  json q = {{"apiVersion", "v1"},
            {"kind", "ResourceQuota"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"resourceVersion", "10"}, {"uid", "uid-" + name}}},
            {"spec", {{"hard", std::move(hard)}}}};
  if (!used.is_null()) q["status"] = {{"hard", q["spec"]["hard"]}, {"used", std::move(used)}};
  if (managed) q["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "gpuctl"}};
  return q;
}

json gpu_pod(const std::string& ns, const std::string& name, int gpus, const std::string& phase = "Running") {
  return {
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}},
      {"status", {{"phase", phase}}}};
}

json failed_create(const std::string& ns, const std::string& job, const std::string& uid, const std::string& message,
                   const std::string& at, int count = 1) {
  return {{"metadata", {{"name", job + ".1"}, {"namespace", ns}}},
          {"involvedObject", {{"kind", "Job"}, {"name", job}, {"namespace", ns}, {"uid", uid}}},
          {"type", "Warning"},
          {"reason", "FailedCreate"},
          {"message", message},
          {"count", count},
          {"lastTimestamp", at}};
}

json job(const std::string& ns, const std::string& name, const std::string& uid, int active = 0,
         bool complete = false) {
  json j = {{"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
            {"spec", {{"parallelism", 1}}},
            {"status", json::object()}};
  if (active > 0) j["status"]["active"] = active;
  if (complete) j["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
  return j;
}

const std::string kExceeded =
    "Error creating: pods \"train-abc\" is forbidden: exceeded quota: gpuctl-gpu-quota, requested: "
    "requests.nvidia.com/gpu=3, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2";

}  // namespace

TEST_CASE("ops::classify_gpu_quota_key", "[quota]") {
  auto enforced = ops::classify_gpu_quota_key("requests.nvidia.com/gpu");
  REQUIRE(enforced);
  CHECK(enforced->enforced);
  CHECK(enforced->resource == "nvidia.com/gpu");
  auto plain = ops::classify_gpu_quota_key("nvidia.com/mig-1g.10gb");
  REQUIRE(plain);
  CHECK_FALSE(plain->enforced);
  CHECK(plain->resource == "nvidia.com/mig-1g.10gb");
  auto limits = ops::classify_gpu_quota_key("limits.nvidia.com/gpu");
  REQUIRE(limits);
  CHECK_FALSE(limits->enforced);
  for (const char* other : {"requests.cpu", "pods", "count/jobs.batch", "requests.amd.com/gpu", "nvidia.com/"}) {
    CAPTURE(other);
    CHECK_FALSE(ops::classify_gpu_quota_key(other));
  }
}

TEST_CASE("ops::check_quota_keys flags every nvidia.com key without requests. with the fix", "[quota]") {
  auto findings = ops::check_quota_keys(quota("team-a", "gpus",
                                              {{"nvidia.com/gpu", "1"},
                                               {"limits.nvidia.com/gpu", "2"},
                                               {"requests.nvidia.com/gpu", "4"},
                                               {"requests.cpu", "8"}}));
  REQUIRE(findings.size() == 2);
  CHECK(findings[0].key == "limits.nvidia.com/gpu");
  CHECK(findings[1].key == "nvidia.com/gpu");
  CHECK(findings[1].value == "1");
  CHECK(findings[1].replacement == "requests.nvidia.com/gpu");
  CHECK(findings[1].message ==
        "quota team-a/gpus: key nvidia.com/gpu is never enforced by Kubernetes; use requests.nvidia.com/gpu (gpuctl "
        "quota fix team-a)");
  CHECK(ops::check_quota_keys(quota("team-a", "ok", {{"requests.nvidia.com/gpu", "4"}})).empty());
  CHECK(ops::check_quota_keys(json::object()).empty());
}

TEST_CASE("ops::build_quota_view from recorded objects", "[quota]") {
  ops::QuotaViewInput in;
  in.quotas = {
      quota("team-a", "gpuctl-gpu-quota",
            {{"requests.nvidia.com/gpu", "4"}, {"requests.nvidia.com/mig-1g.10gb", "7"}, {"requests.cpu", "8"}},
            {{"requests.nvidia.com/gpu", "3"}, {"requests.nvidia.com/mig-1g.10gb", "0"}, {"requests.cpu", "1"}}, true),
      quota("team-b", "gpus", {{"nvidia.com/gpu", "1"}}, {{}}),
      quota("team-c", "fresh", {{"requests.nvidia.com/gpu", "2"}}),
      quota("team-d", "cpu-only", {{"requests.cpu", "8"}})};
  in.limit_ranges = {
      {{"metadata", {{"name", "gpuctl-gpu-limits"}, {"namespace", "team-a"}}},
       {"spec",
        {{"limits", json::array({{{"type", "Container"}, {"max", {{"nvidia.com/gpu", "2"}, {"cpu", "4"}}}},
                                 {{"type", "Pod"}, {"max", {{"nvidia.com/gpu", "3"}}}}})}}}}};
  for (const json& pod :
       {gpu_pod("team-a", "p1", 3), gpu_pod("team-b", "p2", 2), gpu_pod("team-b", "done", 4, "Succeeded"),
        gpu_pod("team-e", "p3", 1), gpu_pod("team-f", "cpu", 0)})
    in.pod_requests.add(pod);
  in.events = {failed_create("team-a", "train", "u1", kExceeded, "2026-12-02T10:00:00Z", 2),
               failed_create("team-a", "train", "u1", kExceeded, "2026-12-02T10:05:00Z", 3),
               failed_create("team-a", "started", "u2", kExceeded, "2026-12-02T10:00:00Z"),
               failed_create("team-a", "gone", "u3", kExceeded, "2026-12-02T10:00:00Z"),
               failed_create("team-a", "replaced", "old-uid", kExceeded, "2026-12-02T10:00:00Z"),
               failed_create("team-a", "finished", "u5", kExceeded, "2026-12-02T10:00:00Z"),
               failed_create("team-a", "other", "u6", "Error creating: image pull failed", "2026-12-02T10:00:00Z")};
  in.jobs = {job("team-a", "train", "u1"), job("team-a", "started", "u2", 1), job("team-a", "replaced", "new-uid"),
             job("team-a", "finished", "u5", 0, true), job("team-a", "other", "u6")};
  in.always_show = {"empty"};

  auto list = ops::build_quota_view(in);
  REQUIRE(list.items.size() == 5);  // empty, team-a, team-b, team-c, team-e (team-d: no GPU key, team-f: no GPUs)
  CHECK(list.items[0].namespace_name == "empty");
  CHECK(list.items[0].quotas.empty());
  CHECK(list.items[0].requested.empty());

  const auto& a = list.items[1];
  CHECK(a.namespace_name == "team-a");
  REQUIRE(a.quotas.size() == 1);
  CHECK(a.quotas[0].managed_by_gpuctl);
  REQUIRE(a.quotas[0].resources.size() == 2);
  CHECK(a.quotas[0].resources[0].key == "requests.nvidia.com/gpu");
  CHECK(a.quotas[0].resources[0].hard == 4);
  CHECK(a.quotas[0].resources[0].used == 3);
  CHECK(a.quotas[0].resources[0].free() == 1);
  CHECK(a.quotas[0].resources[1].resource == "nvidia.com/mig-1g.10gb");
  CHECK(a.max_per_pod("nvidia.com/gpu")->max == 3);  // the Pod max wins over the container max
  CHECK(a.max_per_pod("nvidia.com/gpu")->type == "Pod");
  REQUIRE(a.held_back.size() == 1);  // started (running), gone, replaced, finished and unparsable are dropped
  CHECK(a.held_back[0].name == "train");
  CHECK(a.held_back[0].count == 5);
  CHECK(a.held_back[0].last_seen == "2026-12-02T10:05:00Z");
  CHECK(a.held_back[0].denial.quota == "gpuctl-gpu-quota");
  CHECK(a.findings.empty());

  const auto& b = list.items[2];
  REQUIRE(b.quotas.size() == 1);
  CHECK_FALSE(b.quotas[0].resources[0].enforced);
  CHECK_FALSE(b.quotas[0].resources[0].used);
  CHECK(b.requested.at("nvidia.com/gpu") == 2);  // the Succeeded pod does not count
  REQUIRE(b.findings.size() == 1);

  const auto& c = list.items[3];
  CHECK(c.quotas[0].resources[0].enforced);
  CHECK_FALSE(c.quotas[0].resources[0].used);  // no status yet: not counted
  CHECK(list.items[4].namespace_name == "team-e");
  CHECK(list.items[4].quotas.empty());

  json doc = ops::to_json(list);
  CHECK(doc["apiVersion"] == "gpuctl.io/v1alpha1");
  CHECK(doc["kind"] == "GPUQuotaList");
  CHECK(doc["items"][1]["quotas"][0]["resources"][0] == json{{"resource", "nvidia.com/gpu"},
                                                             {"deviceClass", nullptr},
                                                             {"key", "requests.nvidia.com/gpu"},
                                                             {"enforced", true},
                                                             {"hard", 4},
                                                             {"used", 3},
                                                             {"free", 1}});
  CHECK(doc["items"][1]["maxPerPod"] == 3);
  CHECK(doc["items"][1]["heldBack"][0]["denial"] == "QuotaExceeded");
  CHECK(doc["items"][3]["quotas"][0]["resources"][0]["used"].is_null());
  CHECK(doc["findings"].size() == 1);
  CHECK(doc["findings"][0]["key"] == "nvidia.com/gpu");

  in.jobs.clear();
  in.jobs_listed = false;  // jobs unreadable: keep what the events say
  CHECK(ops::build_quota_view(in).items[1].held_back.size() == 5);
}

TEST_CASE("ops::NamespaceGpuRequests sums GPU requests per namespace as pods arrive", "[quota]") {
  ops::NamespaceGpuRequests requests;
  requests.add(gpu_pod("team-a", "p1", 3));
  requests.add(gpu_pod("team-a", "p2", 2));
  requests.add(gpu_pod("team-a", "done", 4, "Failed"));
  requests.add(gpu_pod("team-b", "cpu", 0));
  json bad = gpu_pod("team-c", "bad", 1);
  bad["spec"]["containers"] = "not a list";
  requests.add(bad);

  REQUIRE(requests.by_namespace.size() == 1);  // team-b asks no GPU, team-c's pod is malformed
  CHECK(requests.by_namespace.at("team-a") == std::map<std::string, std::int64_t>{{"nvidia.com/gpu", 5}});
  REQUIRE(requests.skipped.size() == 1);
  CHECK(requests.skipped[0].find("pod team-c/bad skipped: spec.containers") == 0);
  CHECK(requests.seen == 5);
}

TEST_CASE("ops::build_gpu_quota and build_gpu_limit_range golden objects", "[quota]") {
  ops::QuotaSpec spec{"team-a", 8, 4, {{"nvidia.com/mig-1g.10gb", 7}}, {}, std::nullopt};
  CHECK(ops::build_gpu_quota(spec) == json::parse(R"({
    "apiVersion": "v1", "kind": "ResourceQuota",
    "metadata": {"name": "gpuctl-gpu-quota", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpuctl"}},
    "spec": {"hard": {"requests.nvidia.com/gpu": "8", "requests.nvidia.com/mig-1g.10gb": "7"}}})"));
  CHECK(ops::build_gpu_limit_range(spec) == json::parse(R"({
    "apiVersion": "v1", "kind": "LimitRange",
    "metadata": {"name": "gpuctl-gpu-limits", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpuctl"}},
    "spec": {"limits": [
      {"type": "Container", "max": {"nvidia.com/gpu": "4"}, "default": {"nvidia.com/gpu": "0"}, "defaultRequest": {"nvidia.com/gpu": "0"}},
      {"type": "Pod", "max": {"nvidia.com/gpu": "4"}}]}})"));
}

TEST_CASE("ops::parse_quota_spec validates every flag with the fix", "[quota]") {
  auto ok = ops::parse_quota_spec("team-a", "8", std::string_view("4"),
                                  {"nvidia.com/mig-2g.20gb=1", "nvidia.com/mig-1g.10gb=7"});
  REQUIRE(ok);
  CHECK(ok->gpus == 8);
  CHECK(ok->max_per_pod == 4);
  REQUIRE(ok->resources.size() == 2);
  CHECK(ok->resources[0].first == "nvidia.com/mig-1g.10gb");  // sorted
  CHECK(ops::parse_quota_spec("team-a", "0", std::nullopt, {}));

  struct Bad {
    std::string ns, gpus;
    std::optional<std::string> max;
    std::vector<std::string> resources;
    std::string message;
  };
  for (const auto& b : std::vector<Bad>{
           {"team-a",
            "-1",
            std::nullopt,
            {},
            "--gpus \"-1\": give the number of GPUs the namespace may request in all, a whole number of 0 or more "
            "(e.g. --gpus 8)"},
           {"team-a", "1.5", std::nullopt, {}, ""},
           {"team-a",
            "2",
            std::string("x"),
            {},
            "--max-per-pod \"x\": give the most GPUs one pod may request, a whole number of 0 or more (e.g. "
            "--max-per-pod 4)"},
           {"team-a",
            "2",
            std::nullopt,
            {"requests.nvidia.com/mig-1g.10gb=2"},
            "--resource \"requests.nvidia.com/mig-1g.10gb=2\": give the resource name without the \"requests.\" prefix "
            "(--resource nvidia.com/mig-1g.10gb=2); gpuctl writes the requests. key, the only one Kubernetes enforces"},
           {"team-a", "2", std::nullopt, {"limits.nvidia.com/gpu=2"}, ""},
           {"team-a",
            "2",
            std::nullopt,
            {"nvidia.com/gpu=2"},
            "--resource \"nvidia.com/gpu=2\": whole GPUs are set with --gpus 2"},
           {"team-a", "2", std::nullopt, {"cpu=2"}, ""},
           {"team-a", "2", std::nullopt, {"nvidia.com/mig-1g.10gb"}, ""},
           {"team-a", "2", std::nullopt, {"nvidia.com/mig-1g.10gb=1.5"}, ""},
           {"team-a",
            "2",
            std::nullopt,
            {"nvidia.com/x=1", "nvidia.com/x=2"},
            "--resource nvidia.com/x is given twice: give each resource once"},
           {"Team_A", "2", std::nullopt, {}, ""}}) {
    CAPTURE(b.ns, b.gpus, b.resources);
    std::optional<std::string_view> max;
    if (b.max) max = *b.max;
    auto r = ops::parse_quota_spec(b.ns, b.gpus, max, b.resources);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    if (!b.message.empty()) CHECK(r.error().message == b.message);
  }
}

TEST_CASE("ops::plan_managed_object creates, leaves alone, reconfigures, refuses others' objects", "[quota]") {
  ops::QuotaSpec spec{"team-a", 2, std::nullopt, {}, {}, std::nullopt};
  json desired = ops::build_gpu_quota(spec);
  auto created = ops::plan_managed_object(desired, std::nullopt);
  REQUIRE(created);
  CHECK(created->action == ops::ApplyAction::create);
  CHECK(created->object == desired);

  json existing = quota("team-a", "gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "2000m"}},
                        {{"requests.nvidia.com/gpu", "1"}}, true);
  auto same = ops::plan_managed_object(desired, existing);
  REQUIRE(same);
  CHECK(same->action == ops::ApplyAction::unchanged);  // 2000m is 2

  existing["spec"]["hard"] = {{"requests.nvidia.com/gpu", "4"}};
  auto update = ops::plan_managed_object(desired, existing);
  REQUIRE(update);
  CHECK(update->action == ops::ApplyAction::update);
  CHECK(update->summary == "requests.nvidia.com/gpu 4 -> 2");
  CHECK(update->object["metadata"]["resourceVersion"] == "10");  // no lost updates
  CHECK_FALSE(update->object.contains("status"));
  CHECK(update->object["spec"] == desired["spec"]);

  json theirs = quota("team-a", "gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "2"}});
  auto refused = ops::plan_managed_object(desired, theirs);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message ==
        "resourcequota team-a/gpuctl-gpu-quota exists but gpuctl did not create it (no label "
        "app.kubernetes.io/managed-by=gpuctl): "
        "delete or rename it, or add the label to let gpuctl manage it");
}

TEST_CASE("ops::below_use_warnings names the numbers", "[quota]") {
  ops::QuotaSpec spec{"team-a", 2, std::nullopt, {{"nvidia.com/mig-1g.10gb", 7}}, {}, std::nullopt};
  auto w = ops::below_use_warnings(spec, {{"nvidia.com/gpu", 3}, {"nvidia.com/mig-1g.10gb", 7}});
  REQUIRE(w.size() == 1);
  CHECK(w[0] ==
        "namespace team-a already uses 3 requests.nvidia.com/gpu, more than the new quota of 2: running pods stay, "
        "new pods asking for nvidia.com/gpu are refused until fewer than 2 are in use");
  CHECK(ops::below_use_warnings(spec, {{"nvidia.com/gpu", 2}}).empty());
}

TEST_CASE("ops::plan_quota_fix rewrites to requests. keeping the stricter value", "[quota]") {
  auto plain = ops::plan_quota_fix(
      quota("team-a", "gpus", {{"nvidia.com/gpu", "1"}, {"requests.cpu", "4"}}, {{"requests.cpu", "0"}}));
  REQUIRE(plain);
  CHECK(plain->object["spec"]["hard"] == json{{"requests.nvidia.com/gpu", "1"}, {"requests.cpu", "4"}});
  CHECK(plain->object["metadata"]["resourceVersion"] == "10");
  CHECK_FALSE(plain->object.contains("status"));
  CHECK(plain->changes == std::vector<std::string>{"nvidia.com/gpu=1 -> requests.nvidia.com/gpu=1"});

  auto both = ops::plan_quota_fix(quota(
      "team-a", "gpus", {{"nvidia.com/gpu", "8"}, {"limits.nvidia.com/gpu", "2"}, {"requests.nvidia.com/gpu", "4"}}));
  REQUIRE(both);
  CHECK(both->object["spec"]["hard"] == json{{"requests.nvidia.com/gpu", "2"}});
  CHECK(both->changes ==
        std::vector<std::string>{
            "limits.nvidia.com/gpu=2 -> requests.nvidia.com/gpu=2 (stricter than requests.nvidia.com/gpu=4)",
            "nvidia.com/gpu=8 removed (requests.nvidia.com/gpu=2 is as strict or stricter)"});
  CHECK_FALSE(ops::plan_quota_fix(quota("team-a", "ok", {{"requests.nvidia.com/gpu", "4"}})));
}

TEST_CASE("ops::set_quota creates, reports unchanged, and retries a conflict after a fresh read", "[quota]") {
  const std::string path = "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota";
  ops::QuotaSpec spec{"team-a", 2, std::nullopt, {}, {}, std::nullopt};
  {
    FakeClient c;
    c.fake->on("GET", path,
               json_answer(404, R"({"kind":"Status","code":404,"reason":"NotFound","message":"not found"})"));
    c.fake->on("GET", path,
               json_answer(404, R"({"kind":"Status","code":404,"reason":"NotFound","message":"not found"})"));
    c.fake->on("GET", "/api/v1/namespaces/team-a/pods",
               json_answer(200, json{{"items", {gpu_pod("team-a", "p", 3)}}, {"metadata", json::object()}}.dump()));
    c.fake->on("POST", "/api/v1/namespaces/team-a/resourcequotas", json_answer(201, ops::build_gpu_quota(spec).dump()));
    auto r = ops::set_quota(*c.client, spec, ops::DryRun::none);
    REQUIRE(r);
    CHECK(c.fake->unexpected().empty());
    REQUIRE(r->objects.size() == 1);
    CHECK(r->objects[0].plan.action == ops::ApplyAction::create);
    REQUIRE(r->warnings.size() == 1);  // the pods already use 3
    CHECK(json::parse(c.fake->requests().back().body) == ops::build_gpu_quota(spec));
  }
  {
    FakeClient c;
    json old = quota("team-a", "gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "4"}},
                     {{"requests.nvidia.com/gpu", "1"}}, true);
    json newer = old;
    newer["metadata"]["resourceVersion"] = "11";
    c.fake->on("GET", path, json_answer(200, old.dump()));
    c.fake->on("GET", path, json_answer(200, old.dump()));
    c.fake->on("GET", path, json_answer(200, newer.dump()));
    c.fake->on(
        "PUT", path,
        json_answer(409,
                    R"({"kind":"Status","code":409,"reason":"Conflict","message":"the object has been modified"})"));
    c.fake->on("PUT", path, json_answer(200, newer.dump()));
    auto r = ops::set_quota(*c.client, spec, ops::DryRun::none);
    REQUIRE(r);
    CHECK(c.fake->unexpected().empty());
    CHECK(r->objects[0].conflicts == 1);
    CHECK(r->objects[0].plan.action == ops::ApplyAction::update);
    CHECK(json::parse(c.fake->requests().back().body)["metadata"]["resourceVersion"] == "11");
    CHECK(r->warnings.empty());
  }
  {
    FakeClient c;  // client dry run: reads only
    json same = quota("team-a", "gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "2"}},
                      {{"requests.nvidia.com/gpu", "1"}}, true);
    c.fake->on("GET", path, json_answer(200, same.dump()));
    c.fake->on("GET", path, json_answer(200, same.dump()));
    auto r = ops::set_quota(*c.client, spec, ops::DryRun::client);
    REQUIRE(r);
    CHECK(r->objects[0].plan.action == ops::ApplyAction::unchanged);
    CHECK(c.fake->count("GET") == c.fake->requests().size());
  }
}

TEST_CASE("ops::delete_quota deletes only gpuctl's objects and names the others", "[quota]") {
  const std::string qpath = "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota";
  const std::string lpath = "/api/v1/namespaces/team-a/limitranges/gpuctl-gpu-limits";
  const std::string not_found = R"({"kind":"Status","code":404,"reason":"NotFound","message":"not found"})";
  {
    FakeClient c;
    c.fake->on("GET", qpath,
               json_answer(
                   200, quota("team-a", "gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "2"}}, nullptr, true).dump()));
    c.fake->on("DELETE", qpath, json_answer(200, R"({"kind":"Status","status":"Success"})"));
    c.fake->on("GET", lpath, json_answer(404, not_found));
    auto r = ops::delete_quota(*c.client, "team-a", ops::DryRun::none);
    REQUIRE(r);
    CHECK(c.fake->unexpected().empty());
    CHECK(r->items[0].deleted);
    CHECK_FALSE(r->items[1].deleted);
    CHECK(json::parse(c.fake->requests()[1].body)["preconditions"]["uid"] == "uid-gpuctl-gpu-quota");
  }
  {
    FakeClient c;
    c.fake->on("GET", qpath, json_answer(404, not_found));
    c.fake->on("GET", lpath, json_answer(404, not_found));
    c.fake->on("GET", "/api/v1/namespaces/team-a/resourcequotas",
               json_answer(200, json{{"items", {quota("team-a", "gpus", {{"nvidia.com/gpu", "1"}})}},
                                     {"metadata", json::object()}}
                                    .dump()));
    auto r = ops::delete_quota(*c.client, "team-a", ops::DryRun::none);
    REQUIRE_FALSE(r);
    CHECK(r.error().is_not_found());
    CHECK(r.error().message ==
          "namespace team-a has no gpuctl quota (no resourcequota/gpuctl-gpu-quota or limitrange/gpuctl-gpu-limits "
          "with label "
          "app.kubernetes.io/managed-by=gpuctl); gpuctl leaves objects it did not create alone: resourcequota/gpus "
          "(delete them with kubectl delete -n team-a ...)");
    CHECK(c.fake->count("DELETE") == 0);
  }
}
