// gpuctl quota and GPUs as DRA devices: the device class and resource claim keys in the view and
// its JSON, `quota set --devices/--claims` (validation, the object, the below-use warning through
// a fake transport), and fix leaving the DRA keys alone.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/quota/quota.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

json dra_quota(json hard, json used = nullptr) {
  json q = {{"apiVersion", "v1"},
            {"kind", "ResourceQuota"},
            {"metadata", {{"name", "dra"}, {"namespace", "team-a"}, {"resourceVersion", "7"}}},
            {"spec", {{"hard", std::move(hard)}}}};
  if (!used.is_null()) q["status"] = {{"used", std::move(used)}};
  return q;
}

}  // namespace

TEST_CASE("quota: the DRA keys of NVIDIA's classes and the claim count are GPU keys, enforced as written", "[quota]") {
  auto devices = ops::classify_gpu_quota_key("gpu.nvidia.com.deviceclass.resource.k8s.io/devices");
  REQUIRE(devices);
  CHECK(devices->enforced);
  CHECK(devices->device_class == "gpu.nvidia.com");
  auto mig = ops::classify_gpu_quota_key("mig.nvidia.com.deviceclass.resource.k8s.io/devices");
  REQUIRE(mig);
  CHECK(mig->device_class == "mig.nvidia.com");
  auto claims = ops::classify_gpu_quota_key("count/resourceclaims.resource.k8s.io");
  REQUIRE(claims);
  CHECK(claims->enforced);
  CHECK(claims->resource_claims);
  // Another vendor's class is not a GPU key; neither is a lookalike.
  CHECK_FALSE(ops::classify_gpu_quota_key("nic.example.com.deviceclass.resource.k8s.io/devices"));
  CHECK_FALSE(ops::classify_gpu_quota_key("count/resourceclaimtemplates.resource.k8s.io"));
  // Nothing for fix to rewrite.
  json q = dra_quota({{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "8"},
                      {"count/resourceclaims.resource.k8s.io", "4"},
                      {"nvidia.com/gpu", "8"}});
  auto findings = ops::check_quota_keys(q);
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].key == "nvidia.com/gpu");
  auto fix = ops::plan_quota_fix(q);
  REQUIRE(fix);
  CHECK(fix->object["spec"]["hard"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "8");
  CHECK(fix->object["spec"]["hard"]["count/resourceclaims.resource.k8s.io"] == "4");
}

TEST_CASE("quota: the view lists DRA keys after the extended resources, with hard, used and the class", "[quota]") {
  ops::QuotaViewInput input;
  input.quotas = {dra_quota({{"count/resourceclaims.resource.k8s.io", "4"},
                             {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "8"},
                             {"requests.nvidia.com/gpu", "2"},
                             {"cpu", "64"}},
                            {{"count/resourceclaims.resource.k8s.io", "1"},
                             {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "3"},
                             {"requests.nvidia.com/gpu", "0"}})};
  auto list = ops::build_quota_view(input);
  REQUIRE(list.items.size() == 1);
  REQUIRE(list.items[0].quotas.size() == 1);
  const auto& r = list.items[0].quotas[0].resources;
  REQUIRE(r.size() == 3);
  CHECK(r[0].resource == "nvidia.com/gpu");
  CHECK(r[1].device_class == "gpu.nvidia.com");
  CHECK(r[1].hard == 8);
  CHECK(r[1].used == 3);
  CHECK(r[1].free() == 5);
  CHECK(r[2].key == "count/resourceclaims.resource.k8s.io");
  CHECK(r[2].used == 1);
  json j = ops::to_json(list);
  const json& resources = j["items"][0]["quotas"][0]["resources"];
  CHECK(resources[1]["deviceClass"] == "gpu.nvidia.com");
  CHECK(resources[1]["key"] == "gpu.nvidia.com.deviceclass.resource.k8s.io/devices");
  CHECK(resources[1]["free"] == 5);
  CHECK(resources[0]["deviceClass"].is_null());
  CHECK(resources[2]["deviceClass"].is_null());
  CHECK(j["findings"].empty());
}

