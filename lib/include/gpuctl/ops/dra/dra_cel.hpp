#pragma once
// The part of CEL that device selectors are written in (DeviceClass and claim selectors,
// DeviceTaintRule selectors), evaluated against one device as the scheduler would: the device's
// driver, its attributes by domain and name, its capacity, comparisons, &&, ||, !, parentheses,
// string functions (lowerAscii, startsWith, endsWith, contains, matches) and `in` over lists.
// An expression outside that subset is never guessed at: the verdict says `unsupported`, and
// the callers treat the device as "not known to match" and say so.
#include <string>
#include <string_view>

#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::ops {

struct CelVerdict {
  enum class Kind { match, no_match, unsupported };
  Kind kind = Kind::unsupported;
  std::string problem;  // for unsupported: what was not understood, one line

  bool matches() const { return kind == Kind::match; }
};

// Pure. Bounded: expressions over kMaxCelLength characters or nested deeper than the limit are
// unsupported, never a crash.
inline constexpr std::size_t kMaxCelLength = 10 * 1024;
CelVerdict evaluate_device_selector(std::string_view expression, const DraDevice& device);

// All of a class's (or request's) selectors against a device: match when all match, no_match
// when one does not, unsupported when none fails and one is unsupported.
CelVerdict evaluate_device_selectors(const std::vector<std::string>& expressions, const DraDevice& device);

// The selector `gpuctl submit --gpu-type` writes for a product: the driver's productName
// attribute, lower-cased, containing the lower-cased product as a literal (`matches` with every
// regex metacharacter escaped): "a100" matches "NVIDIA A100-SXM4-80GB". Pure; `product` is
// quoted safely (no quote or backslash in it can end the string literal).
std::string product_selector_expression(std::string_view driver, std::string_view product);

}  // namespace gpuctl::ops
