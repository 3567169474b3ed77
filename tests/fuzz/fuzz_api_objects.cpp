// API objects decoded into gpuctl's models: nodes and pods into the inventory (`gpuctl nodes`),
// jobs, pods and events into job summaries (`gpuctl jobs`), pod specs against nodes for the
// scheduler's rules. The server decides these objects' shapes, so any JSON value may stand where
// an object is expected. The input is JSON: a list's items, an array's elements or one value, each
// used as node, pod, job and event. Invariants: every model serializes for -o json; the projected
// decoder (kube::parse_projected) reads what json::parse reads, and the inventory built from
// projected objects is the inventory built from whole ones.
#include <chrono>

#include "fuzz_support.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/jobs/jobs.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/nesting.hpp"

namespace {

using nlohmann::json;
using namespace gpuctl;

// Pairs of objects are tried against each other, so keep the count small enough to stay fast.
constexpr std::size_t kMaxObjects = 12;

std::vector<json> objects_in(const json& value) {
  const json* list = &value;
  if (value.is_object() && value.contains("items")) list = &value["items"];
  std::vector<json> objects;
  if (list->is_array()) {
    for (const auto& item : *list) {
      if (objects.size() == kMaxObjects) break;
      objects.push_back(item);
    }
  } else {
    objects.push_back(*list);
  }
  return objects;
}

void check_inventory(const std::vector<json>& objects, std::chrono::system_clock::time_point now) {
  ops::NodeInventory inventory = ops::build_node_inventory(objects, objects, true, now);
  for (std::string_view key : ops::node_sort_keys()) {
    GPUCTL_FUZZ_CHECK(ops::sort_nodes(inventory.nodes, key).has_value(), key);
  }
  fuzz::dump_checked(ops::to_json(inventory), "node inventory");
}

void check_placement(const std::vector<json>& objects) {
  for (const auto& pod : objects) {
    const json& spec = kube::field(pod, "spec");
    (void)kube::describe_placement(spec);
    (void)kube::has_placement_constraints(spec);
    for (const auto& node : objects) {
      (void)kube::placement_exclusion(spec, node);
      (void)kube::untolerated_taints(spec, node);
    }
  }
}

// Each object decoded again through the inventory's projections: the same inventory, unless a
// pod was skipped for a field the inventory does not read (the projection drops that field).
void check_projections(std::string_view text, const json& value, const std::vector<json>& objects,
                       std::chrono::system_clock::time_point now) {
  auto whole_again = kube::parse_projected(text, kube::Projection{});
  GPUCTL_FUZZ_CHECK(whole_again.has_value() && *whole_again == value, "parse_projected differs from json::parse");
  std::vector<json> nodes, pods;
  for (const auto& object : objects) {
    std::string dumped = object.dump();
    auto node = kube::parse_projected(dumped, ops::inventory_node_fields());
    auto pod = kube::parse_projected(dumped, ops::inventory_pod_fields());
    GPUCTL_FUZZ_CHECK(node.has_value() && pod.has_value(), "a projection refused what json::parse read");
    nodes.push_back(std::move(*node));
    pods.push_back(std::move(*pod));
  }
  ops::NodeInventory whole = ops::build_node_inventory(objects, objects, true, now);
  if (!whole.skipped.empty()) return;
  ops::NodeInventory projected = ops::build_node_inventory(nodes, pods, true, now);
  GPUCTL_FUZZ_CHECK(ops::to_json(projected) == ops::to_json(whole), "projected inventory differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = fuzz::as_text(data, size);
  // Real objects stay under 30 levels; what deeper answers do (dump() recurses) is not what this
  // target looks at, so it keeps to the library's own nesting bound.
  if (util::json_nesting_exceeds(text)) return 0;
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded()) return 0;
  std::vector<json> objects = objects_in(value);
  const auto now = std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 57);
  check_inventory(objects, now);
  check_projections(text, value, objects, now);
  fuzz::dump_checked(ops::to_json(ops::build_job_list(objects, objects, objects, true, now)), "job list");
  check_placement(objects);
  for (const auto& node : objects) {
    (void)kube::node_taints(node);
    (void)kube::node_conditions(node);
    (void)kube::node_readiness(node);
    (void)kube::pod_requests(node);
  }
  return 0;
}
