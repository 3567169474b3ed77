// Shape checks over API objects: which fields gpuctl reads from each kind and the JSON type each
// must have, so a wrongly typed field names the object and the field instead of failing deep
// inside a reader (or worse, being read as something else).
#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::kube {

namespace {

using json = nlohmann::json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "a list";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "null";
  }
}

const char* expected_name(JsonType t) {
  switch (t) {
    case JsonType::object: return "an object";
    case JsonType::array: return "a list";
    case JsonType::string: return "a string";
    case JsonType::integer: return "an integer";
    case JsonType::boolean: return "a boolean";
    case JsonType::string_map: return "a map of strings";
    case JsonType::quantity_map: return "a map of quantities";
  }
  return "?";
}

std::string quantity_map_problem(const json& v, const std::string& where) {
  for (const auto& [name, value] : v.items()) {
    bool ok = value.is_string() ? Quantity::parse(value.get<std::string>()).has_value() : value.is_number_integer();
    if (!ok)
      return fmt::format("{}.{} is {}, expected a quantity", where, name,
                         value.is_string() ? value.dump() : type_name(value));
  }
  return {};
}

std::string type_problem(const json& v, JsonType t, const std::string& where) {
  bool ok = false;
  switch (t) {
    case JsonType::object: ok = v.is_object(); break;
    case JsonType::array: ok = v.is_array(); break;
    case JsonType::string: ok = v.is_string(); break;
    case JsonType::integer: ok = v.is_number_integer(); break;
    case JsonType::boolean: ok = v.is_boolean(); break;
    case JsonType::string_map:
      if (!v.is_object()) break;
      for (const auto& [k, value] : v.items()) {
        if (!value.is_string()) return fmt::format("{}.{} is {}, expected a string", where, k, type_name(value));
      }
      ok = true;
      break;
    case JsonType::quantity_map:
      if (!v.is_object()) break;
      return quantity_map_problem(v, where);
  }
  return ok ? std::string() : fmt::format("{} is {}, expected {}", where, type_name(v), expected_name(t));
}

// Walks `path` from `v` (`where` is the path walked so far, for the message).
std::string walk(const json& v, std::string_view path, JsonType t, const std::string& where) {
  if (v.is_null()) return {};
  if (path.empty()) return type_problem(v, t, where);
  auto dot = path.find('.');
  std::string_view segment = path.substr(0, dot);
  std::string_view rest = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  bool each = segment.ends_with("[]");
  if (each) segment.remove_suffix(2);
  std::string here = where.empty() ? std::string(segment) : where + "." + std::string(segment);
  if (!v.is_object()) return fmt::format("{} is {}, expected an object", where, type_name(v));
  const json& child = field(v, segment);
  if (!each || child.is_null()) return each ? std::string() : walk(child, rest, t, here);
  if (!child.is_array()) return fmt::format("{} is {}, expected a list", here, type_name(child));
  for (std::size_t i = 0; i < child.size(); ++i) {
    const json& element = child[i];
    std::string at = fmt::format("{}[{}]", here, i);
    if (rest.empty()) {
      if (auto p = type_problem(element, t, at); !p.empty()) return p;
    } else if (!element.is_object()) {
      return fmt::format("{} is {}, expected an object", at, type_name(element));
    } else if (auto p = walk(element, rest, t, at); !p.empty()) {
      return p;
    }
  }
  return {};
}

}  // namespace

std::string shape_problem(const json& object, const std::vector<FieldShape>& shapes) {
  if (!object.is_object()) return fmt::format("the object is {}, expected an object", type_name(object));
  for (const auto& s : shapes) {
    if (auto p = walk(object, s.path, s.type, ""); !p.empty()) return p;
  }
  return {};
}

