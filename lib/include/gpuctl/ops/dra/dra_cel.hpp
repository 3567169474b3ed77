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
  // For unsupported: what was not understood; for a no_match the scheduler would get as a CEL
  // runtime error (a missing attribute, no such overload): that error. One printable line.
  std::string problem;

  bool matches() const { return kind == Kind::match; }
};

// Pure. Bounded: expressions over kMaxCelLength characters, nested deeper than 64 levels, or
// costing more than 10 million character steps (long attribute values) are unsupported, never
// a crash. A CEL runtime error (an attribute the device lacks, `version == 'string'`, which has
// no overload) is no_match with the error as the problem: the scheduler does not allocate the
// device by that expression either.
inline constexpr std::size_t kMaxCelLength = 10 * 1024;
CelVerdict evaluate_device_selector(std::string_view expression, const DraDevice& device);

// All of a class's (or request's) selectors against a device: match when all match, no_match
// when one does not, unsupported when none fails and one is unsupported.
CelVerdict evaluate_device_selectors(const std::vector<std::string>& expressions, const DraDevice& device);

// The selector `gpuctl submit --gpu-type` writes for a product: the driver's productName
// attribute, lower-cased, containing the lower-cased product as a literal (`matches` with every
// regex metacharacter escaped): "a100" matches "NVIDIA A100-SXM4-80GB". A space, '-' or '_' in
// the product matches any one character, so the label spelling NVIDIA-H100-80GB-HBM3 finds the
// driver's "NVIDIA H100 80GB HBM3". Guarded by has(), so a device without a productName is no
// match rather than an error that aborts the scheduler's allocation. Pure; `product` is quoted
// safely (no quote or backslash in it can end the string literal).
std::string product_selector_expression(std::string_view driver, std::string_view product);

}  // namespace gpuctl::ops
