// Arithmetic on quantities: integer and milli values rounded away from zero, sums and products
// that saturate instead of overflowing, comparison, and saturating int64 helpers.
#include "gpuctl/kube/quantity.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kube/quantity_internal.hpp"

namespace gpuctl::kube {

namespace {

using detail::I128;
using detail::kMaxNanos;
using detail::kNanosPerUnit;
using detail::magnitude;
using detail::U128;

// nanos / divisor rounded away from zero, saturated to int64.
std::int64_t scaled_away_from_zero(I128 nanos, U128 divisor) {
  const U128 mag = magnitude(nanos);
  const U128 rounded = mag / divisor + (mag % divisor != 0 ? 1 : 0);
  constexpr U128 kMax = static_cast<U128>(std::numeric_limits<std::int64_t>::max());
  if (nanos >= 0) {
    return rounded > kMax ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(rounded);
  }
  if (rounded > kMax + 1) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(static_cast<I128>(0) - static_cast<I128>(rounded));
}
}  // namespace

std::int64_t Quantity::value() const { return scaled_away_from_zero(nanos_, kNanosPerUnit); }

std::int64_t Quantity::milli_value() const { return scaled_away_from_zero(nanos_, 1'000'000); }

bool Quantity::is_zero() const { return nanos_ == 0; }

int Quantity::sign() const { return nanos_ > 0 ? 1 : (nanos_ < 0 ? -1 : 0); }

void Quantity::add(Nanos delta, Format other_format) {
  text_.clear();
  if (nanos_ == 0) format_ = other_format;
  // Saturate at 10^38-1 nanos, the largest value parse() accepts; a sum of two such values
  // can pass INT128_MAX (about 1.7e38), so the addition itself is checked too.
  const auto limit = static_cast<Nanos>(kMaxNanos);
  Nanos sum = 0;
  if (__builtin_add_overflow(nanos_, delta, &sum)) sum = delta > 0 ? limit : -limit;
  if (sum > limit) sum = limit;
  if (sum < -limit) sum = -limit;
  nanos_ = sum;
}

Quantity& Quantity::operator+=(const Quantity& other) {
  add(other.nanos_, other.format_);
  return *this;
}

Quantity& Quantity::operator-=(const Quantity& other) {
  add(-other.nanos_, other.format_);
  return *this;
}

Quantity Quantity::times(std::int64_t n) const {
  if (n <= 0) return Quantity();
  // |nanos_| < 10^38 and n < 2^63 can pass INT128_MAX: checked, then clamped as add() does.
  const auto limit = static_cast<Nanos>(kMaxNanos);
  Nanos product = 0;
  if (__builtin_mul_overflow(nanos_, static_cast<Nanos>(n), &product)) product = nanos_ > 0 ? limit : -limit;
  product = std::clamp(product, -limit, limit);
  return Quantity(product, format_);
}

int Quantity::compare(const Quantity& other) const {
  return nanos_ < other.nanos_ ? -1 : (nanos_ > other.nanos_ ? 1 : 0);
}

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

std::int64_t saturating_sub(std::int64_t a, std::int64_t b) {
  std::int64_t difference = 0;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (!__builtin_mul_overflow(a, b, &product)) return product;
  return (a < 0) == (b < 0) ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

}  // namespace gpuctl::kube
