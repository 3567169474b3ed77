// The -o json|yaml schema of node edits (kind NodeChangeList), shared by taint, label, cordon
// and uncordon (with each node's verification under uncordon --verify).
#include <nlohmann/json.hpp>

#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

json to_json(const std::vector<NodeChange>& changes, std::string_view operation, DryRun dry_run) {
  json items = json::array();
  for (const auto& c : changes) {
    items.push_back({{"name", c.node},
                     {"result", to_string(c.outcome)},
                     {"summary", c.summary},
                     {"patch", c.patch},
                     {"conflicts", c.conflicts},
                     {"error", c.error ? json(c.error->message) : json(nullptr)}});
    if (c.verification) items.back()["verification"] = to_json(*c.verification);
  }
  std::string_view mode = dry_run == DryRun::client ? "client" : dry_run == DryRun::server ? "server" : "none";
  return schema_document("NodeChangeList", {{"operation", operation}, {"dryRun", mode}, {"items", items}});
}

}  // namespace gpuctl::ops
