// taint --device's pure part: NODE/DEVICE and device taint specs, the device found in the node's
// ResourceSlices, the DeviceTaintRule's name and shape, the plans of adding and removing, and the
// pre-flight's verdict on the claim holding the device.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fakes/dra_objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/dra/device_taint.hpp"

using json = nlohmann::json;
namespace ops = gpuctl::ops;
using gpuctl::Errc;

namespace {

const ops::DeviceRef kRef{"node1", "gpu-0"};
const ops::DraDeviceId kId{"gpu.nvidia.com", "node1", "gpu-0"};

json slice(const std::string& node, const std::string& driver, std::vector<std::string> devices) {
  json d = json::array();
  for (const auto& name : devices) d.push_back(gpuctl::testing::dra::gpu_device(name, "GPU-" + name));
  return gpuctl::testing::dra::slice(node, d, 1, 1, driver);
}

json rule(const std::string& name, json selector, const std::string& key, const std::string& value,
          const std::string& effect, const std::string& resource_version = "7") {
  json taint = {{"key", key}, {"effect", effect}, {"timeAdded", "2026-12-01T00:00:00Z"}};
  if (!value.empty()) taint["value"] = value;
  return {{"apiVersion", "resource.k8s.io/v1beta2"},
          {"kind", "DeviceTaintRule"},
          {"metadata", {{"name", name}, {"resourceVersion", resource_version}}},
          {"spec", {{"deviceSelector", selector}, {"taint", taint}}}};
}

json exact_selector() { return {{"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", "gpu-0"}}; }

gpuctl::kube::Taint taint(const std::string& key, const std::string& value, const std::string& effect) {
  gpuctl::kube::Taint t;
  t.key = key;
  t.value = value;
  t.effect = effect;
  return t;
}

ops::TaintSpec spec(const char* text) { return *ops::parse_taint_spec(text, ops::TaintTarget::device); }

}  // namespace

TEST_CASE("device_taint: NODE/DEVICE is checked by the API's name rules", "[device_taint]") {
  auto ok = ops::parse_device_ref("ip-10-0-0-1.ec2.internal/gpu-3");
  REQUIRE(ok);
  CHECK(ok->node == "ip-10-0-0-1.ec2.internal");
  CHECK(ok->device == "gpu-3");
  for (const char* bad : {"node1", "node1/", "/gpu-0", "node1/gpu/0", "Node_1/gpu-0", "node1/GPU-0"}) {
    CAPTURE(bad);
    auto r = ops::parse_device_ref(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK(r.error().message.starts_with(std::string("--device \"") + bad + "\""));
  }
}

TEST_CASE("device_taint: a device taint takes None, NoSchedule and NoExecute, never PreferNoSchedule",
          "[device_taint]") {
  CHECK(spec("gpu.health=xid-79:None").taint.effect == "None");
  CHECK(spec("gpu.health:NoExecute").taint.effect == "NoExecute");
  CHECK(spec("gpu.health-").remove);
  auto prefer = ops::parse_taint_spec("a=b:PreferNoSchedule", ops::TaintTarget::device);
  REQUIRE_FALSE(prefer);
  CHECK(prefer.error().message ==
        "invalid taint spec \"a=b:PreferNoSchedule\": effect \"PreferNoSchedule\" is not one of None, NoSchedule, "
        "NoExecute (a device taint has no PreferNoSchedule)");
  auto no_effect = ops::parse_taint_spec("a=b", ops::TaintTarget::device);
  REQUIRE_FALSE(no_effect);
  CHECK(no_effect.error().message.ends_with("as in KEY[=VALUE]:None|NoSchedule|NoExecute"));
  // A node's taints are as before.
  CHECK_FALSE(ops::parse_taint_spec("a=b:None"));
  CHECK(ops::parse_taint_spec("a=b:PreferNoSchedule"));
}

TEST_CASE("device_taint: the device is found in its node's slices, once, or the error says what there is",
          "[device_taint]") {
  std::vector<json> slices = {slice("node1", "gpu.nvidia.com", {"gpu-0", "gpu-1"}),
                              slice("node1", "compute-domain.nvidia.com", {"channel-0"})};
  auto one = ops::resolve_device(slices, kRef, "");
  REQUIRE(one);
  CHECK(*one == kId);

  auto none = ops::resolve_device(slices, {"node1", "gpu-9"}, "");
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Errc::invalid_argument);
  CHECK(none.error().message ==
        "node node1 publishes no device \"gpu-9\"; it has: channel-0 "
        "(compute-domain.nvidia.com), gpu-0 (gpu.nvidia.com), gpu-1 (gpu.nvidia.com)");

  auto no_slices = ops::resolve_device({}, kRef, "");
  REQUIRE_FALSE(no_slices);
  CHECK(no_slices.error().message.starts_with("node node1 publishes no DRA devices (no ResourceSlice"));
  CHECK(no_slices.error().message.ends_with("gpuctl taint node1 KEY=VALUE:EFFECT"));

  slices.push_back(slice("node1", "example.com", {"gpu-0"}));
  auto ambiguous = ops::resolve_device(slices, kRef, "");
  REQUIRE_FALSE(ambiguous);
  CHECK(ambiguous.error().message ==
        "device \"gpu-0\" of node node1 is published by example.com (pool node1) and gpu.nvidia.com (pool node1): "
        "choose one with --driver DRIVER");
  auto chosen = ops::resolve_device(slices, kRef, "gpu.nvidia.com");
  REQUIRE(chosen);
  CHECK(*chosen == kId);
  auto wrong_driver = ops::resolve_device(slices, kRef, "other.io");
  REQUIRE_FALSE(wrong_driver);
  CHECK(wrong_driver.error().message.find("of driver other.io") != std::string::npos);
}