TEST_CASE("quota: set takes --devices CLASS=N and --claims N, and refuses them in the wrong form", "[quota]") {
  auto ok = ops::parse_quota_spec("team-a", "8", std::nullopt, {}, {"mig.nvidia.com=14", "gpu.nvidia.com=8"},
                                  std::string_view("4"));
  REQUIRE(ok);
  REQUIRE(ok->devices.size() == 2);
  CHECK(ok->devices[0] == std::pair<std::string, std::int64_t>{"gpu.nvidia.com", 8});  // sorted
  CHECK(ok->claims == 4);
  CHECK(ops::build_gpu_quota(*ok)["spec"]["hard"] == json::parse(R"({
    "requests.nvidia.com/gpu": "8",
    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8",
    "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "14",
    "count/resourceclaims.resource.k8s.io": "4"})"));
  // Without them the quota is what it always was.
  auto plain = ops::parse_quota_spec("team-a", "8", std::nullopt, {});
  REQUIRE(plain);
  CHECK(ops::build_gpu_quota(*plain)["spec"]["hard"] == json{{"requests.nvidia.com/gpu", "8"}});

  struct Bad {
    std::vector<std::string> resources, devices;
    std::optional<std::string> claims;
    std::string message;
  };
  for (const auto& b : std::vector<Bad>{
           {{},
            {"gpu.nvidia.com"},
            std::nullopt,
            "--devices \"gpu.nvidia.com\": expected CLASS=COUNT, e.g. --devices gpu.nvidia.com=8"},
           {{},
            {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices=8"},
            std::nullopt,
            "--devices \"gpu.nvidia.com.deviceclass.resource.k8s.io/devices=8\": give the DeviceClass name alone "
            "(--devices gpu.nvidia.com=8); gpuctl writes the .deviceclass.resource.k8s.io/devices key"},
           {{}, {"GPU_class=1"}, std::nullopt, ""},
           {{}, {"gpu.nvidia.com=-1"}, std::nullopt, ""},
           {{},
            {"gpu.nvidia.com=1", "gpu.nvidia.com=2"},
            std::nullopt,
            "--devices gpu.nvidia.com is given twice: give each class once"},
           {{}, {}, std::string("many"), ""},
           {{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices=8"},
            {},
            std::nullopt,
            "--resource \"gpu.nvidia.com.deviceclass.resource.k8s.io/devices=8\": DRA devices and claims are set with "
            "--devices CLASS=COUNT and --claims COUNT"},
           {{"count/resourceclaims.resource.k8s.io=4"}, {}, std::nullopt, ""},
       }) {
    CAPTURE(b.resources, b.devices);
    std::optional<std::string_view> claims;
    if (b.claims) claims = *b.claims;
    auto r = ops::parse_quota_spec("team-a", "8", std::nullopt, b.resources, b.devices, claims);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    if (!b.message.empty()) CHECK(r.error().message == b.message);
  }
}

TEST_CASE("quota: set warns when a DRA key goes below the controller's count", "[quota]") {
  ops::QuotaSpec spec{"team-a", 8, std::nullopt, {}, {{"gpu.nvidia.com", 2}}, 1};
  auto warnings = ops::below_use_warnings(
      spec, {{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", 4}, {"count/resourceclaims.resource.k8s.io", 1}});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "namespace team-a already uses 4 gpu.nvidia.com.deviceclass.resource.k8s.io/devices, more than the new "
        "quota of 2: existing ResourceClaims stay, new ones are refused (their pods wait in Pending) until the use "
        "is below it");

  // Through set_quota: the existing quota's status.used is where the DRA counts come from.
  FakeClient c;
  const std::string path = "/api/v1/namespaces/team-a/resourcequotas/gpuctl-gpu-quota";
  json existing =
      dra_quota({{"requests.nvidia.com/gpu", "8"}, {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "8"}},
                {{"requests.nvidia.com/gpu", "0"}, {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "6"}});
  existing["metadata"]["name"] = "gpuctl-gpu-quota";
  existing["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "gpuctl"}};
  c.fake->on("GET", path, json_answer(200, existing.dump()));
  c.fake->on("GET", path, json_answer(200, existing.dump()));
  c.fake->on("PUT", path, json_answer(200, existing.dump()));
  auto r = ops::set_quota(*c.client, spec, ops::DryRun::none);
  REQUIRE(r);
  CHECK(c.fake->unexpected().empty());
  REQUIRE(r->warnings.size() == 1);
  CHECK(r->warnings[0].find("already uses 6 gpu.nvidia.com.deviceclass") != std::string::npos);
  REQUIRE(r->objects.size() == 1);
  CHECK(r->objects[0].plan.action == ops::ApplyAction::update);
  CHECK(r->objects[0].plan.summary.find("gpu.nvidia.com.deviceclass.resource.k8s.io/devices 8 -> 2") !=
        std::string::npos);
  json sent = json::parse(c.fake->requests().back().body);
  CHECK(sent["spec"]["hard"]["count/resourceclaims.resource.k8s.io"] == "1");
}
