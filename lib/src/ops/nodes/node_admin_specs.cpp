// What a user may write for nodes: the shapes of names, label keys and values (as the API
// server checks them, so a mistake is named before anything is sent), and the taint and label
// specs of `gpuctl taint` and `gpuctl label`.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "node_admin_internal.hpp"

namespace gpuctl::ops {

namespace {

using node_admin_detail::invalid;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?, the shape of names and label values.
bool is_name_shaped(std::string_view s) {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// RFC 1123 subdomain: lower-case labels of [a-z0-9-], alphanumeric at both ends, joined by '.'.
constexpr std::string_view kNameRule =
    "must be 63 characters or less, begin and end with an alphanumeric character ([a-z0-9A-Z]) with dashes (-), "
    "underscores (_), dots (.), and alphanumerics between";

bool is_valid_effect(std::string_view effect, TaintTarget target) {
  if (effect == "NoSchedule" || effect == "NoExecute") return true;
  return effect == (target == TaintTarget::node ? "PreferNoSchedule" : "None");
}

std::string_view effects_of(TaintTarget target) {
  return target == TaintTarget::node ? "NoSchedule, PreferNoSchedule, NoExecute" : "None, NoSchedule, NoExecute";
}

}  // namespace

std::string qualified_name_problem(std::string_view key) {
  if (key.empty()) return "name part must be non-empty";
  std::string_view name = key;
  if (auto slash = key.find('/'); slash != std::string_view::npos) {
    auto prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) return "prefix part must be non-empty";
    if (auto p = kube::paths::dns_subdomain_problem(prefix); !p.empty()) return "prefix part " + p;
    if (name.find('/') != std::string_view::npos) {
      return "a qualified name must consist of an optional DNS subdomain prefix and '/', then a name";
    }
  }
  if (name.empty()) return "name part must be non-empty";
  if (name.size() > 63) return fmt::format("name part must be no more than 63 characters (has {})", name.size());
  if (!is_name_shaped(name)) return "name part " + std::string(kNameRule);
  return {};
}

std::string label_value_problem(std::string_view value) {
  if (value.empty()) return {};
  if (value.size() > 63) return fmt::format("must be no more than 63 characters (has {})", value.size());
  if (!is_name_shaped(value)) {
    return "a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
           "must start and end with an alphanumeric character";
  }
  return {};
}

std::string node_name_problem(std::string_view name) { return kube::paths::dns_subdomain_problem(name); }

bool looks_like_taint_spec(std::string_view text) {
  return text.find(':') != std::string_view::npos || text.find('=') != std::string_view::npos || text.ends_with('-');
}

Result<TaintSpec> parse_taint_spec(std::string_view text, TaintTarget target) {
  TaintSpec spec;
  std::string_view body = text;
  if (body.ends_with('-')) {
    spec.remove = true;
    body.remove_suffix(1);
  }
  std::string_view key_value = body;
  if (auto colon = body.rfind(':'); colon != std::string_view::npos) {
    key_value = body.substr(0, colon);
    spec.taint.effect = std::string(body.substr(colon + 1));
    if (!is_valid_effect(spec.taint.effect, target)) {
      return fail(invalid(fmt::format("invalid taint spec \"{}\": effect \"{}\" is not one of {}{}", text,
                                      spec.taint.effect, effects_of(target),
                                      target == TaintTarget::device && spec.taint.effect == "PreferNoSchedule"
                                          ? " (a device taint has no PreferNoSchedule)"
                                          : "")));
    }
  } else if (!spec.remove) {
    std::string effects(effects_of(target));
    std::ranges::replace(effects, ',', '|');
    std::erase(effects, ' ');
    return fail(invalid(
        fmt::format("invalid taint spec \"{}\": an added taint needs an effect, as in KEY[=VALUE]:{}", text, effects)));
  }
  std::string_view key = key_value;
  if (auto eq = key_value.find('='); eq != std::string_view::npos) {
    key = key_value.substr(0, eq);
    spec.taint.value = std::string(key_value.substr(eq + 1));
  }
  spec.taint.key = std::string(key);
  if (auto p = qualified_name_problem(key); !p.empty()) {
    return fail(invalid(fmt::format("invalid taint spec \"{}\": key \"{}\": {}", text, key, p)));
  }
  if (auto p = label_value_problem(spec.taint.value); !p.empty()) {
    return fail(invalid(fmt::format("invalid taint spec \"{}\": value \"{}\": {}", text, spec.taint.value, p)));
  }
  return spec;
}

bool looks_like_label_spec(std::string_view text) {
  return text.find('=') != std::string_view::npos || text.ends_with('-');
}

Result<LabelSpec> parse_label_spec(std::string_view text) {
  LabelSpec spec;
  if (auto eq = text.find('='); eq != std::string_view::npos) {
    spec.key = std::string(text.substr(0, eq));
    spec.value = std::string(text.substr(eq + 1));
  } else if (text.ends_with('-')) {
    spec.key = std::string(text.substr(0, text.size() - 1));
    spec.remove = true;
  } else {
    return fail(
        invalid(fmt::format("invalid label spec \"{}\": use KEY=VALUE to set a label or KEY- to remove it", text)));
  }
  if (auto p = qualified_name_problem(spec.key); !p.empty()) {
    return fail(invalid(fmt::format("invalid label spec \"{}\": key \"{}\": {}", text, spec.key, p)));
  }
  if (auto p = label_value_problem(spec.value); !p.empty()) {
    return fail(invalid(fmt::format("invalid label spec \"{}\": value \"{}\": {}", text, spec.value, p)));
  }
  return spec;
}

}  // namespace gpuctl::ops
