// gpuctl quota, quota set/delete/fix in-process: the table, the JSON schema, warnings, dry runs
// and usage errors.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"

using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

json list(std::vector<json> items) {
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", json::object()}, {"items", std::move(items)}};
}

json quota(const std::string& name, json hard, json used = nullptr, bool managed = false) {
  json q = {{"apiVersion", "v1"},
            {"kind", "ResourceQuota"},
            {"metadata", {{"name", name}, {"namespace", "team-a"}, {"resourceVersion", "7"}, {"uid", "u-" + name}}},
            {"spec", {{"hard", std::move(hard)}}}};
  if (!used.is_null()) q["status"] = {{"used", std::move(used)}};
  if (managed) q["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "gpuctl"}};
  return q;
}

void serve_view(CliHarness& h, std::vector<json> quotas) {
  h.fake()
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas", json_answer(200, list(std::move(quotas)).dump()))
      .on("GET", "/api/v1/namespaces/team-a/limitranges", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/events", json_answer(200, list({}).dump()))
      .on("GET", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(200, list({}).dump()));
}

}  // namespace

TEST_CASE("cli: quota shows hard, used, free and a bar, and warns about ineffective keys", "[quota][cli]") {
  CliHarness h;
  serve_view(h,
             {quota("gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "4"}}, {{"requests.nvidia.com/gpu", "3"}}, true),
              quota("old", {{"nvidia.com/gpu", "1"}})});
  auto r = h.run({"quota", "-n", "team-a"});
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  CHECK(r.out ==
        "NAMESPACE   QUOTA              RESOURCE   USED   HARD   FREE   USAGE                           MAX/POD   "
        "HELD-BACK\n"
        "team-a      gpuctl-gpu-quota   gpu        3      4      1      [########--]                    -         0\n"
        "team-a      old                gpu        0      1      -      NOT ENFORCED (nvidia.com/gpu)   -         0\n");
  CHECK(r.err ==
        "Warning: quota team-a/old: key nvidia.com/gpu is never enforced by Kubernetes; use requests.nvidia.com/gpu "
        "(gpuctl quota fix team-a)\n");
}

TEST_CASE("cli: quota shows the DRA device class and claim keys after the extended resources", "[quota][cli]") {
  CliHarness h;
  serve_view(h, {quota("dra",
                       {{"requests.nvidia.com/gpu", "2"},
                        {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "8"},
                        {"count/resourceclaims.resource.k8s.io", "4"}},
                       {{"requests.nvidia.com/gpu", "0"},
                        {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "6"},
                        {"count/resourceclaims.resource.k8s.io", "4"}})});
  auto r = h.run({"quota", "-n", "team-a"});
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  CHECK(r.out ==
        "NAMESPACE   QUOTA   RESOURCE                 USED   HARD   FREE   USAGE          MAX/POD   HELD-BACK\n"
        "team-a      dra     gpu                      0      2      2      [----------]   -         0\n"
        "team-a      dra     gpu.nvidia.com devices   6      8      2      [########--]   -         0\n"
        "team-a      dra     resourceclaims           4      4      0      [##########]   -         0\n");
  CHECK(r.err.empty());
}

TEST_CASE("cli: quota set --devices and --claims write the DRA keys", "[quota][cli]") {
  CliHarness h;
  const std::string not_found = R"({"kind":"Status","code":404,"reason":"NotFound","message":"not found"})";
  h.fake()
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota", json_answer(404, not_found))
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota", json_answer(404, not_found))
      .on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({}).dump()));
  auto r = h.run({"quota", "set", "team-a", "--gpus", "8", "--devices", "gpu.nvidia.com=8", "--claims", "4",
                  "--dry-run=client", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  json doc = json::parse(r.out);
  CHECK(doc["items"][0]["spec"]["hard"] == json{{"requests.nvidia.com/gpu", "8"},
                                                {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "8"},
                                                {"count/resourceclaims.resource.k8s.io", "4"}});
}

TEST_CASE("cli: quota -o json prints the GPUQuotaList schema", "[quota][cli]") {
  CliHarness h;
  serve_view(h, {quota("old", {{"nvidia.com/gpu", "1"}})});
  auto r = h.run({"quota", "-n", "team-a", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "GPUQuotaList");
  CHECK(doc["items"][0]["namespace"] == "team-a");
  CHECK(doc["findings"][0]["quota"] == "old");
  CHECK(doc["findings"][0]["replacement"] == "requests.nvidia.com/gpu");
}

TEST_CASE("cli: quota set --dry-run=client sends nothing and prints the objects", "[quota][cli]") {
  CliHarness h;
  const std::string not_found = R"({"kind":"Status","code":404,"reason":"NotFound","message":"not found"})";
  h.fake()
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota", json_answer(404, not_found))
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota", json_answer(404, not_found))
      .on("GET", "/api/v1/namespaces/team-a/limitranges/gpuctl-gpu-limits", json_answer(404, not_found))
      .on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({}).dump()));
  auto r = h.run({"quota", "set", "team-a", "--gpus", "2", "--max-per-pod", "1", "--dry-run=client", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  CHECK(h.fake().count("GET") == h.fake().requests().size());
  json doc = json::parse(r.out);
  REQUIRE(doc["items"].size() == 2);
  CHECK(doc["items"][0]["spec"]["hard"]["requests.nvidia.com/gpu"] == "2");
  CHECK(doc["items"][1]["kind"] == "LimitRange");

  CliHarness text;
  text.fake()
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota",
          json_answer(200, quota("gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "2"}},
                                 {{"requests.nvidia.com/gpu", "0"}}, true)
                               .dump()))
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota",
          json_answer(200, quota("gpuctl-gpu-quota", {{"requests.nvidia.com/gpu", "2"}},
                                 {{"requests.nvidia.com/gpu", "0"}}, true)
                               .dump()));
  auto t = text.run({"quota", "set", "team-a", "--gpus", "2"});
  CHECK(t.exit_code == 0);
  CHECK(t.out == "resourcequota/gpuctl-gpu-quota unchanged\n");
}

TEST_CASE("cli: quota fix --dry-run names the change and writes nothing", "[quota][cli]") {
  CliHarness h;
  h.fake().on("GET", "/api/v1/namespaces/team-a/resourcequotas",
              json_answer(200, list({quota("old", {{"nvidia.com/gpu", "1"}})}).dump()));
  auto r = h.run({"quota", "fix", "team-a", "--dry-run"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out ==
        "resourcequota/old configured (namespace team-a): nvidia.com/gpu=1 -> requests.nvidia.com/gpu=1 (dry run)\n");
  CHECK(h.fake().requests().size() == 1);

  CliHarness f;
  f.fake()
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas",
          json_answer(200, list({quota("old", {{"nvidia.com/gpu", "1"}})}).dump()))
      .on("PUT", "/api/v1/namespaces/team-a/resourcequotas/old",
          json_answer(500, R"({"kind":"Status","code":500,"reason":"InternalError","message":"etcd is sad"})"));
  auto failed = f.run({"quota", "fix", "team-a"});
  CHECK(failed.exit_code == 1);
  CHECK(failed.err.find("error: 1 of 1 quota(s) failed: team-a/old") != std::string::npos);
}

TEST_CASE("cli: quota usage errors exit 2 with one line and no request", "[quota][cli]") {
  CliHarness h;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"quota", "set", "team-a"},
           {"quota", "set", "--gpus", "2"},
           {"quota", "set", "team-a", "--gpus", "-1"},
           {"quota", "set", "team-a", "--gpus", "2", "--max-per-pod", "two"},
           {"quota", "set", "team-a", "--gpus", "2", "--resource", "requests.nvidia.com/mig-1g.10gb=1"},
           {"quota", "set", "team-a", "--gpus", "2", "-o", "wide"},
           {"quota", "set", "Bad_NS", "--gpus", "2"},
           {"quota", "set", "team-a", "--gpus", "2", "--devices", "gpu.nvidia.com"},
           {"quota", "set", "team-a", "--gpus", "2", "--claims", "x"},
           {"quota", "delete"},
           {"quota", "-o", "bogus"}}) {
    CAPTURE(args);
    auto r = h.run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.starts_with("error: "));
  }
  CHECK(h.fake().requests().empty());
}
