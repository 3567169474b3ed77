// Kubernetes resource quantities, following k8s.io/apimachinery/pkg/api/resource
// (quantity.go, amount.go, suffix.go). The value is an exact count of nanos in 128 bits; the
// upstream int64 and inf.Dec paths are not reproduced as such, only what they compute.
#include "gpuctl/kube/quantity.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "gpuctl/util/scan.hpp"
#include "kube/quantity_internal.hpp"

namespace gpuctl::kube {
namespace {

using detail::I128;
using detail::kMaxNanos;
using detail::kMaxNanosDigits;
using detail::kNanosPerUnit;
using detail::magnitude;
using detail::pow10;
using detail::U128;
using Format = Quantity::Format;

// Upstream caps parsed binary-SI quantities at the largest int64.
constexpr U128 kBinaryCapNanos = static_cast<U128>(std::numeric_limits<std::int64_t>::max()) * kNanosPerUnit;

// Upstream's splitREString, quoted in its ErrFormatWrong.
constexpr std::string_view kSyntax = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";
constexpr std::string_view kExamples = "for example 500m, 1.5Gi, 8 or 1e3";

using util::is_digit;
bool is_suffix_char(char c) { return std::string_view("eEinumkKMGTP").find(c) != std::string_view::npos; }

// The text as it appears in error messages: quoted, control bytes escaped, long input cut.
std::string quoted(std::string_view text) {
  constexpr std::size_t kMaxShown = 64;
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out += '"';
  if (text.size() > kMaxShown) out += " (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::unexpected<Error> invalid(std::string_view text, std::string_view why) {
  return fail(Errc::invalid_argument, "invalid quantity " + quoted(text) + ": " + std::string(why));
}

std::unexpected<Error> format_error(std::string_view text) {
  return invalid(text, "quantities must match the regular expression '" + std::string(kSyntax) + "' (" +
                           std::string(kExamples) + ")");
}

// The pieces of upstream's parseQuantityString. num has its leading zeros stripped ("0" when
// nothing is left); number is the sign-and-digits prefix upstream hands to inf.Dec.
struct Scanned {
  bool positive = true;
  std::string_view number;
  std::string_view num;
  std::string_view denom;
  std::string_view suffix;
};

// The same scan as upstream, which is looser than its regular expression: the number may be
// empty, a bare sign or a bare point. Fails only where upstream returns ErrFormatWrong.
std::optional<Scanned> scan(std::string_view str) {
  Scanned s;
  std::size_t pos = 0;
  const std::size_t end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    s.positive = str[0] == '+';
    ++pos;
  }
  while (pos < end && str[pos] == '0') ++pos;
  if (pos == end) {  // only a sign and zeros
    s.num = "0";
    s.number = "0";
    return s;
  }
  const std::size_t num_start = pos;
  while (pos < end && is_digit(str[pos])) ++pos;
  s.num = str.substr(num_start, pos - num_start);
  if (s.num.empty()) s.num = "0";
  if (pos < end && str[pos] == '.') {
    ++pos;
    const std::size_t denom_start = pos;
    while (pos < end && is_digit(str[pos])) ++pos;
    s.denom = str.substr(denom_start, pos - denom_start);
  }
  s.number = str.substr(0, pos);
  const std::size_t suffix_start = pos;
  while (pos < end && is_suffix_char(str[pos])) ++pos;
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  while (pos < end && is_digit(str[pos])) ++pos;
  if (pos != end) return std::nullopt;
  s.suffix = str.substr(suffix_start);
  return s;
}

struct Suffix {
  int base = 10;              // 10 or 2
  std::int64_t exponent = 0;  // power of the base
  Format format = Format::decimal_si;
};

// An exponent suffix: 'e' or 'E', an optional sign, at least one digit, within int64 (upstream
// uses strconv.ParseInt and fails the same way).
std::optional<std::int64_t> parse_exponent(std::string_view digits) {
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty()) return std::nullopt;
  constexpr U128 kLimitPositive = static_cast<U128>(std::numeric_limits<std::int64_t>::max());
  const U128 limit = negative ? kLimitPositive + 1 : kLimitPositive;
  U128 value = 0;
  for (char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    value = value * 10 + static_cast<U128>(c - '0');
    if (value > limit) return std::nullopt;
  }
  return negative ? static_cast<std::int64_t>(static_cast<I128>(0) - static_cast<I128>(value))
                  : static_cast<std::int64_t>(value);
}

