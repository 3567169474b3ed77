#pragma once
// Kubernetes resource quantities ("500m", "1.5Gi", "8", "1e3"), parsed and formatted exactly
// as the API server does (k8s.io/apimachinery/pkg/api/resource). Values are exact: no
// floating point is involved anywhere.
//
// What upstream does, and so what this class does:
//  - Values are kept to the nano (1n = 10^-9). A non-zero value finer than that is rounded
//    away from zero to the next nano: "0.9n" and "1e-100" are 1n, "3.001n" is 4n.
//  - A binary-SI quantity ("Ki".."Ei") is capped, silently, at 2^63-1 in magnitude when parsed:
//    "8Ei" and "9Ei" are 9223372036854775807. A binary-SI quantity between -1 and 1 (not zero)
//    is read as decimal SI: "0.000000000001Ki" is 2n, decimal SI.
//  - Decimal quantities are not capped at int64: "12E" is 12*10^18, exactly.
//  - The parser is more permissive than the regular expression it quotes in its errors: a bare
//    sign, point or suffix is zero ("-", ".", "k", "Ki", "e5" all parse as 0), "1." and ".5"
//    are numbers, and leading zeros are allowed. Whitespace is never allowed.
//
// Where gpuctl deliberately differs:
//  - Magnitudes of 10^29 or more are rejected by parse() (the value is held as a 128-bit count
//    of nanos). Upstream keeps arbitrarily large decimal values; no resource needs them.
//  - Exponents are read as 64-bit numbers and applied exactly ("1e-3000000000" is 1n);
//    upstream truncates them to 32 bits, which silently changes the value.
//  - Value() and MilliValue() saturate at the int64 limits instead of wrapping, and round
//    negative values away from zero on every path (upstream's big-decimal path does not).
//  - Formatting follows upstream with its fix for values past the last suffix: a decimal-SI
//    value whose exponent is above "E" is written in exponent form ("1000E" -> "1e21"), and a
//    binary-SI value past "Ei" in decimal form.
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
  // value * 10^scale (upstream's NewScaledQuantity, with a format). A remainder finer than a
  // nano rounds away from zero, as parse() does; a magnitude of 10^29 or more is an error.
  static Result<Quantity> from_scaled(std::int64_t value, int scale, Format format = Format::decimal_si);

  // The string the API server would send back for this quantity (upstream's String()): the
  // canonical form, except that a quantity parsed from text upstream takes to be canonical
  // keeps that text. Upstream's test is loose, so "+1", "01", "1E3" and "1.500k" come back as
  // written. Arithmetic drops the text, as upstream does.
  std::string to_string() const;
  // The canonical form computed from the value and format alone, never the parsed text:
  // largest suffix that keeps the mantissa an integer ("1.5Gi" -> "1536Mi", "0.5" -> "500m",
  // "1000" -> "1k", "1.500k" -> "1500").
  std::string canonical() const;

  // The value rounded up to the nearest integer (Quantity.Value()). Saturates at int64 limits.
  // "Rounded up" is away from zero, as upstream does: 1.5 is 2 and -1.5 is -2.
  std::int64_t value() const;
  // The value times 1000, rounded up (Quantity.MilliValue()). Saturates at int64 limits.
  // "0.1m" has a milli value of 1.
  std::int64_t milli_value() const;

  bool is_zero() const;
  int sign() const;
  Format format() const { return format_; }

  // As upstream's Add and Sub: when this quantity is zero it takes the other's format. The
  // sum saturates at +-(10^29 - 1n), which no sum of real resources reaches.
  Quantity& operator+=(const Quantity& other);
  Quantity& operator-=(const Quantity& other);
  // This quantity n times, as n additions would give it (saturating the same way, taking this
  // quantity's format), in one step; zero when n <= 0.
  Quantity times(std::int64_t n) const;
  friend Quantity operator+(Quantity a, const Quantity& b) { return a += b; }
  friend Quantity operator-(Quantity a, const Quantity& b) { return a -= b; }
  // Comparisons look at the value only, never at the format or the parsed text.
  friend bool operator==(const Quantity& a, const Quantity& b) { return a.compare(b) == 0; }
  friend std::strong_ordering operator<=>(const Quantity& a, const Quantity& b) { return a.compare(b) <=> 0; }

 private:
  __extension__ typedef __int128 Nanos;  // __extension__: __int128 is a GNU type (-Wpedantic)

  Quantity(Nanos nanos, Format format) : nanos_(nanos), format_(format) {}
  int compare(const Quantity& other) const;
  void add(Nanos delta, Format other_format);

  // The exact value is nanos_ * 10^-9, |nanos_| < 10^38; values that do not fit are rejected
  // by parse().
  Nanos nanos_ = 0;
  Format format_ = Format::decimal_si;
  // The parsed text when upstream would keep it as the serialized form; empty otherwise.
  std::string text_;
};

// Arithmetic on the int64 counts taken from quantities (Quantity::value(), GPU counts, MiB):
// the result saturates at the int64 limits where plain + and * would overflow, which is
// undefined behaviour. A sum of hostile values near 2^63 stays at 2^63-1 instead of wrapping
// to a negative count.
std::int64_t saturating_add(std::int64_t a, std::int64_t b);
std::int64_t saturating_sub(std::int64_t a, std::int64_t b);
std::int64_t saturating_mul(std::int64_t a, std::int64_t b);

}  // namespace gpuctl::kube