TEST_CASE("device_taint: the rule's name is stable, per device and key, and always a valid name", "[device_taint]") {
  const std::string name = ops::device_taint_rule_name(kRef, kId, "gpu.health");
  CHECK(name.starts_with("gpuctl-node1-gpu-0-"));
  CHECK(name.size() == std::string("gpuctl-node1-gpu-0-").size() + 8);
  CHECK(name == ops::device_taint_rule_name(kRef, kId, "gpu.health"));
  CHECK(name != ops::device_taint_rule_name(kRef, kId, "other"));
  CHECK(name != ops::device_taint_rule_name(kRef, {"example.com", "node1", "gpu-0"}, "gpu.health"));

  // A node name of 252 characters whose cut (at 237 of them) would end in '.'.
  std::string node = "abcdefg";
  while (node.size() < 247) node += "abcdefghi.";
  node += "abcde";
  REQUIRE(node.size() == 252);
  REQUIRE(node[236] == '.');
  const std::string long_name = ops::device_taint_rule_name({node, "gpu-0"}, kId, "gpu.health");
  CHECK(long_name.size() <= 253);
  CHECK(gpuctl::kube::paths::dns_subdomain_problem(long_name).empty());
}

TEST_CASE("device_taint: the rule selects exactly the device and says who made it for what", "[device_taint]") {
  json r = ops::build_device_taint_rule("v1beta2", kRef, kId, taint("gpu.health", "xid-79", "NoSchedule"));
  CHECK(r["apiVersion"] == "resource.k8s.io/v1beta2");
  CHECK(r["kind"] == "DeviceTaintRule");
  CHECK(r["metadata"]["name"] == ops::device_taint_rule_name(kRef, kId, "gpu.health"));
  CHECK(r["metadata"]["labels"] == json({{"app.kubernetes.io/managed-by", "gpuctl"}}));
  CHECK(r["metadata"]["annotations"] == json({{"gpuctl.io/device", "node1/gpu-0"}}));
  CHECK(r["spec"] == json::parse(R"({"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node1", "device": "gpu-0"},
    "taint": {"key": "gpu.health", "value": "xid-79", "effect": "NoSchedule"}})"));
  CHECK_FALSE(ops::build_device_taint_rule("v1", kRef, kId, taint("k", "", "None"))["spec"]["taint"].contains("value"));

  CHECK(ops::selects_exactly(r, kId));
  CHECK(ops::selects(r, kId));
  json pool_wide = rule("pool", {{"driver", "gpu.nvidia.com"}, {"pool", "node1"}}, "k", "", "NoSchedule");
  CHECK_FALSE(ops::selects_exactly(pool_wide, kId));
  CHECK(ops::selects(pool_wide, kId));
  CHECK_FALSE(ops::selects(pool_wide, {"gpu.nvidia.com", "node2", "gpu-0"}));
  json with_cel = rule("cel", exact_selector(), "k", "", "NoSchedule");
  with_cel["spec"]["deviceSelector"]["selectors"] = json::array({{{"cel", {{"expression", "true"}}}}});
  CHECK_FALSE(ops::selects_exactly(with_cel, kId));
  CHECK_FALSE(ops::selects(with_cel, kId));
}

