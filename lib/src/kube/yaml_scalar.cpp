// Plain-scalar typing for manifests and kubeconfigs. Every scanner makes one pass over the text
// and never recurses; each matches the regular expression quoted above it, which the unit tests
// check against std::regex on short strings.
#include "gpuctl/kube/yaml_scalar.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>

#include "gpuctl/util/scan.hpp"

namespace gpuctl::kube {
namespace {

using util::is_digit;
using util::is_hex_digit;
using util::one_of;
using util::skip;
bool is_sign(char c) { return c == '-' || c == '+'; }

// ~|null|Null|NULL|(empty)
bool is_null_word(std::string_view s) { return one_of(s, {"", "~", "null", "Null", "NULL"}); }
// true|True|TRUE|yes|Yes|YES|on|On|ON|y|Y
bool is_true_word(std::string_view s) {
  return one_of(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"});
}
// false|False|FALSE|no|No|NO|off|Off|OFF|n|N
bool is_false_word(std::string_view s) {
  return one_of(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"});
}

// [-+]?(0|[1-9][0-9_]*)
bool is_manifest_int(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && is_sign(s[i])) ++i;
  if (i >= s.size()) return false;
  if (s[i] == '0') return i + 1 == s.size();
  if (!is_digit(s[i])) return false;
  ++i;
  skip(s, i, [](char c) { return is_digit(c) || c == '_'; });
  return i == s.size();
}

// 0x[0-9a-fA-F_]+
bool is_manifest_hex(std::string_view s) {
  if (s.size() < 3 || s[0] != '0' || s[1] != 'x') return false;
  std::size_t i = 2;
  skip(s, i, [](char c) { return is_hex_digit(c) || c == '_'; });
  return i == s.size();
}

// 0o?[0-7_]+
bool is_manifest_octal(std::string_view s) {
  if (s.empty() || s[0] != '0') return false;
  std::size_t i = 1;
  if (i < s.size() && s[i] == 'o') ++i;
  const std::size_t digits = skip(s, i, [](char c) { return (c >= '0' && c <= '7') || c == '_'; });
  return digits > 0 && i == s.size();
}

// [-+]?[0-9]+
bool is_plain_int(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && is_sign(s[i])) ++i;
  return skip(s, i, is_digit) > 0 && i == s.size();
}

}  // namespace

bool is_yaml_float_syntax(std::string_view s, bool with_underscores) {
  auto digit_or_underscore = [with_underscores](char c) { return is_digit(c) || (with_underscores && c == '_'); };
  std::size_t i = 0;
  if (i < s.size() && is_sign(s[i])) ++i;
  if (i >= s.size()) return false;
  if (s[i] == '.') {  // \.[0-9]+
    ++i;
    if (skip(s, i, is_digit) == 0) return false;
  } else {  // [0-9][0-9_]*(\.[0-9_]*)?
    if (!is_digit(s[i])) return false;
    ++i;
    skip(s, i, digit_or_underscore);
    if (i < s.size() && s[i] == '.') {
      ++i;
      skip(s, i, digit_or_underscore);
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {  // ([eE][-+]?[0-9]+)?
    ++i;
    if (i < s.size() && is_sign(s[i])) ++i;
    if (skip(s, i, is_digit) == 0) return false;
  }
  return i == s.size();
}

nlohmann::json manifest_plain_scalar(const std::string& s) {
  if (is_null_word(s)) return nullptr;
  if (is_true_word(s)) return true;
  if (is_false_word(s)) return false;
  std::string digits;
  for (char c : s) {
    if (c != '_') digits += c;
  }
  // errno is cleared once: an integer that overflows leaves ERANGE behind, so it stays a string
  // rather than becoming a float (as before the scanners replaced the regular expressions).
  errno = 0;
  if (is_manifest_int(s)) {
    char* end = nullptr;
    long long v = std::strtoll(digits.c_str(), &end, 10);
    if (errno == 0 && *end == '\0') return v;
  } else if (is_manifest_hex(s)) {
    long long v = std::strtoll(digits.c_str() + 2, nullptr, 16);
    if (errno == 0) return v;
  } else if (is_manifest_octal(s)) {
    long long v = std::strtoll(digits.c_str() + (digits.size() > 1 && digits[1] == 'o' ? 2 : 1), nullptr, 8);
    if (errno == 0) return v;
  }
  if (is_yaml_float_syntax(s, true)) {
    double v = std::strtod(digits.c_str(), nullptr);
    if (errno == 0) return v;
  }
  return s;
}

nlohmann::json kubeconfig_plain_scalar(const std::string& s) {
  if (is_null_word(s)) return nullptr;
  if (is_true_word(s)) return true;
  if (is_false_word(s)) return false;
  const char* begin = s.data() + (s.front() == '+' ? 1 : 0);
  const char* end = s.data() + s.size();
  if (is_plain_int(s)) {
    long long v = 0;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ec == std::errc() && ptr == end) return v;
  }
  if (is_yaml_float_syntax(s, false)) {
    double v = 0;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ec == std::errc() && ptr == end) return v;
  }
  return s;
}

}  // namespace gpuctl::kube
