#pragma once
// The values the CEL subset computes with, and the operations on them that need no device
// (equality, ordering, the functions); not part of the library's interface.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dra_cel_internal.hpp"
#include "gpuctl/kube/quantity.hpp"

namespace gpuctl::ops::cel_detail {

struct Value {
  enum class Type {
    boolean,
    integer,
    string,
    version,   // kubernetes.Semver
    quantity,  // kubernetes.Quantity
    list,
    device,
    attributes,        // device.attributes
    capacity,          // device.capacity
    attribute_domain,  // device.attributes['domain']; text: the domain
    capacity_domain,   // device.capacity['domain']; text: the domain
    error,             // CEL's runtime error; text: what
    unknown,           // outside the subset; text: what
  };
  Type type = Type::unknown;
  bool truth = false;
  std::int64_t number = 0;
  std::string text;
  Semver version;
  kube::Quantity quantity;
  std::vector<Value> items;

  static Value of(Type type) {
    Value v;
    v.type = type;
    return v;
  }
  static Value boolean(bool b) {
    Value v = of(Type::boolean);
    v.truth = b;
    return v;
  }
  static Value integer(std::int64_t n) {
    Value v = of(Type::integer);
    v.number = n;
    return v;
  }
  static Value string(std::string s) {
    Value v = of(Type::string);
    v.text = std::move(s);
    return v;
  }
  static Value error(std::string what) {
    Value v = of(Type::error);
    v.text = std::move(what);
    return v;
  }
  static Value unknown(std::string what) {
    Value v = of(Type::unknown);
    v.text = std::move(what);
    return v;
  }
  bool is_problem() const { return type == Type::error || type == Type::unknown; }
};

// CEL's names: bool, int, string, kubernetes.Semver, list, map, ...
std::string_view type_name(Value::Type type);

// The first unknown among the values, else the first error; nullopt when none is either.
std::optional<Value> first_problem(std::initializer_list<const Value*> values);
std::optional<Value> first_problem(const std::vector<const Value*>& values);

// CEL's "no such overload" error for an operator or function on these operands.
Value no_overload(std::string_view op, const Value& a);
Value no_overload(std::string_view op, const Value& a, const Value& b);

// ==: CEL's heterogeneous equality (values of different built-in types are unequal), except that
// kubernetes.Semver and kubernetes.Quantity on the left fail against any other type, as their
// Equal does. Neither operand may be a problem.
Value equal(const Value& a, const Value& b);
// <, <=, >, >=: int, string and bool against their own type (-1, 0, 1); nullopt: no overload.
std::optional<int> ordering(const Value& a, const Value& b);

struct CallContext {
  std::string_view name;
  bool method = false;  // args[0] is the receiver
  std::size_t& steps;
};
// A function or method of the subset (size, lowerAscii, upperAscii, startsWith, endsWith,
// contains, matches, semver, quantity, isGreaterThan, isLessThan, compareTo, major, minor,
// patch, asInteger, isInteger) over evaluated arguments, none of them a problem.
Value call_function(const CallContext& context, const std::vector<Value>& args);

}  // namespace gpuctl::ops::cel_detail
