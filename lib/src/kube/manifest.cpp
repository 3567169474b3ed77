#include "gpuctl/kube/manifest.hpp"

#include <string>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "gpuctl/kube/yaml_scalar.hpp"
#include "gpuctl/util/nesting.hpp"
#include "gpuctl/util/utf8.hpp"
#include "kube/yaml_tree.hpp"

namespace gpuctl::kube {
namespace {

using json = nlohmann::json;

// More documents than this in one file is a mistake (or yaml-cpp looping: count_yaml_documents).
constexpr int kMaxDocuments = 100;

Result<json> to_json(const YAML::Node& node, std::string_view source) {
  auto where = [&] { return fmt::format("{}:{}", source, node.Mark().line + 1); };
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: return json(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted (and literal/folded) scalars "!": those are strings, whatever they say.
      if (node.Tag() == "!") return json(node.Scalar());
      if (node.Tag() == "!!str" || node.Tag() == "tag:yaml.org,2002:str") return json(node.Scalar());
      return manifest_plain_scalar(node.Scalar());
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
        if (!kv.first.IsScalar())
          return fail(Errc::invalid_argument, fmt::format("{}: a map key is not a string", where()));
        const std::string& key = kv.first.Scalar();
        if (out.contains(key)) {
          return fail(Errc::invalid_argument, fmt::format("{}: key \"{}\" appears twice; remove one of them", where(),
                                                          detail::shown_in_error(key)));
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

namespace {

// Every non-empty document of `text`, each checked for depth and alias expansion; at most
// `max_documents`.
Result<std::vector<YAML::Node>> load_documents(std::string_view text, std::string_view source, int max_documents) {
  // What parses is sent as JSON, which must be UTF-8 (kubectl's YAML reader refuses the same).
  if (std::size_t valid = util::valid_utf8_prefix(text); valid != text.size()) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: byte {} is not valid UTF-8; a manifest must be UTF-8 text", source, valid + 1));
  }
  // JSON is YAML to yaml-cpp, whose parser recurses per level (and gives up only at 2000):
  // a JSON document is measured by the linear scan first.
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[') &&
      util::json_nesting_exceeds(text)) {
    return std::unexpected(detail::yaml_too_deep(source, Errc::invalid_argument));
  }
  std::vector<YAML::Node> docs;
  try {
    const std::string owned(text);
    if (detail::count_yaml_documents(owned, max_documents) > max_documents) {
      return fail(Errc::invalid_argument,
                  fmt::format("{}: holds more than {} YAML documents (or a stray ',' after a value); "
                              "give one object per file",
                              source, max_documents));
    }
    docs = YAML::LoadAll(owned);
  } catch (const YAML::DeepRecursion&) {
    return std::unexpected(detail::yaml_too_deep(source, Errc::invalid_argument));
  } catch (const YAML::Exception& e) {
    return fail(Errc::invalid_argument,
                fmt::format("{}:{}: not valid YAML or JSON: {}", source, e.mark.line + 1, e.msg));
  }
  std::vector<YAML::Node> real;
  for (auto& d : docs) {
    if (d.IsNull()) continue;
    if (!d.IsMap()) {
      return fail(Errc::invalid_argument, fmt::format("{}:{}: a document is not an object (expected apiVersion, "
                                                      "kind, metadata, spec)",
                                                      source, d.Mark().line + 1));
    }
    // Depth and alias expansion are bounded before to_json recurses and copies.
    GPUCTL_TRY(detail::check_yaml_tree(d, source, text.size(), Errc::invalid_argument));
    real.push_back(d);
  }
  if (real.empty())
    return fail(Errc::invalid_argument, fmt::format("{}: holds no object; expected one manifest", source));
  return real;
}

}  // namespace

Result<nlohmann::json> parse_manifest(std::string_view text, std::string_view source) {
  GPUCTL_TRY_ASSIGN(std::vector<YAML::Node> docs, load_documents(text, source, kMaxDocuments));
  if (docs.size() > 1) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: holds {} documents; give one object per file", source, docs.size()));
  }
  return to_json(docs[0], source);
}

Result<std::vector<nlohmann::json>> parse_manifests(std::string_view text, std::string_view source, int max_documents) {
  GPUCTL_TRY_ASSIGN(std::vector<YAML::Node> docs, load_documents(text, source, max_documents));
  std::vector<json> out;
  out.reserve(docs.size());
  for (const auto& d : docs) {
    GPUCTL_TRY_ASSIGN(json object, to_json(d, source));
    out.push_back(std::move(object));
  }
  return out;
}

}  // namespace gpuctl::kube