std::optional<Suffix> interpret(std::string_view suffix) {
  struct Entry {
    std::string_view text;
    Suffix suffix;
  };
  static constexpr std::array<Entry, 16> kTable{{
      {"", {10, 0, Format::decimal_si}},
      {"n", {10, -9, Format::decimal_si}},
      {"u", {10, -6, Format::decimal_si}},
      {"m", {10, -3, Format::decimal_si}},
      {"k", {10, 3, Format::decimal_si}},
      {"M", {10, 6, Format::decimal_si}},
      {"G", {10, 9, Format::decimal_si}},
      {"T", {10, 12, Format::decimal_si}},
      {"P", {10, 15, Format::decimal_si}},
      {"E", {10, 18, Format::decimal_si}},
      {"Ki", {2, 10, Format::binary_si}},
      {"Mi", {2, 20, Format::binary_si}},
      {"Gi", {2, 30, Format::binary_si}},
      {"Ti", {2, 40, Format::binary_si}},
      {"Pi", {2, 50, Format::binary_si}},
      {"Ei", {2, 60, Format::binary_si}},
  }};
  for (const auto& entry : kTable) {
    if (entry.text == suffix) return entry.suffix;
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    if (auto exponent = parse_exponent(suffix.substr(1))) {
      return Suffix{10, *exponent, Format::decimal_exponent};
    }
  }
  return std::nullopt;
}

// digits (no leading zeros) times 2^shift, as decimal digits.
std::string times_power_of_two(std::string_view digits, int shift) {
  const U128 factor = static_cast<U128>(1) << shift;  // shift <= 60
  std::string out(digits.size() + 20, '0');
  U128 carry = 0;
  std::size_t o = out.size();
  for (std::size_t i = digits.size(); i-- > 0;) {
    const U128 v = static_cast<U128>(digits[i] - '0') * factor + carry;
    out[--o] = static_cast<char>('0' + static_cast<int>(v % 10));
    carry = v / 10;
  }
  while (carry != 0) {
    out[--o] = static_cast<char>('0' + static_cast<int>(carry % 10));
    carry /= 10;
  }
  return out.substr(o);
}

U128 parse_digits(std::string_view digits) {  // at most 38 digits
  U128 v = 0;
  for (char c : digits) v = v * 10 + static_cast<U128>(c - '0');
  return v;
}

bool ends_with_000(std::string_view a, std::string_view b) {  // (a + b) ends with "000"
  std::string tail(a.size() >= 3 ? a.substr(a.size() - 3) : a);
  tail += b;
  return tail.size() >= 3 && tail.compare(tail.size() - 3, 3, "000") == 0;
}

// Exponents are clamped to this before any arithmetic: past it every non-zero value is far out
// of range or far below a nano, whatever the length of the digits.
constexpr std::int64_t kExponentClamp = std::int64_t{1} << 50;

struct Magnitude {
  U128 nanos = 0;
  bool too_large = false;  // 10^38 nanos or more
};

// |value| in nanos, rounded away from zero: digits * 10^-len(denom) * base^exponent.
Magnitude magnitude_of(const Scanned& s, int base, std::int64_t exponent) {
  std::string digits(s.num);
  digits += s.denom;
  digits.erase(0, digits.find_first_not_of('0'));  // npos: all of it
  if (digits.empty()) return {};
  std::int64_t shift = 9 - static_cast<std::int64_t>(s.denom.size());  // power of ten
  if (base == 10) {
    shift += exponent;
  } else {
    digits = times_power_of_two(digits, static_cast<int>(exponent));
  }
  const std::int64_t integer_digits = static_cast<std::int64_t>(digits.size()) + shift;
  Magnitude m;
  if (integer_digits > kMaxNanosDigits) {
    m.too_large = true;
  } else if (integer_digits <= 0) {
    m.nanos = 1;  // non-zero and below a nano
  } else if (shift >= 0) {
    m.nanos = parse_digits(digits) * pow10(static_cast<int>(shift));
  } else {
    const auto whole = static_cast<std::size_t>(integer_digits);
    m.nanos = parse_digits(std::string_view(digits).substr(0, whole));
    if (digits.find_first_not_of('0', whole) != std::string::npos) ++m.nanos;
  }
  if (m.nanos > kMaxNanos) m.too_large = true;
  return m;
}

}  // namespace