TEST_CASE("device_taint: adding creates the rule, the same again is unchanged, another value or effect updates it",
          "[device_taint]") {
  auto create = ops::plan_device_taint({}, "v1beta2", kRef, kId, spec("gpu.health=xid-79:NoSchedule"));
  REQUIRE(create);
  REQUIRE(create->writes.size() == 1);
  CHECK(create->writes[0].action == ops::DeviceTaintAction::create);
  CHECK(create->writes[0].body ==
        ops::build_device_taint_rule("v1beta2", kRef, kId, taint("gpu.health", "xid-79", "NoSchedule")));
  CHECK(create->writes[0].summary == "added gpu.health=xid-79:NoSchedule to node1/gpu-0 (gpu.nvidia.com, pool node1)");

  const std::string ours = ops::device_taint_rule_name(kRef, kId, "gpu.health");
  std::vector<json> rules = {rule(ours, exact_selector(), "gpu.health", "xid-79", "NoSchedule", "12")};
  auto same = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("gpu.health=xid-79:NoSchedule"));
  REQUIRE(same);
  CHECK(same->writes.empty());
  CHECK(same->unchanged.find("already tainted gpu.health=xid-79:NoSchedule by DeviceTaintRule " + ours) !=
        std::string::npos);
  CHECK(same->unchanged_rule == ours);

  auto escalate = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("gpu.health=xid-79:NoExecute"));
  REQUIRE(escalate);
  REQUIRE(escalate->writes.size() == 1);
  CHECK(escalate->writes[0].action == ops::DeviceTaintAction::update);
  CHECK(escalate->writes[0].rule == ours);
  CHECK(escalate->writes[0].body == json::parse(R"({"metadata": {"resourceVersion": "12"},
    "spec": {"taint": {"key": "gpu.health", "value": "xid-79", "effect": "NoExecute"}}})"));

  auto drop_value = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("gpu.health:NoSchedule"));
  REQUIRE(drop_value);
  CHECK(drop_value->writes[0].body["spec"]["taint"]["value"].is_null());  // merge patch: removes it

  // Someone else's rule for exactly this device and key is the one updated, not duplicated.
  std::vector<json> theirs = {rule("ops-team-rule", exact_selector(), "gpu.health", "", "None")};
  auto update_theirs = ops::plan_device_taint(theirs, "v1beta2", kRef, kId, spec("gpu.health=bad:NoSchedule"));
  REQUIRE(update_theirs);
  REQUIRE(update_theirs->writes.size() == 1);
  CHECK(update_theirs->writes[0].rule == "ops-team-rule");
}

TEST_CASE("device_taint: removing deletes every rule for exactly the device and key, and names broader ones",
          "[device_taint]") {
  std::vector<json> rules = {
      rule("a", exact_selector(), "gpu.health", "x", "NoSchedule", "3"),
      rule("b", exact_selector(), "gpu.health", "", "NoExecute", "4"),
      rule("other-key", exact_selector(), "maint", "", "NoSchedule"),
      rule("other-device", {{"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", "gpu-1"}}, "gpu.health", "",
           "NoSchedule"),
      rule("whole-pool", {{"driver", "gpu.nvidia.com"}, {"pool", "node1"}}, "gpu.health", "", "NoSchedule"),
  };
  auto by_key = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("gpu.health-"));
  REQUIRE(by_key);
  REQUIRE(by_key->writes.size() == 2);
  CHECK(by_key->writes[0].rule == "a");
  CHECK(by_key->writes[0].action == ops::DeviceTaintAction::remove);
  CHECK(by_key->writes[0].body == json::parse(R"({"preconditions": {"resourceVersion": "3"}})"));
  CHECK(by_key->writes[1].rule == "b");
  REQUIRE(by_key->notes.size() == 1);
  CHECK(by_key->notes[0].starts_with("DeviceTaintRule whole-pool also taints gpu-0 with gpu.health:NoSchedule"));

  auto by_effect = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("gpu.health:NoExecute-"));
  REQUIRE(by_effect);
  REQUIRE(by_effect->writes.size() == 1);
  CHECK(by_effect->writes[0].rule == "b");
  CHECK(by_effect->notes.empty());  // the pool-wide rule has another effect

  auto nothing = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("absent-"));
  REQUIRE(nothing);
  CHECK(nothing->writes.empty());
  CHECK(nothing->unchanged == "no DeviceTaintRule taints node1/gpu-0 (gpu.nvidia.com, pool node1) with absent");
}

