// Placement by the scheduler's filter rules: node selectors, required node affinity, taints and
// tolerations, cordons.
#include <catch2/catch.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/kube/scheduling.hpp"

using namespace gpuctl;
using json = nlohmann::json;

namespace {

json node(const std::string& name, json labels = json::object(), json taints = json::array(), bool cordoned = false) {
  json n = {{"metadata", {{"name", name}, {"labels", std::move(labels)}}}, {"spec", json::object()}};
  if (!taints.empty()) n["spec"]["taints"] = std::move(taints);
  if (cordoned) n["spec"]["unschedulable"] = true;
  return n;
}

json requirement(const std::string& key, const std::string& op, std::vector<std::string> values = {}) {
  json r = {{"key", key}, {"operator", op}};
  if (!values.empty()) r["values"] = values;
  return r;
}

json with_required_affinity(json spec, json terms) {
  spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
      std::move(terms);
  return spec;
}

kube::Taint taint(std::string key, std::string value, std::string effect) {
  return kube::Taint{std::move(key), std::move(value), std::move(effect), ""};
}

}  // namespace

TEST_CASE("kube::tolerates follows upstream ToleratesTaint", "[scheduling]") {
  const auto gpu = taint("nvidia.com/gpu", "present", "NoSchedule");
  CHECK(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}, gpu));
  CHECK(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}, gpu));  // empty effect: all effects
  CHECK(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"operator", "Equal"}, {"value", "present"}}, gpu));
  CHECK(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"value", "present"}}, gpu));  // operator defaults to Equal
  CHECK(kube::tolerates(json{{"operator", "Exists"}}, gpu));                           // empty key + Exists: everything
  CHECK_FALSE(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"operator", "Equal"}, {"value", "absent"}}, gpu));
  CHECK_FALSE(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoExecute"}}, gpu));
  CHECK_FALSE(kube::tolerates(json{{"key", "dedicated"}, {"operator", "Exists"}}, gpu));
  CHECK_FALSE(kube::tolerates(json{{"key", "nvidia.com/gpu"}, {"operator", "Bogus"}}, gpu));
  CHECK_FALSE(kube::tolerates(json("not an object"), gpu));

  std::vector<json> list = {{{"key", "dedicated"}, {"operator", "Exists"}},
                            {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}};
  CHECK(kube::tolerates(list, gpu));
  CHECK_FALSE(kube::tolerates(std::vector<json>{}, gpu));
}

TEST_CASE("kube::untolerated_taints keeps only NoSchedule and NoExecute", "[scheduling]") {
  json n = node("n1", json::object(),
                json::array({{{"key", "a"}, {"effect", "PreferNoSchedule"}},
                             {{"key", "b"}, {"value", "x"}, {"effect", "NoSchedule"}},
                             {{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}},
                             {{"key", "c"}, {"effect", "NoExecute"}}}));
  auto none = kube::untolerated_taints(json::object(), n);
  REQUIRE(none.size() == 2);
  CHECK(kube::to_string(none[0]) == "b=x:NoSchedule");
  CHECK(kube::to_string(none[1]) == "c:NoExecute");
  json spec = {{"tolerations", json::array({{{"key", "b"}, {"operator", "Exists"}}})}};
  auto left = kube::untolerated_taints(spec, n);
  REQUIRE(left.size() == 1);
  CHECK(left[0].key == "c");
}

TEST_CASE("kube::node_admits_unschedulable lets a pod that tolerates the cordon taint in", "[scheduling]") {
  json cordoned = node("n1", json::object(), json::array(), true);
  CHECK_FALSE(kube::node_admits_unschedulable(json::object(), cordoned));
  CHECK(kube::node_admits_unschedulable(json{{"tolerations", json::array({{{"key", "node.kubernetes.io/unschedulable"},
                                                                           {"operator", "Exists"},
                                                                           {"effect", "NoSchedule"}}})}},
                                        cordoned));
  CHECK(kube::node_admits_unschedulable(json::object(), node("n2")));
}

TEST_CASE("kube::matches_requirement covers every operator", "[scheduling]") {
  json n = node("n1", {{"zone", "a"}, {"gpus", "8"}, {"bad", "x8"}});
  CHECK(kube::matches_requirement(requirement("zone", "In", {"a", "b"}), n));
  CHECK_FALSE(kube::matches_requirement(requirement("zone", "In", {"b"}), n));
  CHECK_FALSE(kube::matches_requirement(requirement("missing", "In", {"a"}), n));
  CHECK(kube::matches_requirement(requirement("zone", "NotIn", {"b"}), n));
  CHECK_FALSE(kube::matches_requirement(requirement("zone", "NotIn", {"a"}), n));
  CHECK(kube::matches_requirement(requirement("missing", "NotIn", {"a"}), n));  // absent label: NotIn holds
  CHECK(kube::matches_requirement(requirement("zone", "Exists"), n));
  CHECK_FALSE(kube::matches_requirement(requirement("missing", "Exists"), n));
  CHECK(kube::matches_requirement(requirement("missing", "DoesNotExist"), n));
  CHECK_FALSE(kube::matches_requirement(requirement("zone", "DoesNotExist"), n));
  CHECK(kube::matches_requirement(requirement("gpus", "Gt", {"4"}), n));
  CHECK_FALSE(kube::matches_requirement(requirement("gpus", "Gt", {"8"}), n));
  CHECK(kube::matches_requirement(requirement("gpus", "Lt", {"9"}), n));
  CHECK_FALSE(kube::matches_requirement(requirement("gpus", "Lt", {"8"}), n));
  CHECK_FALSE(kube::matches_requirement(requirement("bad", "Gt", {"1"}), n));        // label not an integer
  CHECK_FALSE(kube::matches_requirement(requirement("gpus", "Gt", {"1", "2"}), n));  // Gt takes exactly one value
  CHECK_FALSE(kube::matches_requirement(requirement("zone", "Near", {"a"}), n));
}

