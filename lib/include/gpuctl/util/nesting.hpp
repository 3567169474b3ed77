#pragma once
// How deep a document may nest before gpuctl refuses to read it. Every tree walk in gpuctl
// (our conversions, nlohmann's dump, yaml-cpp's emitter, pugixml's traversal) recurses once per
// level, so a hostile or broken document thousands of levels deep would overflow the stack.
// Real Kubernetes objects, manifests, kubeconfigs and nvidia-smi outputs stay under ~30 levels.
#include <cstddef>
#include <string_view>

namespace gpuctl::util {

// The one nesting limit for JSON, YAML and XML from any source (server, node, file).
inline constexpr int kMaxNestingDepth = 200;

// The deepest nesting of `[`/`{` in JSON text, strings skipped, scanned linearly without
// recursion; stops counting (and returns limit + 1) as soon as `limit` is exceeded, so a
// gigabyte of brackets costs one pass and no memory.
int json_nesting_depth(std::string_view text, int limit = kMaxNestingDepth);

// True when json_nesting_depth(text, limit) > limit.
inline bool json_nesting_exceeds(std::string_view text, int limit = kMaxNestingDepth) {
  return json_nesting_depth(text, limit) > limit;
}

}  // namespace gpuctl::util