namespace {

using Shapes = std::vector<FieldShape>;

Shapes joined(std::initializer_list<const Shapes*> parts) {
  Shapes all;
  for (const Shapes* p : parts) all.insert(all.end(), p->begin(), p->end());
  return all;
}

const Shapes& metadata_shape() {
  static const Shapes shapes = {
      {"metadata", JsonType::object},
      {"metadata.name", JsonType::string},
      {"metadata.namespace", JsonType::string},
      {"metadata.uid", JsonType::string},
      {"metadata.resourceVersion", JsonType::string},
      {"metadata.creationTimestamp", JsonType::string},
      {"metadata.deletionTimestamp", JsonType::string},
      {"metadata.labels", JsonType::string_map},
      {"metadata.annotations", JsonType::string_map},
      {"metadata.ownerReferences[]", JsonType::object},
      {"metadata.ownerReferences[].kind", JsonType::string},
      {"metadata.ownerReferences[].name", JsonType::string},
      {"metadata.ownerReferences[].uid", JsonType::string},
      {"metadata.ownerReferences[].controller", JsonType::boolean},
  };
  return shapes;
}

// A pod's spec, at `prefix` ("" in a pod, "spec.template." in a job).
Shapes pod_spec_shape(const std::string& prefix) {
  Shapes shapes = {
      {"spec", JsonType::object},
      {"spec.nodeName", JsonType::string},
      {"spec.containers[]", JsonType::object},
      {"spec.containers[].name", JsonType::string},
      {"spec.containers[].resources", JsonType::object},
      {"spec.containers[].resources.requests", JsonType::quantity_map},
      {"spec.containers[].resources.limits", JsonType::quantity_map},
      {"spec.initContainers[]", JsonType::object},
      {"spec.initContainers[].name", JsonType::string},
      {"spec.initContainers[].restartPolicy", JsonType::string},
      {"spec.initContainers[].resources", JsonType::object},
      {"spec.initContainers[].resources.requests", JsonType::quantity_map},
      {"spec.initContainers[].resources.limits", JsonType::quantity_map},
      {"spec.overhead", JsonType::quantity_map},
      {"spec.volumes[]", JsonType::object},
      {"spec.tolerations[]", JsonType::object},
      {"spec.tolerations[].key", JsonType::string},
      {"spec.tolerations[].value", JsonType::string},
      {"spec.tolerations[].effect", JsonType::string},
      {"spec.tolerations[].operator", JsonType::string},
      {"spec.nodeSelector", JsonType::string_map},
  };
  for (auto& s : shapes) s.path = prefix + s.path;
  return shapes;
}

const Shapes& conditions_shape() {
  static const Shapes shapes = {
      {"status.conditions[]", JsonType::object},         {"status.conditions[].type", JsonType::string},
      {"status.conditions[].status", JsonType::string},  {"status.conditions[].reason", JsonType::string},
      {"status.conditions[].message", JsonType::string}, {"status.conditions[].lastTransitionTime", JsonType::string},
  };
  return shapes;
}

}  // namespace

const std::vector<FieldShape>& node_shapes() {
  static const Shapes own = {
      {"spec", JsonType::object},
      {"spec.unschedulable", JsonType::boolean},
      {"spec.taints[]", JsonType::object},
      {"spec.taints[].key", JsonType::string},
      {"spec.taints[].value", JsonType::string},
      {"spec.taints[].effect", JsonType::string},
      {"status", JsonType::object},
      {"status.capacity", JsonType::quantity_map},
      {"status.allocatable", JsonType::quantity_map},
      {"status.addresses[]", JsonType::object},
      {"status.addresses[].type", JsonType::string},
      {"status.addresses[].address", JsonType::string},
      {"status.nodeInfo", JsonType::object},
      {"status.nodeInfo.kubeletVersion", JsonType::string},
  };
  static const Shapes shapes = joined({&metadata_shape(), &own, &conditions_shape()});
  return shapes;
}

std::string node_shape_problem(const json& node) { return shape_problem(node, node_shapes()); }

const std::vector<FieldShape>& pod_shapes() {
  static const Shapes spec = pod_spec_shape("");
  static const Shapes own = {
      {"status", JsonType::object},
      {"status.phase", JsonType::string},
      {"status.reason", JsonType::string},
      {"status.containerStatuses[]", JsonType::object},
      {"status.containerStatuses[].name", JsonType::string},
      {"status.containerStatuses[].state", JsonType::object},
      {"status.containerStatuses[].lastState", JsonType::object},
      {"status.initContainerStatuses[]", JsonType::object},
  };
  static const Shapes shapes = joined({&metadata_shape(), &spec, &own, &conditions_shape()});
  return shapes;
}

std::string pod_shape_problem(const json& pod) { return shape_problem(pod, pod_shapes()); }

