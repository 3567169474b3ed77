#include "gpuctl/output/yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <initializer_list>

#include "gpuctl/kube/yaml_scalar.hpp"
#include "gpuctl/util/nesting.hpp"
#include "gpuctl/util/scan.hpp"

namespace gpuctl::output {
namespace {

using util::is_digit;
using util::is_hex_digit;
using util::one_of;
using util::skip;

// 0x[0-9a-fA-F]+ | 0o[0-7]+
bool is_hex_or_octal(std::string_view s) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'o')) return false;
  std::size_t i = 2;
  if (s[1] == 'x') return skip(s, i, is_hex_digit) > 0 && i == s.size();
  return skip(s, i, [](char c) { return c >= '0' && c <= '7'; }) > 0 && i == s.size();
}

// [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)
bool is_inf_or_nan(std::string_view s) {
  if (one_of(s, {".nan", ".NaN", ".NAN"})) return true;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return one_of(s, {".inf", ".Inf", ".INF"});
}

// [0-9]+(:[0-5]?[0-9])+(\.[0-9]*)?  (YAML 1.1 base 60: "1:30" is 90)
bool is_sexagesimal(std::string_view s) {
  std::size_t i = 0;
  if (skip(s, i, is_digit) == 0) return false;
  std::size_t groups = 0;
  while (i < s.size() && s[i] == ':') {
    ++i;
    std::size_t start = i;
    std::size_t n = skip(s, i, is_digit);
    // One digit, or two with the first at most 5: what follows a group is ':', '.' or the end.
    if (n == 0 || n > 2 || (n == 2 && s[start] > '5')) return false;
    ++groups;
  }
  if (groups == 0) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    skip(s, i, is_digit);
  }
  return i == s.size();
}

// [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ]|[ \t]+)?.*  (a YAML 1.1 timestamp: readers turn it into a
// date, so RFC 3339 strings stay quoted, as kubectl does). ".*" takes anything but a line break,
// so this is a date prefix and no '\n' or '\r' anywhere.
bool is_timestamp_like(std::string_view s) {
  std::size_t i = 0;
  if (skip(s, i, is_digit) != 4 || i >= s.size() || s[i] != '-') return false;
  ++i;
  std::size_t month = skip(s, i, is_digit);
  if (month == 0 || month > 2 || i >= s.size() || s[i] != '-') return false;
  ++i;
  if (i >= s.size() || !is_digit(s[i])) return false;
  return s.find_first_of("\n\r") == std::string_view::npos;
}

// Deeper than this the emitter writes a marker instead of the value: the JSON it prints comes
// from depth-checked input, so this is a last guard against unbounded recursion (and output
// whose indentation alone would grow quadratically).
constexpr int kMaxEmitDepth = util::kMaxNestingDepth;
constexpr const char* kTooDeepMarker = "<nested deeper than 200 levels: not shown>";
static_assert(util::kMaxNestingDepth == 200, "kTooDeepMarker names the limit");

void emit(YAML::Emitter& out, const nlohmann::json& v, int depth) {
  if (depth > kMaxEmitDepth && (v.is_object() || v.is_array())) {
    out << kTooDeepMarker;
    return;
  }
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key;
        if (yaml_needs_quotes(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, value, depth + 1);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& item : v) emit(out, item, depth + 1);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (yaml_needs_quotes(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case nlohmann::json::value_t::boolean: out << (v.get<bool>() ? "true" : "false"); break;
    case nlohmann::json::value_t::number_integer: out << v.get<std::int64_t>(); break;
    case nlohmann::json::value_t::number_unsigned: out << v.get<std::uint64_t>(); break;
    case nlohmann::json::value_t::number_float: out << v.dump(); break;
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
    case nlohmann::json::value_t::binary: out << YAML::Null; break;
  }
}

}  // namespace

bool yaml_needs_quotes(std::string_view s) {
  if (s.empty()) return true;
  if (one_of(s, {"~",  "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES",
                 "no", "No",   "NO",   "on",   "On",   "ON",   "off",  "Off",   "OFF",   "y",     "Y",   "n",   "N"})) {
    return true;
  }
  return kube::is_yaml_float_syntax(s, true) || is_hex_or_octal(s) || is_inf_or_nan(s) || is_sexagesimal(s) ||
         is_timestamp_like(s);
}

std::string to_yaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  emit(out, value, 1);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace gpuctl::output
