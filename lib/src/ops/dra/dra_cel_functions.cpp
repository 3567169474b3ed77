// The CEL subset's operations on values: equality and ordering as cel-go defines them, and the
// functions device selectors call (the strings extension's lowerAscii and upperAscii, the
// standard string functions, Kubernetes' semver() and quantity() libraries).
#include <limits>

#include <fmt/format.h>

#include "dra_cel_value.hpp"

namespace gpuctl::ops::cel_detail {
namespace {

using Type = Value::Type;

Value unsupported_call(std::string_view name, bool method) {
  return Value::unknown(fmt::format("the function {}{}() is not in the subset", method ? "." : "", name));
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (n == name) return true;
  }
  return false;
}

std::size_t code_points(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

std::string ascii_case(std::string s, bool upper) {
  for (auto& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

Value string_method(const CallContext& c, const Value& self, const std::vector<Value>& args) {
  const std::size_t arity = args.size() - 1;
  if (one_of(c.name, {"lowerAscii", "upperAscii", "size"})) {
    if (arity != 0) return Value::unknown(fmt::format("{}() takes no arguments", c.name));
    c.steps += self.text.size();
    if (c.name == "size") return Value::integer(static_cast<std::int64_t>(code_points(self.text)));
    return Value::string(ascii_case(self.text, c.name == "upperAscii"));
  }
  if (arity != 1) return Value::unknown(fmt::format("{}() takes one argument", c.name));
  const Value& arg = args[1];
  if (arg.type != Type::string) return no_overload(c.name, self, arg);
  if (c.name == "startsWith" || c.name == "endsWith") {
    c.steps += arg.text.size();
    return Value::boolean(c.name == "startsWith" ? self.text.starts_with(arg.text) : self.text.ends_with(arg.text));
  }
  if (c.name == "contains") {
    bool over_budget = false;
    std::size_t at = find_counted(self.text, arg.text, c.steps, over_budget);
    if (over_budget) return Value::unknown("contains() costs more than gpuctl spends on one selector");
    return Value::boolean(at != std::string_view::npos);
  }
  // matches
  RegexOutcome outcome = regex_search(arg.text, self.text, c.steps);
  if (outcome.kind == RegexOutcome::Kind::unsupported) {
    return Value::unknown(fmt::format("matches({:?}): {}", arg.text, outcome.problem));
  }
  return Value::boolean(outcome.kind == RegexOutcome::Kind::match);
}

// isGreaterThan, isLessThan and compareTo of a semver or a quantity against one of its own type.
Value comparison_method(const CallContext& c, const Value& self, const std::vector<Value>& args) {
  if (args.size() != 2) return Value::unknown(fmt::format("{}() takes one argument", c.name));
  const Value& other = args[1];
  if (other.type != self.type) return no_overload(c.name, self, other);
  int order = 0;
  if (self.type == Type::version) {
    order = compare(self.version, other.version);
  } else {
    order = self.quantity < other.quantity ? -1 : self.quantity == other.quantity ? 0 : 1;
  }
  if (c.name == "compareTo") return Value::integer(order);
  return Value::boolean(c.name == "isGreaterThan" ? order > 0 : order < 0);
}

Value version_part(const CallContext& c, const Value& self, std::size_t arity) {
  if (arity != 0) return Value::unknown(fmt::format("{}() takes no arguments", c.name));
  std::uint64_t part = c.name == "major"   ? self.version.major
                       : c.name == "minor" ? self.version.minor
                                           : self.version.patch;
  if (part > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return Value::error("a version number is out of the int range");
  return Value::integer(static_cast<std::int64_t>(part));
}

// semver('1.2.3') and quantity('40Gi'): the constructors of Kubernetes' CEL libraries.
Value constructor(const CallContext& c, const std::vector<Value>& args) {
  if (args.size() != 1) return Value::unknown(fmt::format("{}() takes one argument here", c.name));
  if (args[0].type != Type::string) return no_overload(c.name, args[0]);
  if (c.name == "semver") {
    auto v = parse_semver(args[0].text);
    if (!v) return Value::error(fmt::format("{:?} is not a semantic version", args[0].text));
    Value out = Value::of(Type::version);
    out.version = std::move(*v);
    return out;
  }
  auto q = kube::Quantity::parse(args[0].text);
  if (!q) return Value::error(fmt::format("{:?} is not a quantity", args[0].text));
  Value out = Value::of(Type::quantity);
  out.quantity = *q;
  return out;
}

}  // namespace

std::string_view type_name(Value::Type type) {
  switch (type) {
    case Type::boolean: return "bool";
    case Type::integer: return "int";
    case Type::string: return "string";
    case Type::version: return "kubernetes.Semver";
    case Type::quantity: return "kubernetes.Quantity";
    case Type::list: return "list";
    case Type::device: return "device";
    case Type::attributes:
    case Type::capacity:
    case Type::attribute_domain:
    case Type::capacity_domain: return "map";
    case Type::error: return "error";
    case Type::unknown: return "unknown";
  }
  return "unknown";
}

std::optional<Value> first_problem(const std::vector<const Value*>& values) {
  const Value* error = nullptr;
  for (const Value* v : values) {
    if (v->type == Type::unknown) return *v;
    if (v->type == Type::error && error == nullptr) error = v;
  }
  if (error != nullptr) return *error;
  return std::nullopt;
}

std::optional<Value> first_problem(std::initializer_list<const Value*> values) {
  return first_problem(std::vector<const Value*>(values));
}

Value no_overload(std::string_view op, const Value& a) {
  return Value::error(fmt::format("no such overload: {}({})", op, type_name(a.type)));
}
Value no_overload(std::string_view op, const Value& a, const Value& b) {
  return Value::error(fmt::format("no such overload: {}({}, {})", op, type_name(a.type), type_name(b.type)));
}

Value equal(const Value& a, const Value& b) {
  if (a.type == Type::version || a.type == Type::quantity) {
    if (b.type != a.type) return no_overload("==", a, b);
    return Value::boolean(a.type == Type::version ? compare(a.version, b.version) == 0 : a.quantity == b.quantity);
  }
  if (a.type != b.type) return Value::boolean(false);
  switch (a.type) {
    case Type::boolean: return Value::boolean(a.truth == b.truth);
    case Type::integer: return Value::boolean(a.number == b.number);
    case Type::string: return Value::boolean(a.text == b.text);
    case Type::list: {
      if (a.items.size() != b.items.size()) return Value::boolean(false);
      std::optional<Value> problem;
      for (std::size_t i = 0; i < a.items.size(); ++i) {
        Value eq = equal(a.items[i], b.items[i]);
        if (eq.type == Type::boolean && !eq.truth) return eq;
        if (eq.is_problem() && !problem) problem = eq;
      }
      return problem ? *problem : Value::boolean(true);
    }
    default: return Value::unknown(fmt::format("comparing {} values is not in the subset", type_name(a.type)));
  }
}

std::optional<int> ordering(const Value& a, const Value& b) {
  if (a.type != b.type) return std::nullopt;
  auto sign = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  switch (a.type) {
    case Type::boolean: return sign(a.truth, b.truth);
    case Type::integer: return sign(a.number, b.number);
    case Type::string: return sign(a.text, b.text);
    default: return std::nullopt;
  }
}

Value call_function(const CallContext& c, const std::vector<Value>& args) {
  if (!c.method) {
    // size(x) and matches(s, re) are the global forms of the methods.
    if ((c.name == "size" || c.name == "matches") && !args.empty()) {
      return call_function(CallContext{c.name, true, c.steps}, args);
    }
    if (c.name == "semver" || c.name == "quantity") return constructor(c, args);
    return unsupported_call(c.name, false);
  }
  const Value& self = args[0];
  const std::size_t arity = args.size() - 1;
  if (one_of(c.name, {"lowerAscii", "upperAscii", "startsWith", "endsWith", "contains", "matches"})) {
    if (self.type != Type::string) return no_overload(c.name, self);
    return string_method(c, self, args);
  }
  if (c.name == "size") {
    if (self.type == Type::string) return string_method(c, self, args);
    if (self.type == Type::list && arity == 0) return Value::integer(static_cast<std::int64_t>(self.items.size()));
    return no_overload(c.name, self);
  }
  if (one_of(c.name, {"isGreaterThan", "isLessThan", "compareTo"})) {
    if (self.type != Type::version && self.type != Type::quantity) return no_overload(c.name, self);
    return comparison_method(c, self, args);
  }
  if (one_of(c.name, {"major", "minor", "patch"})) {
    if (self.type != Type::version) return no_overload(c.name, self);
    return version_part(c, self, arity);
  }
  return unsupported_call(c.name, true);
}

}  // namespace gpuctl::ops::cel_detail