TEST_CASE("device_taint: gpuctl's rule name taken by a rule for something else is refused", "[device_taint]") {
  const std::string ours = ops::device_taint_rule_name(kRef, kId, "gpu.health");
  std::vector<json> rules = {rule(ours, {{"driver", "gpu.nvidia.com"}}, "gpu.health", "", "NoSchedule")};
  auto r = ops::plan_device_taint(rules, "v1beta2", kRef, kId, spec("gpu.health:NoSchedule"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message.starts_with("DeviceTaintRule " + ours + " exists but does not taint node1/gpu-0"));
}

TEST_CASE("device_taint: NoExecute on a held device needs --yes unless the claim tolerates it", "[device_taint]") {
  ops::DraClaim holder;
  holder.namespace_name = "team-a";
  holder.name = "train-gpu";
  holder.reserved_for = {{"team-a", "train-0"}};
  json claim = json::parse(R"({"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
      "deviceClassName": "gpu.nvidia.com", "tolerations": [{"key": "maint", "operator": "Exists"}]}}]}},
    "status": {"allocation": {"devices": {"results": [
      {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "node1", "device": "gpu-0"}]}}}})");
  const gpuctl::kube::Taint evict = taint("gpu.health", "xid-79", "NoExecute");

  auto refused = ops::device_taint_impact(kRef, kId, evict, &holder, claim, "", false);
  REQUIRE(refused.refusals.size() == 1);
  CHECK(refused.refusals[0] ==
        "node1/gpu-0 is allocated to claim team-a/train-gpu, whose pods team-a/train-0 would be evicted by "
        "gpu.health=xid-79:NoExecute (add --yes to evict them, or give the claim's request a toleration)");
  auto allowed = ops::device_taint_impact(kRef, kId, evict, &holder, claim, "", true);
  CHECK(allowed.refusals.empty());
  REQUIRE(allowed.warnings.size() == 1);
  CHECK(allowed.warnings[0].find("pods team-a/train-0 will be evicted") != std::string::npos);

  // The request's toleration (and the copy the allocation result keeps) spare its pods.
  const gpuctl::kube::Taint maint = taint("maint", "", "NoExecute");
  CHECK(ops::allocation_tolerates(claim, kId, maint));
  CHECK(ops::device_taint_impact(kRef, kId, maint, &holder, claim, "", false).refusals.empty());
  json copied = claim;
  copied["spec"]["devices"]["requests"][0]["exactly"].erase("tolerations");
  copied["status"]["allocation"]["devices"]["results"][0]["tolerations"] =
      json::parse(R"([{"key": "gpu.health", "operator": "Equal", "value": "xid-79", "effect": "NoExecute"}])");
  CHECK(ops::allocation_tolerates(copied, kId, evict));
  CHECK_FALSE(ops::allocation_tolerates(copied, {"gpu.nvidia.com", "node1", "gpu-1"}, evict));

  // NoSchedule keeps the claim: a warning. Nobody holding it, or a None taint: nothing to say.
  auto keep = ops::device_taint_impact(kRef, kId, taint("gpu.health", "", "NoSchedule"), &holder, claim, "", false);
  CHECK(keep.refusals.empty());
  REQUIRE(keep.warnings.size() == 1);
  CHECK(keep.warnings[0].find("it keeps the device") != std::string::npos);
  auto free_device = ops::device_taint_impact(kRef, kId, evict, nullptr, json(), "", false);
  CHECK(free_device.refusals.empty());
  CHECK(free_device.warnings.empty());
  CHECK(ops::device_taint_impact(kRef, kId, taint("k", "", "None"), &holder, claim, "", false).warnings.empty());

  // Claims that could not be read: nobody can say who would be evicted.
  auto unknown = ops::device_taint_impact(kRef, kId, evict, nullptr, json(), "resourceclaims: forbidden", false);
  REQUIRE(unknown.refusals.size() == 1);
  CHECK(unknown.refusals[0].starts_with("cannot tell which pods hold node1/gpu-0 (resourceclaims: forbidden)"));
}
