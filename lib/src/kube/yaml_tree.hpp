#pragma once
// Limits on a YAML document as yaml-cpp loaded it, checked before any conversion walks it
// (private to lib/src: manifests, kubeconfigs, diagnose's suppression files). yaml-cpp shares an aliased node instead
// of copying it, so a small file can describe an exponentially large tree ("billion laughs");
// and every conversion recurses once per level.
#include <cstddef>
#include <string>
#include <string_view>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "gpuctl/error.hpp"

namespace gpuctl::kube::detail {

// The most nodes a document may hold once its aliases are expanded (every value counted; plain
// scalar keys are not). A 40,000-cluster kubeconfig holds about 200,000.
inline constexpr std::size_t kMaxYamlNodes = 1'000'000;

// Walks `root` without recursion, aliases expanded, and fails with `errc` when it nests deeper
// than util::kMaxNestingDepth or holds more than kMaxYamlNodes nodes. The work is bounded by
// the budget, whatever the aliases. `text_size` (the document's size in bytes) tells an alias
// bomb from a document that is simply huge. Messages start with `source`.
Result<void> check_yaml_tree(const YAML::Node& root, std::string_view source, std::size_t text_size, Errc errc);

// A value as errors quote it: control characters escaped and cut after 64 bytes, so that a
// hostile key or value cannot make a one-line error long or break it across lines.
std::string shown_in_error(std::string_view text);

// The number of YAML documents in `text`, counting no further than `limit` + 1. yaml-cpp 0.7 never
// reaches the end of some malformed streams: after a top-level flow node and a ',' ("\"\",",
// "[a],", found by fuzz_manifest) it yields the same document again and again, and LoadAll keeps
// every one (gigabytes in seconds). Counting first, keeping none, bounds it. May throw what
// yaml-cpp's parser throws (YAML::Exception), as Load would.
int count_yaml_documents(const std::string& text, int limit);

// The one-line error for yaml-cpp's own nesting guard (YAML::DeepRecursion).
Error yaml_too_deep(std::string_view source, Errc errc);

}  // namespace gpuctl::kube::detail