const std::vector<FieldShape>& job_shapes() {
  static const Shapes spec = pod_spec_shape("spec.template.");
  static const Shapes own = {
      {"spec", JsonType::object},
      {"spec.parallelism", JsonType::integer},
      {"spec.completions", JsonType::integer},
      {"spec.suspend", JsonType::boolean},
      {"spec.selector", JsonType::object},
      {"spec.selector.matchLabels", JsonType::string_map},
      {"spec.template", JsonType::object},
      {"status", JsonType::object},
      {"status.active", JsonType::integer},
      {"status.ready", JsonType::integer},
      {"status.succeeded", JsonType::integer},
      {"status.failed", JsonType::integer},
      {"status.startTime", JsonType::string},
      {"status.completionTime", JsonType::string},
  };
  static const Shapes shapes = joined({&metadata_shape(), &own, &spec, &conditions_shape()});
  return shapes;
}

std::string job_shape_problem(const json& job) { return shape_problem(job, job_shapes()); }

const std::vector<FieldShape>& quota_shapes() {
  static const Shapes own = {
      {"spec", JsonType::object},
      {"spec.hard", JsonType::quantity_map},
      {"spec.scopes", JsonType::array},
      {"spec.scopeSelector", JsonType::object},
      {"status", JsonType::object},
      {"status.hard", JsonType::quantity_map},
      {"status.used", JsonType::quantity_map},
  };
  static const Shapes shapes = joined({&metadata_shape(), &own});
  return shapes;
}

std::string quota_shape_problem(const json& quota) { return shape_problem(quota, quota_shapes()); }

const std::vector<FieldShape>& limit_range_shapes() {
  static const Shapes own = {
      {"spec", JsonType::object},
      {"spec.limits[]", JsonType::object},
      {"spec.limits[].type", JsonType::string},
      {"spec.limits[].max", JsonType::quantity_map},
      {"spec.limits[].default", JsonType::quantity_map},
      {"spec.limits[].defaultRequest", JsonType::quantity_map},
  };
  static const Shapes shapes = joined({&metadata_shape(), &own});
  return shapes;
}

std::string limit_range_shape_problem(const json& limit_range) {
  return shape_problem(limit_range, limit_range_shapes());
}

const std::vector<FieldShape>& event_shapes() {
  static const Shapes own = {
      {"involvedObject", JsonType::object},
      {"involvedObject.kind", JsonType::string},
      {"involvedObject.name", JsonType::string},
      {"involvedObject.namespace", JsonType::string},
      {"involvedObject.uid", JsonType::string},
      {"reason", JsonType::string},
      {"message", JsonType::string},
      {"type", JsonType::string},
      {"count", JsonType::integer},
      {"series", JsonType::object},
      {"series.count", JsonType::integer},
      {"series.lastObservedTime", JsonType::string},
      // events.k8s.io/v1's names for involvedObject and message
      {"regarding", JsonType::object},
      {"regarding.kind", JsonType::string},
      {"regarding.name", JsonType::string},
      {"regarding.namespace", JsonType::string},
      {"regarding.uid", JsonType::string},
      {"note", JsonType::string},
      {"lastTimestamp", JsonType::string},
      {"eventTime", JsonType::string},
      {"firstTimestamp", JsonType::string},
  };
  static const Shapes shapes = joined({&metadata_shape(), &own});
  return shapes;
}

std::string event_shape_problem(const json& event) { return shape_problem(event, event_shapes()); }

std::string object_label(std::string_view kind, const json& object, std::size_t index) {
  std::string name = name_of(object);
  std::string ns = namespace_of(object);
  if (name.empty()) return fmt::format("{} #{} (no name)", kind, index + 1);
  return ns.empty() ? fmt::format("{}/{}", kind, name) : fmt::format("{} {}/{}", kind, ns, name);
}

std::vector<json> keep_well_formed(std::vector<json> items, std::string_view kind, ShapeCheck check,
                                   std::vector<std::string>& skipped) {
  std::vector<json> kept;
  kept.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto problem = check(items[i]); !problem.empty()) {
      skipped.push_back(fmt::format("{} skipped: {}", object_label(kind, items[i], i), problem));
    } else {
      kept.push_back(std::move(items[i]));
    }
  }
  return kept;
}

}  // namespace gpuctl::kube
