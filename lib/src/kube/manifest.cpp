#include "gpuctl/kube/manifest.hpp"

#include <cerrno>
#include <cstdlib>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace gpuctl::kube {
namespace {

using json = nlohmann::json;

// YAML 1.2 core schema, plus the YAML 1.1 booleans go-yaml v2 (and so sigs.k8s.io/yaml) still
// reads as booleans: an unquoted `yes` in a manifest is true to the API server.
json plain_scalar(const std::string& s) {
  static const std::regex null_re("^(~|null|Null|NULL|)$");
  static const std::regex true_re("^(true|True|TRUE|yes|Yes|YES|on|On|ON|y|Y)$");
  static const std::regex false_re("^(false|False|FALSE|no|No|NO|off|Off|OFF|n|N)$");
  static const std::regex int_re("^[-+]?(0|[1-9][0-9_]*)$");
  static const std::regex hex_re("^0x[0-9a-fA-F_]+$");
  static const std::regex oct_re("^0o?[0-7_]+$");
  static const std::regex float_re(R"(^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(s, null_re)) return nullptr;
  if (std::regex_match(s, true_re)) return true;
  if (std::regex_match(s, false_re)) return false;
  std::string digits;
  for (char c : s) if (c != '_') digits += c;
  errno = 0;
  if (std::regex_match(s, int_re)) {
    char* end = nullptr;
    long long v = std::strtoll(digits.c_str(), &end, 10);
    if (errno == 0 && *end == '\0') return v;
  } else if (std::regex_match(s, hex_re)) {
    long long v = std::strtoll(digits.c_str() + 2, nullptr, 16);
    if (errno == 0) return v;
  } else if (std::regex_match(s, oct_re)) {
    long long v = std::strtoll(digits.c_str() + (digits.size() > 1 && digits[1] == 'o' ? 2 : 1), nullptr, 8);
    if (errno == 0) return v;
  }
  if (std::regex_match(s, float_re)) {
    double v = std::strtod(digits.c_str(), nullptr);
    if (errno == 0) return v;
  }
  return s;
}

Result<json> to_json(const YAML::Node& node, std::string_view source) {
  auto where = [&] { return fmt::format("{}:{}", source, node.Mark().line + 1); };
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted (and literal/folded) scalars "!": those are strings, whatever they say.
      if (node.Tag() == "!") return json(node.Scalar());
      if (node.Tag() == "!!str" || node.Tag() == "tag:yaml.org,2002:str") return json(node.Scalar());
      return plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        GPUCTL_TRY_ASSIGN(json v, to_json(item, source));
        out.push_back(std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return fail(Errc::invalid_argument, fmt::format("{}: a map key is not a string", where()));
        const std::string& key = kv.first.Scalar();
        if (out.contains(key)) {
          return fail(Errc::invalid_argument,
                      fmt::format("{}: key \"{}\" appears twice; remove one of them", where(), key));
        }
        GPUCTL_TRY_ASSIGN(json v, to_json(kv.second, source));
        out[key] = std::move(v);
      }
      return out;
    }
  }
  return json(nullptr);
}

}  // namespace

Result<nlohmann::json> parse_manifest(std::string_view text, std::string_view source) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(Errc::invalid_argument,
                fmt::format("{}:{}: not valid YAML or JSON: {}", source, e.mark.line + 1, e.msg));
  }
  std::vector<YAML::Node> real;
  for (auto& d : docs) {
    if (!d.IsNull()) real.push_back(d);
  }
  if (real.empty()) return fail(Errc::invalid_argument, fmt::format("{}: holds no object; expected one manifest", source));
  if (real.size() > 1) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: holds {} documents; give one object per file", source, real.size()));
  }
  if (!real[0].IsMap()) {
    return fail(Errc::invalid_argument, fmt::format("{}: is not an object (expected apiVersion, kind, metadata, spec)", source));
  }
  return to_json(real[0], source);
}

}  // namespace gpuctl::kube
