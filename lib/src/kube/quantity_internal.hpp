#pragma once
// Private pieces shared by the quantity files (lib/src/kube/quantity*.cpp only): the 128-bit
// count of nanos a Quantity holds and its limits.
#include <cstdint>

#include "gpuctl/kube/quantity.hpp"

namespace gpuctl::kube::detail {

__extension__ typedef __int128 I128;
__extension__ typedef unsigned __int128 U128;

constexpr U128 pow10(int n) {
  U128 result = 1;
  for (int i = 0; i < n; ++i) result *= 10;
  return result;
}

constexpr U128 kNanosPerUnit = 1'000'000'000;
// |nanos| < 10^38 keeps every value below 10^29 (and 38 decimal digits fit in __int128).
constexpr int kMaxNanosDigits = 38;
constexpr U128 kMaxNanos = pow10(kMaxNanosDigits) - 1;

inline U128 magnitude(I128 v) { return v < 0 ? static_cast<U128>(0) - static_cast<U128>(v) : static_cast<U128>(v); }

}  // namespace gpuctl::kube::detail
