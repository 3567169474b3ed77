// The `-o json|yaml` schema of a restore (kind RestoreReport) and its verdict.
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/restore/restore.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

std::string_view dry_run_name(DryRun d) {
  switch (d) {
    case DryRun::none: return "none";
    case DryRun::client: return "client";
    case DryRun::server: return "server";
  }
  return "none";
}

json item_json(const RestoreItem& item) {
  json changes = json::array();
  for (const auto& c : item.changes) changes.push_back({{"field", c.field}, {"from", c.from}, {"to", c.to}});
  json conflicts = json::array();
  for (const auto& c : item.conflicts) conflicts.push_back({{"manager", c.manager}, {"field", c.field}});
  return {{"kind", item.kind->kind}, {"resource", item.kind->folder()},  {"namespace", item.namespace_name},
          {"name", item.name},       {"action", to_string(item.action)}, {"result", to_string(item.result)},
          {"reason", item.reason},   {"changes", std::move(changes)},    {"conflicts", std::move(conflicts)},
          {"error", item.error}};
}

}  // namespace

bool restore_succeeded(const RestoreReport& report) {
  for (const auto& item : report.items) {
    if (item.result == RestoreResult::conflict || item.result == RestoreResult::failed) return false;
  }
  if (report.verify) {
    for (const auto& c : *report.verify) {
      if (!c.passed) return false;
    }
  }
  return !report.interrupted;
}

nlohmann::json to_json(const RestoreReport& report) {
  json items = json::array();
  json summary = {{"create", 0}, {"update", 0}, {"unchanged", 0}, {"skip", 0}, {"conflict", 0}, {"failed", 0}};
  for (const auto& item : report.items) {
    items.push_back(item_json(item));
    if (item.result == RestoreResult::conflict || item.result == RestoreResult::failed) {
      summary[std::string(to_string(item.result))] = summary[std::string(to_string(item.result))].get<int>() + 1;
    } else {
      summary[std::string(to_string(item.action))] = summary[std::string(to_string(item.action))].get<int>() + 1;
    }
  }
  json doc = {{"dryRun", dry_run_name(report.dry_run)},
              {"source", report.source},
              {"items", std::move(items)},
              {"missingNodes", report.missing_nodes},
              {"ignored", report.ignored},
              {"summary", std::move(summary)},
              {"interrupted", report.interrupted},
              {"notStarted", report.not_started},
              {"succeeded", restore_succeeded(report)}};
  if (report.verify) {
    json checks = json::array();
    bool passed = true;
    for (const auto& c : *report.verify) {
      checks.push_back({{"check", c.check}, {"object", c.object}, {"passed", c.passed}, {"detail", c.detail}});
      passed = passed && c.passed;
    }
    doc["verify"] = {{"passed", passed}, {"checks", std::move(checks)}};
  }
  return schema_document("RestoreReport", std::move(doc));
}

}  // namespace gpuctl::ops
