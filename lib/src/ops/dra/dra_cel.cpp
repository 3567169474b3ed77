// The CEL subset of device selectors, evaluated against one device as the scheduler's allocator
// evaluates it (k8s.io/dynamic-resource-allocation/cel): `device` with driver, attributes and
// capacity by domain, comparisons, &&, ||, !, `in`, string functions, semver() and quantity().
//
// Three outcomes, as CEL has them: a value, an error, or (here) "unknown" for what gpuctl does
// not evaluate. && and || absorb them as CEL does (false && error is false, true || unknown is
// true). At the top an error is no_match: the scheduler fails the expression for that device
// (a missing attribute, `version == 'string'`, which has no overload), so the device is never
// allocated by it; the verdict's problem says why. Unknown is unsupported: never guessed.
#include "gpuctl/ops/dra/dra_cel.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "dra_cel_internal.hpp"
#include "dra_cel_value.hpp"
#include "gpuctl/output/printable.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace cel_detail;
using Type = Value::Type;

class Evaluator {
 public:
  Evaluator(const Ast& ast, const DraDevice& device) : ast_(ast), device_(device) {}

  Value eval(std::size_t index) {
    const Node& node = ast_.nodes[index];
    switch (node.kind) {
      case Node::Kind::boolean: return Value::boolean(node.truth);
      case Node::Kind::integer: return Value::integer(node.number);
      case Node::Kind::string: return Value::string(node.text);
      case Node::Kind::identifier:
        if (node.text == "device") return Value::of(Type::device);
        return Value::unknown(fmt::format("the name {:?} is not in the subset (only `device` is)", node.text));
      case Node::Kind::list: {
        Value list = Value::of(Type::list);
        for (auto a : node.args) list.items.push_back(eval(a));
        return list;
      }
      case Node::Kind::select: return member(eval(node.args[0]), Value::string(node.text));
      case Node::Kind::index: return member(eval(node.args[0]), eval(node.args[1]));
      case Node::Kind::call: return call(node);
      case Node::Kind::logical_not: {
        Value v = eval(node.args[0]);
        if (v.is_problem()) return v;
        if (v.type != Type::boolean) return no_overload("!", v);
        return Value::boolean(!v.truth);
      }
      case Node::Kind::negate: {
        Value v = eval(node.args[0]);
        if (v.is_problem()) return v;
        if (v.type != Type::integer) return no_overload("-", v);
        if (v.number == std::numeric_limits<std::int64_t>::min()) return Value::error("integer overflow");
        return Value::integer(-v.number);
      }
      case Node::Kind::relation: return relation(node);
      case Node::Kind::all_of: return logical(node, false);
      case Node::Kind::any_of: return logical(node, true);
    }
    return Value::unknown("an expression gpuctl does not know");
  }

 private:
  // && (`decisive` false) and || (`decisive` true): the decisive value wins over errors and
  // unknowns; else unknown, then error, then the other value.
  Value logical(const Node& node, bool decisive) {
    std::optional<Value> problem;
    for (auto a : node.args) {
      Value v = eval(a);
      if (v.type == Type::boolean) {
        if (v.truth == decisive) return v;
        continue;
      }
      if (!v.is_problem()) v = no_overload(decisive ? "||" : "&&", v);
      if (!problem || (v.type == Type::unknown && problem->type != Type::unknown)) problem = std::move(v);
    }
    return problem ? *problem : Value::boolean(!decisive);
  }

  Value relation(const Node& node) {
    Value left = eval(node.args[0]);
    Value right = eval(node.args[1]);
    if (auto p = first_problem({&left, &right})) return *p;
    const std::string& op = node.text;
    if (op == "in") return contains(right, left);
    if (op == "==" || op == "!=") {
      Value eq = equal(left, right);
      if (eq.type == Type::boolean && op == "!=") eq.truth = !eq.truth;
      return eq;
    }
    auto order = ordering(left, right);
    if (!order) return no_overload(op, left, right);
    int c = *order;
    bool result = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    return Value::boolean(result);
  }

