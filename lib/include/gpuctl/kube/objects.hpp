#pragma once
// Small, pure readers over Kubernetes objects kept as JSON. gpuctl reads the handful of fields
// it needs rather than modelling whole API types; unknown fields pass through untouched.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/quantity.hpp"

namespace gpuctl::kube {

class Projection;  // projection.hpp, which includes this header
using ResourceList = std::map<std::string, Quantity>;

// object[key], or a null value when `object` is not an object or lacks the key: chains of
// field(field(pod, "spec"), "containers") never throw on malformed objects.
const nlohmann::json& field(const nlohmann::json& object, std::string_view key);
// object[key] when it is a string, else "".
std::string string_field(const nlohmann::json& object, std::string_view key);
// field(field(object, path[0]), path[1])...: null when any step is missing or not an object.
const nlohmann::json& field_at(const nlohmann::json& object, std::initializer_list<std::string_view> path);
// object[key] when it is an array, else an empty array (iterating a string or an object would
// yield the value itself or the object's values).
const nlohmann::json& array_field(const nlohmann::json& object, std::string_view key);
// object[key] when it is an integer that fits in 64 bits, else nullopt.
std::optional<std::int64_t> integer_field(const nlohmann::json& object, std::string_view key);
// object[key] when it is a boolean, else `fallback`.
bool bool_field(const nlohmann::json& object, std::string_view key, bool fallback = false);

// Shape checks: the fields gpuctl reads, with the JSON type each must have when present. A
// null counts as absent, as the API's own decoder reads it. Paths are dotted; a "[]" segment
// applies the rest of the path to every element of an array ("spec.containers[].name").
enum class JsonType { object, array, string, integer, boolean, string_map, quantity_map };
struct FieldShape {
  std::string path;
  JsonType type;
};
// The first field whose type is wrong, as "status.capacity is a string, expected an object";
// "" when every field has its type.
std::string shape_problem(const nlohmann::json& object, const std::vector<FieldShape>& shapes);
// The fields gpuctl reads from each kind (node, pod, job, ...): the tables, and the checks of an
// object against them. A Projection (projection.hpp) made from a table keeps exactly these.
const std::vector<FieldShape>& node_shapes();
const std::vector<FieldShape>& pod_shapes();
const std::vector<FieldShape>& job_shapes();
const std::vector<FieldShape>& quota_shapes();
const std::vector<FieldShape>& limit_range_shapes();
const std::vector<FieldShape>& event_shapes();
std::string node_shape_problem(const nlohmann::json& node);
std::string pod_shape_problem(const nlohmann::json& pod);
std::string job_shape_problem(const nlohmann::json& job);
std::string quota_shape_problem(const nlohmann::json& quota);
std::string limit_range_shape_problem(const nlohmann::json& limit_range);
std::string event_shape_problem(const nlohmann::json& event);
// How a skipped object is named: "node/gpu-3", "pod team-a/x", or "node #4 (no name)".
std::string object_label(std::string_view kind, const nlohmann::json& object, std::size_t index);
using ShapeCheck = std::string (*)(const nlohmann::json&);
// The objects of `items` whose shape is right; for each other one, "KIND/NAME skipped: PROBLEM"
// is appended to `skipped` (one malformed object never stops a listing).
std::vector<nlohmann::json> keep_well_formed(std::vector<nlohmann::json> items, std::string_view kind, ShapeCheck check,
                                             std::vector<std::string>& skipped);

// metadata.name / metadata.namespace, or "" when absent.
std::string name_of(const nlohmann::json& object);
std::string namespace_of(const nlohmann::json& object);
// metadata.labels[key] / metadata.annotations[key], if set.
std::optional<std::string> label_of(const nlohmann::json& object, std::string_view key);
std::optional<std::string> annotation_of(const nlohmann::json& object, std::string_view key);

// A ResourceList object ({"cpu":"2","nvidia.com/gpu":"8"}); entries that do not parse are skipped.
ResourceList parse_resource_list(const nlohmann::json& list);

// The resources a pod asks the scheduler for, by the rule the scheduler and quota use: the larger
// of the sum over app containers and the largest init container (restartable "sidecar" init
// containers count as running alongside), plus spec.overhead. A limit without a request counts
// as the request, as the API server's defaulting makes it.
ResourceList pod_requests(const nlohmann::json& pod);

// Succeeded or Failed: the pod holds no resources any more.
bool pod_is_terminal(const nlohmann::json& pod);

// The pod fields that pod_shape_problem, pod_is_terminal, pod_requests and object_label read,
// with spec.nodeName: what a reader that counts requests per node or namespace keeps of a pod
// (a pod is 5-10 KiB of JSON, these fields a few hundred bytes). The protobuf pod schema covers it.
const Projection& pod_request_fields();
// Its paths, for readers that keep these and more.
const std::vector<std::string>& pod_request_paths();

struct Taint {
  std::string key;
  std::string value;
  std::string effect;      // NoSchedule, PreferNoSchedule or NoExecute
  std::string time_added;  // RFC 3339, NoExecute only
  friend bool operator==(const Taint&, const Taint&) = default;
};
std::vector<Taint> node_taints(const nlohmann::json& node);
nlohmann::json to_json(const Taint& taint);
// "key=value:Effect", or "key:Effect" when the value is empty (kubectl's notation).
std::string to_string(const Taint& taint);

struct NodeCondition {
  std::string type;
  std::string status;  // True, False, Unknown
  std::string reason;
  std::string message;
  std::string last_transition_time;  // RFC 3339, "" when not set
};
std::vector<NodeCondition> node_conditions(const nlohmann::json& node);
// "Ready", "NotReady" or "Unknown", from the Ready condition.
std::string node_readiness(const nlohmann::json& node);
bool node_unschedulable(const nlohmann::json& node);
// The first status.addresses entry of this type ("InternalIP", "ExternalIP", "Hostname").
std::string node_address(const nlohmann::json& node, std::string_view type);

}  // namespace gpuctl::kube
