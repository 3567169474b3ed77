#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/util/strings.hpp"

#include <charconv>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuctl::kube {
namespace {

using json = nlohmann::json;
using util::join;

std::vector<std::string> string_values(const json& requirement) {
  std::vector<std::string> out;
  const json& values = field(requirement, "values");
  if (!values.is_array()) return out;
  for (const auto& v : values) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return v;
}

// Label-selector semantics of one requirement against a value that may be absent.
bool requirement_holds(const json& requirement, const std::optional<std::string>& value) {
  const std::string op = string_field(requirement, "operator");
  const auto values = string_values(requirement);
  auto contains = [&](const std::string& v) {
    for (const auto& x : values) {
      if (x == v) return true;
    }
    return false;
  };
  if (op == "In") return value && contains(*value);
  if (op == "NotIn") return !value || !contains(*value);
  if (op == "Exists") return value.has_value();
  if (op == "DoesNotExist") return !value.has_value();
  if (op == "Gt" || op == "Lt") {
    if (!value || values.size() != 1) return false;
    auto have = parse_int(*value);
    auto want = parse_int(values.front());
    if (!have || !want) return false;
    return op == "Gt" ? *have > *want : *have < *want;
  }
  return false;  // an unknown operator matches nothing, as upstream's parse error does
}

std::string describe_requirement(const json& requirement) {
  const std::string key = string_field(requirement, "key");
  const std::string op = string_field(requirement, "operator");
  const auto values = string_values(requirement);
  const std::string list = join(values, ",");
  if (op == "In") return values.size() == 1 ? key + "=" + list : key + " in (" + list + ")";
  if (op == "NotIn") return values.size() == 1 ? key + "!=" + list : key + " notin (" + list + ")";
  if (op == "Exists") return key;
  if (op == "DoesNotExist") return "!" + key;
  if (op == "Gt") return key + ">" + list;
  if (op == "Lt") return key + "<" + list;
  return key + " " + op + " (" + list + ")";
}

std::string describe_term(const json& term) {
  std::vector<std::string> parts;
  for (const char* kind : {"matchExpressions", "matchFields"}) {
    const json& list = field(term, kind);
    if (!list.is_array()) continue;
    for (const auto& r : list) parts.push_back(describe_requirement(r));
  }
  return join(parts, ", ");
}

const json& required_affinity(const json& pod_spec) {
  return field(field(field(pod_spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
}

}  // namespace

bool tolerates(const json& toleration, const Taint& taint) {
  if (!toleration.is_object()) return false;
  const std::string effect = string_field(toleration, "effect");
  const std::string key = string_field(toleration, "key");
  const std::string op = string_field(toleration, "operator");
  if (!effect.empty() && effect != taint.effect) return false;
  if (!key.empty() && key != taint.key) return false;
  if (op.empty() || op == "Equal") return string_field(toleration, "value") == taint.value;
  return op == "Exists";
}

bool tolerates(const std::vector<json>& tolerations, const Taint& taint) {
  for (const auto& t : tolerations) {
    if (tolerates(t, taint)) return true;
  }
  return false;
}

std::vector<json> tolerations_of(const json& pod_spec) {
  std::vector<json> out;
  const json& list = field(pod_spec, "tolerations");
  if (!list.is_array()) return out;
  for (const auto& t : list) out.push_back(t);
  return out;
}

std::vector<Taint> untolerated_taints(const json& pod_spec, const json& node) {
  std::vector<Taint> out;
  const auto tolerations = tolerations_of(pod_spec);
  for (const auto& taint : node_taints(node)) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    if (taint.key == kUnschedulableTaintKey) continue;
    if (!tolerates(tolerations, taint)) out.push_back(taint);
  }
  return out;
}

bool node_admits_unschedulable(const json& pod_spec, const json& node) {
  if (!node_unschedulable(node)) return true;
  return tolerates(tolerations_of(pod_spec), Taint{std::string(kUnschedulableTaintKey), "", "NoSchedule", ""});
}

bool matches_requirement(const json& requirement, const json& node) {
  const json& labels = field(field(node, "metadata"), "labels");
  const json& value = field(labels, string_field(requirement, "key"));
  std::optional<std::string> v;
  if (value.is_string()) v = value.get<std::string>();
  return requirement_holds(requirement, v);
}

bool matches_node_selector_term(const json& term, const json& node) {
  const json& expressions = field(term, "matchExpressions");
  const json& fields = field(term, "matchFields");
  bool any = false;
  if (expressions.is_array()) {
    for (const auto& r : expressions) {
      any = true;
      if (!matches_requirement(r, node)) return false;
    }
  }
  if (fields.is_array()) {
    for (const auto& r : fields) {
      any = true;
      if (string_field(r, "key") != "metadata.name") return false;  // the only field upstream supports
      const std::string op = string_field(r, "operator");
      if (op != "In" && op != "NotIn") return false;
      if (!requirement_holds(r, name_of(node))) return false;
    }
  }
  return any;
}

bool matches_node_selector_terms(const json& node_selector, const json& node) {
  const json& terms = field(node_selector, "nodeSelectorTerms");
  if (!terms.is_array()) return false;
  for (const auto& term : terms) {
    if (matches_node_selector_term(term, node)) return true;
  }
  return false;
}

bool matches_node_selector(const json& pod_spec, const json& node) {
  if (std::string node_name = string_field(pod_spec, "nodeName"); !node_name.empty() && node_name != name_of(node)) {
    return false;
  }
  const json& selector = field(pod_spec, "nodeSelector");
  if (selector.is_object()) {
    for (const auto& [key, want] : selector.items()) {
      auto have = label_of(node, key);
      if (!have || !want.is_string() || *have != want.get<std::string>()) return false;
    }
  }
  const json& required = required_affinity(pod_spec);
  if (required.is_object() && !matches_node_selector_terms(required, node)) return false;
  return true;
}

bool has_placement_constraints(const json& pod_spec) {
  const json& selector = field(pod_spec, "nodeSelector");
  return (selector.is_object() && !selector.empty()) || required_affinity(pod_spec).is_object() ||
         !string_field(pod_spec, "nodeName").empty();
}

std::string describe_placement(const json& pod_spec) {
  std::vector<std::string> parts;
  if (std::string node_name = string_field(pod_spec, "nodeName"); !node_name.empty())
    parts.push_back("nodeName=" + node_name);
  const json& selector = field(pod_spec, "nodeSelector");
  if (selector.is_object()) {
    for (const auto& [key, value] : selector.items()) {
      parts.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
    }
  }
  const json& terms = field(required_affinity(pod_spec), "nodeSelectorTerms");
  if (terms.is_array() && terms.size() == 1) {
    if (auto t = describe_term(terms.front()); !t.empty()) parts.push_back(t);
  } else if (terms.is_array() && terms.size() > 1) {
    std::vector<std::string> alternatives;
    for (const auto& term : terms) alternatives.push_back("(" + describe_term(term) + ")");
    parts.push_back(join(alternatives, " or "));
  }
  return join(parts, ", ");
}

std::optional<NodeExclusion> placement_exclusion(const json& pod_spec, const json& node) {
  if (!matches_node_selector(pod_spec, node)) return NodeExclusion{NodeExclusion::Kind::placement, std::nullopt};
  if (!node_admits_unschedulable(pod_spec, node)) return NodeExclusion{NodeExclusion::Kind::cordoned, std::nullopt};
  if (auto taints = untolerated_taints(pod_spec, node); !taints.empty()) {
    return NodeExclusion{NodeExclusion::Kind::taint, taints.front()};
  }
  return std::nullopt;
}

}  // namespace gpuctl::kube
