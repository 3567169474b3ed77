// Quantities written back as the API server writes them (upstream's String() and
// CanonicalizeBytes): the largest suffix that keeps the mantissa an integer.
#include "gpuctl/kube/quantity.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "kube/quantity_internal.hpp"

namespace gpuctl::kube {
namespace {

using detail::kNanosPerUnit;
using detail::magnitude;
using detail::U128;
using Format = Quantity::Format;

// Suffixes for 1024^0..1024^6 and for 10^-9, 10^-6, ..., 10^18, as canonical forms write them.
constexpr std::array<std::string_view, 7> kBinarySuffixes{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
constexpr std::array<std::string_view, 10> kDecimalSuffixes{"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};

std::string u128_to_string(U128 v) {
  if (v == 0) return "0";
  std::array<char, 40> buf{};
  std::size_t pos = buf.size();
  while (v != 0) {
    buf[--pos] = static_cast<char>('0' + static_cast<int>(v % 10));
    v /= 10;
  }
  return std::string(buf.data() + pos, buf.size() - pos);
}

}  // namespace

std::string Quantity::to_string() const { return text_.empty() ? canonical() : text_; }

std::string Quantity::canonical() const {
  if (nanos_ == 0) return "0";
  const std::string sign = nanos_ < 0 ? "-" : "";
  const U128 mag = magnitude(nanos_);
  Format format = format_;
  if (format == Format::binary_si) {
    // Below 1024 in magnitude, or with a fraction, binary SI is written as decimal SI.
    if (mag < 1024 * kNanosPerUnit || mag % kNanosPerUnit != 0) {
      format = Format::decimal_si;
    } else {
      U128 mantissa = mag / kNanosPerUnit;
      std::size_t power = 0;
      while (mantissa >= 1024 && mantissa % 1024 == 0) {
        mantissa /= 1024;
        ++power;
      }
      if (power < kBinarySuffixes.size()) {
        return sign + u128_to_string(mantissa) + std::string(kBinarySuffixes[power]);
      }
      // Past "Ei" (only reachable by arithmetic): upstream's fix writes it in decimal.
      format = Format::decimal_si;
    }
  }
  // mantissa * 10^exponent with no trailing zeros in the mantissa, then the exponent lowered
  // to a multiple of three (it never goes below -9, where it started).
  U128 mantissa = mag;
  int exponent = -9;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  while (exponent % 3 != 0) {
    mantissa *= 10;
    --exponent;
  }
  std::string out = sign + u128_to_string(mantissa);
  if (format == Format::decimal_si && exponent <= 18) {
    out += kDecimalSuffixes[static_cast<std::size_t>((exponent + 9) / 3)];
  } else if (exponent != 0) {
    // Decimal exponent form; also decimal SI past "E", as upstream's fix does ("1000E" -> "1e21").
    out += 'e';
    out += std::to_string(exponent);
  }
  return out;
}

}  // namespace gpuctl::kube
