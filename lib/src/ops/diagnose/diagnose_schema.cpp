// diagnose's `-o json|yaml` documents: the report and the check list (diagnose.hpp).
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using json = nlohmann::json;

json finding_json(const Finding& f) {
  json evidence = json::array();
  for (const auto& e : f.evidence) evidence.push_back({{"source", e.source}, {"text", e.text}, {"time", e.time}});
  return {{"check", f.check},
          {"severity", to_string(f.severity)},
          {"object", {{"kind", f.object.kind}, {"namespace", f.object.namespace_name}, {"name", f.object.name}}},
          {"node", f.node},
          {"summary", f.summary},
          {"evidence", std::move(evidence)},
          {"remedy", f.remedy}};
}

json check_json(const Check& c) {
  json needs = json::array();
  for (Source s : c.needs) needs.push_back(to_string(s));
  return {{"id", c.id},
          {"title", c.title},
          {"layer", to_string(c.layer)},
          {"severity", to_string(c.severity)},
          {"needs", std::move(needs)}};
}

}  // namespace

json to_json(const Report& report) {
  json checks_run = json::array();
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& run : report.checks) {
    const Check* c = find_check(run.id);
    json item = {{"id", run.id}, {"status", to_string(run.status)}};
    if (c != nullptr) {
      item["title"] = c->title;
      item["layer"] = to_string(c->layer);
      item["severity"] = to_string(c->severity);
    }
    item["durationSeconds"] = static_cast<double>(run.duration.count()) / 1e6;
    if (run.status == CheckStatus::skipped) {
      item["skippedBecause"] = run.skipped_because;
      item["skippedByRequest"] = run.by_request;
    }
    checks_run.push_back(std::move(item));
    passed += run.status == CheckStatus::pass;
    failed += run.status == CheckStatus::fail;
    skipped += run.status == CheckStatus::skipped;
  }
  json findings = json::array();
  json summary = {{"critical", 0}, {"error", 0}, {"warning", 0}, {"info", 0}};
  for (const auto& f : report.findings) {
    findings.push_back(finding_json(f));
    summary[std::string(to_string(f.severity))] = summary[std::string(to_string(f.severity))].get<int>() + 1;
  }
  json nodes = json::array();
  int failing = 0;
  for (const auto& v : report.verdicts) {
    json layer = v.layer ? json(to_string(*v.layer)) : json(nullptr);
    failing += v.layer.has_value();
    nodes.push_back({{"node", v.node}, {"firstFailingLayer", layer}, {"check", v.check}, {"summary", v.summary}});
  }
  json suppressed = json::array();
  for (const auto& s : report.suppressed) {
    suppressed.push_back({{"finding", finding_json(s.finding)}, {"reason", s.reason}, {"until", s.until}});
  }
  summary["suppressed"] = report.suppressed.size();
  summary["nodesFailing"] = failing;
  summary["checksPassed"] = passed;
  summary["checksFailed"] = failed;
  summary["checksSkipped"] = skipped;
  return schema_document("DiagnoseReport", {{"checks", std::move(checks_run)},
                                            {"findings", std::move(findings)},
                                            {"nodes", std::move(nodes)},
                                            {"suppressed", std::move(suppressed)},
                                            {"summary", std::move(summary)}});
}

json checks_to_json(const std::vector<const Check*>& listed) {
  json items = json::array();
  for (const Check* c : listed) items.push_back(check_json(*c));
  return schema_document("DiagnoseCheckList", {{"items", std::move(items)}});
}

}  // namespace gpuctl::ops::diagnose