Result<Quantity> Quantity::parse(std::string_view text) {
  if (text.empty()) return format_error(text);
  if (text == "0") {
    Quantity q;
    q.text_ = "0";
    return q;
  }
  const auto scanned = scan(text);
  if (!scanned) return format_error(text);
  const Scanned& s = *scanned;
  const auto suffix = interpret(s.suffix);
  if (!suffix) {
    return invalid(text, "unable to parse quantity's suffix " + quoted(s.suffix) +
                             " (the suffix is one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or "
                             "an exponent such as e3 or E-6; " +
                             std::string(kExamples) + ")");
  }
  const std::int64_t exponent = std::clamp(suffix->exponent, -kExponentClamp, kExponentClamp);

  // Upstream takes an int64 fast path when the digits fit. Only there may it keep the text as
  // the serialized form, and only outside it does a number without digits fail ("Pi", ".e-10":
  // inf.Dec finds nothing to read).
  const auto num_len = static_cast<std::int64_t>(s.num.size());
  const auto denom_len = static_cast<std::int64_t>(s.denom.size());
  bool fast_path = false;
  bool keep_text = false;
  if (suffix->base == 10) {
    const std::int64_t scale = exponent - denom_len;
    fast_path = num_len + denom_len <= 18 && scale >= -9;
    keep_text = fast_path && scale % 3 == 0 && !ends_with_000(s.num, s.denom) && s.num[0] != '0';
  } else {
    // upstream: precision = 15 - len(num) - exponent*3/10 - 1 >= 0, and no fraction
    fast_path = s.denom.empty() && 14 - num_len - exponent * 3 / 10 >= 0;
    keep_text = fast_path && (parse_digits(s.num) & 7U) != 0;
  }
  if (!fast_path && s.number.find_first_of("0123456789") == std::string_view::npos) {
    return invalid(text, "unable to parse numeric part of quantity: it has no digits (" + std::string(kExamples) + ")");
  }

  Magnitude m = magnitude_of(s, suffix->base, exponent);
  Format format = suffix->format;
  if (format == Format::binary_si) {
    if (m.too_large || m.nanos > kBinaryCapNanos) m = {kBinaryCapNanos, false};  // upstream's cap
    if (m.nanos != 0 && m.nanos < kNanosPerUnit) format = Format::decimal_si;
  }
  if (m.too_large) {
    // Upstream keeps such values in an unbounded inf.Dec. gpuctl holds nanos in 128 bits;
    // 10^29 is far beyond any resource, so refusing is safer than wrapping or capping.
    return invalid(
        text, "its magnitude is too large: gpuctl supports quantities below 1e29 (" + std::string(kExamples) + ")");
  }

  const auto nanos = static_cast<I128>(m.nanos);
  Quantity q(s.positive ? nanos : -nanos, format);
  if (keep_text) q.text_ = std::string(text);
  return q;
}

Quantity Quantity::from_int(std::int64_t value, Format format) {
  return Quantity(static_cast<Nanos>(value) * static_cast<Nanos>(kNanosPerUnit), format);
}

Quantity Quantity::from_milli(std::int64_t milli_value, Format format) {
  return Quantity(static_cast<Nanos>(milli_value) * 1'000'000, format);
}

Result<Quantity> Quantity::from_scaled(std::int64_t value, int scale, Format format) {
  const U128 mag = magnitude(value);
  const std::int64_t shift = std::int64_t{scale} + 9;
  U128 nanos = 0;
  if (mag == 0) {
    nanos = 0;
  } else if (shift >= 0) {
    if (shift > kMaxNanosDigits || mag > kMaxNanos / pow10(static_cast<int>(shift))) {
      return fail(Errc::invalid_argument, std::to_string(value) + "e" + std::to_string(scale) +
                                              " is too large for a quantity: gpuctl supports "
                                              "quantities below 1e29");
    }
    nanos = mag * pow10(static_cast<int>(shift));
  } else if (shift < -20) {
    nanos = 1;  // |value| < 10^19, so the value is below a nano
  } else {
    const U128 divisor = pow10(static_cast<int>(-shift));
    nanos = mag / divisor + (mag % divisor != 0 ? 1 : 0);
  }
  return Quantity(value < 0 ? -static_cast<Nanos>(nanos) : static_cast<Nanos>(nanos), format);
}

}  // namespace gpuctl::kube
