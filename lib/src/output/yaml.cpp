#include "gpuctl/output/yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <regex>

namespace gpuctl::output {
namespace {

// Would a YAML 1.1/1.2 reader turn this plain scalar into something other than a string?
bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex special(
      "^(~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N|"
      "[-+]?(\\.[0-9]+|[0-9][0-9_]*(\\.[0-9_]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)|"
      "[0-9]+(:[0-5]?[0-9])+(\\.[0-9]*)?|"
      // YAML 1.1 timestamps: readers turn them into dates, so RFC 3339 strings stay quoted (as kubectl does)
      "[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ]|[ \\t]+)?.*)$");
  return std::regex_match(s, special);
}

void emit(YAML::Emitter& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key;
        if (needs_quotes(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, value);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& item : v) emit(out, item);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (needs_quotes(s)) out << YAML::DoubleQuoted;
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

std::string to_yaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  emit(out, value);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace gpuctl::output
