#pragma once
// Kubernetes resource quantities ("500m", "1.5Gi", "8", "1e3"), parsed and formatted exactly
// as the API server does (k8s.io/apimachinery/pkg/api/resource). Values are exact: no
// floating point is involved anywhere.
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

class Quantity {
 public:
  // The suffix family a quantity was written in; formatting keeps it, as the API server does.
  enum class Format { decimal_exponent, binary_si, decimal_si };

  Quantity() = default;  // zero, decimal SI

  // Parses a quantity string. Errors are Errc::invalid_argument with a message naming the text
  // and the expected syntax (the API server's own "quantities must match the regular
  // expression ..." wording).
  static Result<Quantity> parse(std::string_view text);

  static Quantity from_int(std::int64_t value, Format format = Format::decimal_si);
  static Quantity from_milli(std::int64_t milli_value, Format format = Format::decimal_si);

  // The canonical string the API server would send back for this quantity.
  std::string to_string() const;

  // The value rounded up to the nearest integer (Quantity.Value()). Saturates at int64 limits.
  std::int64_t value() const;
  // The value times 1000, rounded up (Quantity.MilliValue()). Saturates at int64 limits.
  std::int64_t milli_value() const;

  bool is_zero() const;
  int sign() const;
  Format format() const { return format_; }

  Quantity& operator+=(const Quantity& other);
  Quantity& operator-=(const Quantity& other);
  friend Quantity operator+(Quantity a, const Quantity& b) { return a += b; }
  friend Quantity operator-(Quantity a, const Quantity& b) { return a -= b; }
  friend bool operator==(const Quantity& a, const Quantity& b) { return a.compare(b) == 0; }
  friend std::strong_ordering operator<=>(const Quantity& a, const Quantity& b) {
    return a.compare(b) <=> 0;
  }

 private:
  int compare(const Quantity& other) const;

  // The exact value is nanos_ * 10^-9; values that do not fit are rejected by parse().
  __int128 nanos_ = 0;
  Format format_ = Format::decimal_si;
};

}  // namespace gpuctl::kube