TEST_CASE("kube::matches_node_selector ANDs nodeSelector and the required affinity, ORs terms", "[scheduling]") {
  json h100 = node("h1", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"zone", "a"}});
  json a100 = node("a1", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"zone", "b"}});

  CHECK(kube::matches_node_selector(json::object(), h100));  // no constraints: any node
  json by_selector = {{"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}};
  CHECK(kube::matches_node_selector(by_selector, h100));
  CHECK_FALSE(kube::matches_node_selector(by_selector, a100));

  json either =
      with_required_affinity(json::object(), json::array({{{"matchExpressions", {requirement("zone", "In", {"a"})}}},
                                                          {{"matchExpressions", {requirement("zone", "In", {"b"})}}}}));
  CHECK(kube::matches_node_selector(either, h100));
  CHECK(kube::matches_node_selector(either, a100));

  json both = with_required_affinity(
      by_selector,
      either["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]);
  CHECK(kube::matches_node_selector(both, h100));
  CHECK_FALSE(kube::matches_node_selector(both, a100));

  json anded = with_required_affinity(
      json::object(),
      json::array({{{"matchExpressions",
                     {requirement("zone", "In", {"a"}), requirement("nvidia.com/gpu.product", "Exists")}}}}));
  CHECK(kube::matches_node_selector(anded, h100));
  CHECK_FALSE(kube::matches_node_selector(anded, a100));

  json empty_term = with_required_affinity(json::object(), json::array({json::object()}));
  CHECK_FALSE(kube::matches_node_selector(empty_term, h100));  // an empty term matches nothing

  json by_field = with_required_affinity(
      json::object(), json::array({{{"matchFields", {requirement("metadata.name", "In", {"a1"})}}}}));
  CHECK(kube::matches_node_selector(by_field, a100));
  CHECK_FALSE(kube::matches_node_selector(by_field, h100));

  CHECK(kube::matches_node_selector(json{{"nodeName", "h1"}}, h100));
  CHECK_FALSE(kube::matches_node_selector(json{{"nodeName", "h1"}}, a100));
}

TEST_CASE("kube::describe_placement writes selectors the way people read them", "[scheduling]") {
  CHECK(kube::describe_placement(json::object()).empty());
  CHECK_FALSE(kube::has_placement_constraints(json::object()));
  json spec = {{"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}};
  CHECK(kube::has_placement_constraints(spec));
  CHECK(kube::describe_placement(spec) == "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3");
  json one_term = with_required_affinity(
      json::object(), json::array({{{"matchExpressions",
                                     {requirement("zone", "In", {"a", "b"}), requirement("spot", "DoesNotExist"),
                                      requirement("gpus", "Gt", {"4"})}}}}));
  CHECK(kube::describe_placement(one_term) == "zone in (a,b), !spot, gpus>4");
  json two_terms =
      with_required_affinity(json::object(), json::array({{{"matchExpressions", {requirement("a", "In", {"1"})}}},
                                                          {{"matchExpressions", {requirement("b", "NotIn", {"2"})}}}}));
  CHECK(kube::describe_placement(two_terms) == "(a=1) or (b!=2)");
}

TEST_CASE("kube::placement_exclusion says why, in filter order", "[scheduling]") {
  json spec = {{"nodeSelector", {{"pool", "gpu"}}}};
  CHECK(kube::placement_exclusion(spec, node("x", {{"pool", "cpu"}}))->kind == kube::NodeExclusion::Kind::placement);
  json cordoned_and_tainted =
      node("y", {{"pool", "gpu"}}, json::array({{{"key", "k"}, {"effect", "NoSchedule"}}}), true);
  CHECK(kube::placement_exclusion(spec, cordoned_and_tainted)->kind == kube::NodeExclusion::Kind::cordoned);
  auto tainted = kube::placement_exclusion(
      spec, node("z", {{"pool", "gpu"}}, json::array({{{"key", "k"}, {"effect", "NoSchedule"}}})));
  REQUIRE(tainted);
  CHECK(tainted->kind == kube::NodeExclusion::Kind::taint);
  CHECK(kube::to_string(*tainted->taint) == "k:NoSchedule");
  CHECK_FALSE(kube::placement_exclusion(spec, node("ok", {{"pool", "gpu"}})));
}

TEST_CASE("kube::matches_node_selector over a real node object", "[scheduling]") {
  json list = json::parse(testing::fixture("k8s-nodes/edgecloud__rke2-vgpu-a16-4q__nodelist.json"));
  const json& n = list["items"][0];
  CHECK(kube::matches_node_selector(json{{"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-A16-4Q"}}}}, n));
  CHECK_FALSE(
      kube::matches_node_selector(json{{"nodeSelector", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}, n));
  CHECK_FALSE(kube::placement_exclusion(json::object(), n));  // untainted, not cordoned
}