  // `needle in haystack`: a list's element, or a key of an attribute or capacity domain.
  Value contains(const Value& haystack, const Value& needle) {
    if (haystack.type == Type::list) {
      std::optional<Value> problem;
      for (const auto& item : haystack.items) {
        Value eq = equal(needle, item);
        if (eq.type == Type::boolean && eq.truth) return eq;
        if (eq.is_problem() && !problem) problem = eq;
      }
      return problem ? *problem : Value::boolean(false);
    }
    if ((haystack.type == Type::attribute_domain || haystack.type == Type::capacity_domain) &&
        needle.type == Type::string) {
      return Value::boolean(lookup(haystack, needle.text) != nullptr);
    }
    if (haystack.type == Type::attributes || haystack.type == Type::capacity)
      return Value::unknown("`in` over all of device.attributes or device.capacity is not in the subset");
    return no_overload("in", needle, haystack);
  }

  // The attribute or capacity `name` of a domain value, as the slice wrote it; nullptr if absent.
  const json* lookup(const Value& domain, std::string_view name) {
    const json& map = domain.type == Type::attribute_domain ? device_.attributes : device_.capacity;
    if (!map.is_object()) return nullptr;
    charge(map.size());
    for (const auto& [key, value] : map.items()) {
      auto slash = key.find('/');
      std::string_view key_domain =
          slash == std::string::npos ? std::string_view(device_.driver) : std::string_view(key).substr(0, slash);
      std::string_view key_name =
          slash == std::string::npos ? std::string_view(key) : std::string_view(key).substr(slash + 1);
      if (key_domain == domain.text && key_name == name) return &value;
    }
    return nullptr;
  }

  // target.key and target[key].
  Value member(const Value& target, const Value& key) {
    if (auto p = first_problem({&target, &key})) return *p;
    if (target.type == Type::list) {
      if (key.type != Type::integer) return no_overload("[]", target, key);
      if (key.number < 0 || static_cast<std::size_t>(key.number) >= target.items.size())
        return Value::error(fmt::format("index {} out of range", key.number));
      return target.items[static_cast<std::size_t>(key.number)];
    }
    if (key.type != Type::string) return no_overload("[]", target, key);
    switch (target.type) {
      case Type::device: return device_field(key.text);
      case Type::attributes:
      case Type::capacity: {
        // An unknown domain is an empty map, as the scheduler's CEL environment makes it.
        Value domain = Value::of(target.type == Type::attributes ? Type::attribute_domain : Type::capacity_domain);
        domain.text = key.text;
        return domain;
      }
      case Type::attribute_domain:
      case Type::capacity_domain: {
        const json* found = lookup(target, key.text);
        std::string what =
            fmt::format("device.{}[{:?}].{}", target.type == Type::attribute_domain ? "attributes" : "capacity",
                        target.text, key.text);
        if (!found) return Value::error(fmt::format("no such key: {} (the device has no such attribute)", what));
        return target.type == Type::attribute_domain ? typed_attribute(*found, what) : capacity_value(*found, what);
      }
      default: return Value::error(fmt::format("no such key {:?} in a {}", key.text, type_name(target.type)));
    }
  }

  Value device_field(const std::string& name) {
    if (name == "driver") {
      charge(device_.driver.size());
      return Value::string(device_.driver);
    }
    if (name == "attributes") return Value::of(Type::attributes);
    if (name == "capacity") return Value::of(Type::capacity);
    return Value::unknown(fmt::format("device.{} is not in the subset", name));
  }

  Value typed_attribute(const json& v, const std::string& what) {
    if (v.is_object() && v.size() == 1) {
      const std::string& type = v.begin().key();
      const json& value = v.begin().value();
      if (type == "string" && value.is_string()) {
        charge(value.get_ref<const std::string&>().size());
        return Value::string(value.get<std::string>());
      }
      if (type == "bool" && value.is_boolean()) return Value::boolean(value.get<bool>());
      if (type == "int" && value.is_number_integer() &&
          !(value.is_number_unsigned() && value.get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max()))
        return Value::integer(value.get<std::int64_t>());
      if (type == "version" && value.is_string()) {
        auto version = parse_semver(value.get<std::string>());
        if (!version) return Value::error(fmt::format("{} is not a semantic version", what));
        Value out = Value::of(Type::version);
        out.version = std::move(*version);
        return out;
      }
    }
    return Value::unknown(fmt::format("{} holds a value gpuctl does not read", what));
  }

  Value capacity_value(const json& v, const std::string& what) {
    const json* value = v.is_object() && v.contains("value") ? &v["value"] : nullptr;
    if (!value || !value->is_string())
      return Value::unknown(fmt::format("{} holds a value gpuctl does not read", what));
    auto q = kube::Quantity::parse(value->get<std::string>());
    if (!q) return Value::unknown(fmt::format("{} is not a quantity gpuctl reads", what));
    Value out = Value::of(Type::quantity);
    out.quantity = *q;
    return out;
  }

