#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/projection.hpp"

#include <climits>

#include <fmt/format.h>

namespace gpuctl::kube {

namespace {
using json = nlohmann::json;
}  // namespace

const json& field(const json& object, std::string_view a) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(a);
  return it == object.end() ? kNull : *it;
}

std::string string_field(const json& object, std::string_view a) {
  const json& v = field(object, a);
  return v.is_string() ? v.get<std::string>() : std::string();
}

const json& field_at(const json& object, std::initializer_list<std::string_view> path) {
  const json* at = &object;
  for (auto key : path) at = &field(*at, key);
  return *at;
}

const json& array_field(const json& object, std::string_view key) {
  static const json kEmpty = json::array();
  const json& v = field(object, key);
  return v.is_array() ? v : kEmpty;
}

std::optional<std::int64_t> integer_field(const json& object, std::string_view key) {
  const json& v = field(object, key);
  if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX))
    return v.get<std::int64_t>();
  return std::nullopt;
}

bool bool_field(const json& object, std::string_view key, bool fallback) {
  const json& v = field(object, key);
  return v.is_boolean() ? v.get<bool>() : fallback;
}

namespace {

void add_into(ResourceList& into, const ResourceList& add) {
  for (const auto& [name, q] : add) into[name] += q;
}

void max_into(ResourceList& into, const ResourceList& other) {
  for (const auto& [name, q] : other) {
    auto it = into.find(name);
    if (it == into.end() || it->second < q) into[name] = q;
  }
}

ResourceList container_requests(const json& container) {
  const json& resources = field(container, "resources");
  ResourceList requests = parse_resource_list(field(resources, "requests"));
  for (const auto& [name, q] : parse_resource_list(field(resources, "limits"))) {
    requests.try_emplace(name, q);
  }
  return requests;
}

}  // namespace

std::string name_of(const json& object) { return string_field(field(object, "metadata"), "name"); }
std::string namespace_of(const json& object) { return string_field(field(object, "metadata"), "namespace"); }

std::optional<std::string> label_of(const json& object, std::string_view key) {
  const json& v = field(field(field(object, "metadata"), "labels"), key);
  if (v.is_string()) return v.get<std::string>();
  return std::nullopt;
}

std::optional<std::string> annotation_of(const json& object, std::string_view key) {
  const json& v = field(field(field(object, "metadata"), "annotations"), key);
  if (v.is_string()) return v.get<std::string>();
  return std::nullopt;
}

ResourceList parse_resource_list(const json& list) {
  ResourceList out;
  if (!list.is_object()) return out;
  for (const auto& [name, value] : list.items()) {
    Result<Quantity> q = value.is_string()           ? Quantity::parse(value.get<std::string>())
                         : value.is_number_integer() ? Result<Quantity>(Quantity::from_int(value.get<std::int64_t>()))
                                                     : Result<Quantity>(fail(Errc::parse, "not a quantity"));
    if (q) out.emplace(name, *q);
  }
  return out;
}

ResourceList pod_requests(const json& pod) {
  const json& spec = field(pod, "spec");
  ResourceList total;
  if (const json& containers = field(spec, "containers"); containers.is_array()) {
    for (const auto& c : containers) add_into(total, container_requests(c));
  }
  ResourceList init_max;
  ResourceList sidecars;  // restartable init containers started so far keep running
  if (const json& inits = field(spec, "initContainers"); inits.is_array()) {
    for (const auto& c : inits) {
      ResourceList req = container_requests(c);
      if (string_field(c, "restartPolicy") == "Always") {
        add_into(total, req);
        add_into(sidecars, req);
        max_into(init_max, sidecars);
      } else {
        ResourceList during = req;
        add_into(during, sidecars);
        max_into(init_max, during);
      }
    }
  }
  max_into(total, init_max);
  add_into(total, parse_resource_list(field(spec, "overhead")));
  return total;
}

bool pod_is_terminal(const json& pod) {
  std::string phase = string_field(field(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

const std::vector<std::string>& pod_request_paths() {
  static const std::vector<std::string> paths = {
      "metadata.name",
      "metadata.namespace",
      "spec.nodeName",
      "spec.containers[].name",
      "spec.containers[].resources",
      "spec.initContainers[].name",
      "spec.initContainers[].restartPolicy",
      "spec.initContainers[].resources",
      "spec.overhead",
      "status.phase",
  };
  return paths;
}

const Projection& pod_request_fields() {
  static const Projection fields(pod_request_paths());
  return fields;
}

std::vector<Taint> node_taints(const json& node) {
  std::vector<Taint> taints;
  const json& list = field(field(node, "spec"), "taints");
  if (!list.is_array()) return taints;
  for (const auto& t : list) {
    taints.push_back(
        {string_field(t, "key"), string_field(t, "value"), string_field(t, "effect"), string_field(t, "timeAdded")});
  }
  return taints;
}

json to_json(const Taint& taint) {
  json j = {{"key", taint.key}, {"effect", taint.effect}};
  if (!taint.value.empty()) j["value"] = taint.value;
  if (!taint.time_added.empty()) j["timeAdded"] = taint.time_added;
  return j;
}

std::string to_string(const Taint& taint) {
  return taint.value.empty() ? taint.key + ":" + taint.effect : taint.key + "=" + taint.value + ":" + taint.effect;
}

std::vector<NodeCondition> node_conditions(const json& node) {
  std::vector<NodeCondition> out;
  const json& list = field(field(node, "status"), "conditions");
  if (!list.is_array()) return out;
  for (const auto& c : list) {
    out.push_back({string_field(c, "type"), string_field(c, "status"), string_field(c, "reason"),
                   string_field(c, "message"), string_field(c, "lastTransitionTime")});
  }
  return out;
}

std::string node_readiness(const json& node) {
  for (const auto& c : node_conditions(node)) {
    if (c.type != "Ready") continue;
    if (c.status == "True") return "Ready";
    if (c.status == "False") return "NotReady";
    return "Unknown";
  }
  return "Unknown";
}

bool node_unschedulable(const json& node) {
  const json& v = field(field(node, "spec"), "unschedulable");
  return v.is_boolean() && v.get<bool>();
}

std::string node_address(const json& node, std::string_view type) {
  const json& list = field(field(node, "status"), "addresses");
  if (!list.is_array()) return {};
  for (const auto& a : list) {
    if (string_field(a, "type") == type) return string_field(a, "address");
  }
  return {};
}

}  // namespace gpuctl::kube
