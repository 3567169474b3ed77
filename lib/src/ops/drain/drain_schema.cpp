// gpuctl's -o json|yaml schemas for drain and rolling-maintenance results.
#include <nlohmann/json.hpp>

#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/drain/drain.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

json node_result(const NodeDrainResult& r) {
  return {{"node", r.node},
          {"result", std::string(to_string(r.outcome))},
          {"cordon", r.cordon},
          {"evicted", r.evicted},
          {"skipped", r.skipped},
          {"remaining", r.remaining},
          {"seconds", static_cast<double>(r.elapsed.count()) / 1000.0},
          {"message", r.message}};
}

std::string missing_message(const NodeChange& m) { return m.error ? m.error->message : "not found"; }

}  // namespace

std::string_view rolling_result(const RollingResult& r) {
  if (r.not_started) return "not_started";
  if (r.ok) return "done";
  return r.interrupted ? "interrupted" : "failed";
}

json to_json(const std::vector<NodeDrainResult>& results, const std::vector<NodeChange>& missing) {
  json items = json::array();
  for (const auto& r : results) items.push_back(node_result(r));
  for (const auto& m : missing)
    items.push_back({{"node", m.node}, {"result", "failed"}, {"message", missing_message(m)}});
  return schema_document("DrainResultList", {{"items", std::move(items)}});
}

json to_json(const std::vector<RollingResult>& results) {
  json items = json::array();
  for (const auto& r : results) {
    json j = node_result(r.drain);
    j["rollingResult"] = std::string(rolling_result(r));
    j["exec"] = r.exec;
    j["ready"] = r.ready;
    j["verify"] = r.verify;
    j["uncordon"] = r.uncordon;
    items.push_back(std::move(j));
  }
  return schema_document("RollingMaintenanceResult", {{"items", std::move(items)}});
}

}  // namespace gpuctl::ops
