#include "kube/yaml_tree.hpp"

#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "gpuctl/util/nesting.hpp"

namespace gpuctl::kube::detail {
namespace {

// Sees a document's events and keeps nothing.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

int count_yaml_documents(const std::string& text, int limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  int count = 0;
  while (count <= limit && parser.HandleNextDocument(counter)) ++count;
  return count;
}

std::string shown_in_error(std::string_view text) {
  constexpr std::size_t kMaxShown = 64;
  std::string out;
  for (char c : text.substr(0, kMaxShown)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out.push_back(c);
    }
  }
  if (text.size() > kMaxShown) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

Error yaml_too_deep(std::string_view source, Errc errc) {
  return fail(errc,
              fmt::format("{}: YAML nests deeper than {} levels; refusing to read it", source, util::kMaxNestingDepth))
      .error();
}

Result<void> check_yaml_tree(const YAML::Node& root, std::string_view source, std::size_t text_size, Errc errc) {
  std::vector<std::pair<YAML::Node, int>> pending;
  pending.emplace_back(root, 1);
  std::size_t nodes = 0;
  while (!pending.empty()) {
    auto [node, depth] = std::move(pending.back());
    pending.pop_back();
    if (++nodes > kMaxYamlNodes) {
      if (text_size < kMaxYamlNodes) {
        return fail(errc,
                    fmt::format("{}: YAML aliases expand to more than {} nodes (alias bomb?); refusing to read it",
                                source, kMaxYamlNodes));
      }
      return fail(errc, fmt::format("{}: holds more than {} YAML nodes (aliases expanded); refusing to read it", source,
                                    kMaxYamlNodes));
    }
    if (!node.IsSequence() && !node.IsMap()) continue;
    if (depth > util::kMaxNestingDepth) return std::unexpected(yaml_too_deep(source, errc));
    if (node.IsSequence()) {
      for (const auto& item : node) pending.emplace_back(item, depth + 1);
      continue;
    }
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) pending.emplace_back(kv.first, depth + 1);
      pending.emplace_back(kv.second, depth + 1);
    }
  }
  return {};
}

}  // namespace gpuctl::kube::detail