  Value call(const Node& node) {
    // has(x.f): the presence test, on the select itself rather than on its value.
    if (!node.method && node.text == "has") {
      if (node.args.size() != 1 || ast_.nodes[node.args[0]].kind != Node::Kind::select)
        return Value::unknown("has() takes one field selection");
      const Node& select = ast_.nodes[node.args[0]];
      Value target = eval(select.args[0]);
      if (target.is_problem()) return target;
      if (target.type == Type::attribute_domain || target.type == Type::capacity_domain)
        return Value::boolean(lookup(target, select.text) != nullptr);
      if (target.type == Type::device &&
          (select.text == "driver" || select.text == "attributes" || select.text == "capacity"))
        return Value::boolean(true);
      return Value::unknown(fmt::format("has() on a {} is not in the subset", type_name(target.type)));
    }
    std::vector<Value> args;
    for (auto a : node.args) args.push_back(eval(a));
    std::vector<const Value*> all;
    for (const auto& a : args) all.push_back(&a);
    if (auto p = first_problem(all)) return *p;
    CallContext context{node.text, node.method, steps_};
    return call_function(context, args);
  }

  void charge(std::size_t n) { steps_ += n; }

 public:
  std::size_t steps() const { return steps_; }

 private:
  const Ast& ast_;
  const DraDevice& device_;
  std::size_t steps_ = 0;
};

// Problems quote the expression and the device's values, both from the cluster: they are made
// printable (and valid UTF-8) here, once, for terminals and JSON alike.
CelVerdict verdict(CelVerdict::Kind kind, std::string_view problem = {}) {
  return CelVerdict{kind, output::printable(problem)};
}

}  // namespace

CelVerdict evaluate_device_selector(std::string_view expression, const DraDevice& device) {
  if (expression.size() > kMaxCelLength) {
    return verdict(CelVerdict::Kind::unsupported,
                   fmt::format("the expression is {} characters long, more than the {} gpuctl evaluates",
                               expression.size(), kMaxCelLength));
  }
  auto ast = parse_cel(expression);
  if (!ast) return verdict(CelVerdict::Kind::unsupported, ast.error().message);
  Evaluator evaluator(*ast, device);
  Value v = evaluator.eval(ast->root);
  if (evaluator.steps() > kMaxCelSteps) {
    return verdict(CelVerdict::Kind::unsupported, "evaluating it costs more than gpuctl spends on one selector");
  }
  switch (v.type) {
    case Type::boolean: return verdict(v.truth ? CelVerdict::Kind::match : CelVerdict::Kind::no_match);
    case Type::unknown: return verdict(CelVerdict::Kind::unsupported, v.text);
    case Type::error:
      return verdict(CelVerdict::Kind::no_match, "the scheduler fails this expression for the device: " + v.text);
    default:
      return verdict(CelVerdict::Kind::no_match,
                     fmt::format("the expression gives a {}, not a bool", type_name(v.type)));
  }
}

CelVerdict evaluate_device_selectors(const std::vector<std::string>& expressions, const DraDevice& device) {
  std::optional<CelVerdict> unsupported;
  for (const auto& expression : expressions) {
    CelVerdict v = evaluate_device_selector(expression, device);
    if (v.kind == CelVerdict::Kind::no_match) return v;
    if (v.kind == CelVerdict::Kind::unsupported && !unsupported) unsupported = std::move(v);
  }
  return unsupported ? *unsupported : verdict(CelVerdict::Kind::match);
}

std::string product_selector_expression(std::string_view driver, std::string_view product) {
  // Lower-cased to meet lowerAscii(); a space, '-' or '_' matches any one character, so the
  // label spelling (NVIDIA-H100-80GB-HBM3) finds the driver's (NVIDIA H100 80GB HBM3).
  std::string pattern;
  for (char c : product) {
    if (c == ' ' || c == '-' || c == '_') {
      pattern += '.';
    } else {
      char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
      pattern += regex_literal(std::string_view(&lower, 1));
    }
  }
  std::string attribute = fmt::format("device.attributes[{}].productName", cel_string_literal(driver));
  return fmt::format("has({0}) && {0}.lowerAscii().matches({1})", attribute, cel_string_literal(pattern));
}

}  // namespace gpuctl::ops
