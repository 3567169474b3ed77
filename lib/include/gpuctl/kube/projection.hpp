#pragma once
// Decoding API answers into only the fields a reader needs. A pod as the API server sends it is
// 5-10 KiB of JSON (managedFields, env, probes, volumes, status details) of which counting its
// GPUs reads a few hundred bytes; held as a whole nlohmann DOM it costs tens of KiB more. A
// Projection names the fields to keep, and parse_projected() builds the DOM of just those,
// straight from the text (a SAX pass: the dropped parts are scanned, never built). Readers then
// see the same values at the same paths as in the whole object, so every reader in objects.hpp
// works unchanged on a projected object.
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/objects.hpp"

namespace gpuctl::kube {

class Projection {
 public:
  // Keeps everything.
  Projection() = default;
  // Keeps these dotted paths and everything below each ("metadata.labels" keeps every label).
  // Arrays are looked through: "spec.containers.resources" (or, as the shape tables write it,
  // "spec.containers[].resources") keeps the resources of every container. A path that meets a
  // value of another type than it expects keeps that value as it is, so shape checks still see
  // (and name) a malformed field.
  Projection(std::initializer_list<std::string_view> paths);
  explicit Projection(const std::vector<std::string>& paths);
  // The paths of a shape table (objects.hpp): exactly the fields its shape check reads; and
  // `more` paths that a reader reads without checking their shape.
  explicit Projection(const std::vector<FieldShape>& shapes, std::initializer_list<std::string_view> more = {});

  // A list answer: its metadata (resourceVersion, continue) whole, and each of its items
  // through `items`.
  static Projection list_of(const Projection& items);

  bool keeps_everything() const { return root_ == nullptr; }

  // One level of the tree of kept fields; a node with no children keeps its whole subtree.
  struct Node {
    std::map<std::string, Node, std::less<>> children;
  };
  const Node* root() const { return root_.get(); }

 private:
  void add(std::string_view path);
  std::shared_ptr<Node> root_;  // shared: options structs copy projections freely
};

// Parses JSON text, keeping of it only what `projection` names (all of it for a default
// Projection); nesting deeper than util::kMaxNestingDepth is refused. On malformed text the
// error (Errc::parse) says where: "syntax error at byte 1234: ...".
Result<nlohmann::json> parse_projected(std::string_view text, const Projection& projection);

}  // namespace gpuctl::kube
