// `gpuctl diagnose -o prometheus`: the text exposition format for node_exporter's textfile
// collector (report_formats.hpp).
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpuctl/ops/diagnose/report_formats.hpp"

namespace gpuctl::ops::diagnose {
namespace {

// A label value as the format quotes it: backslash, double quote and newline escaped.
std::string label_value(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `name{k1="v1",k2="v2"} value` from label pairs.
std::string sample(std::string_view name, std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
                   std::string_view value) {
  std::string out(name);
  const char* separator = "{";
  for (const auto& [key, text] : labels) {
    out += fmt::format("{}{}=\"{}\"", separator, key, label_value(text));
    separator = ",";
  }
  if (labels.size() > 0) out += "}";
  return fmt::format("{} {}\n", out, value);
}

// HELP and TYPE of one family (the help has no backslash or newline to escape).
std::string family(std::string_view name, std::string_view help) {
  return fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
}

std::string seconds(std::chrono::microseconds d) { return fmt::format("{:.6f}", static_cast<double>(d.count()) / 1e6); }

// Every layer, in order. Layer::workload is the last enumerator.
std::vector<Layer> all_layers() {
  std::vector<Layer> out;
  for (int i = 0; i <= static_cast<int>(Layer::workload); ++i) out.push_back(static_cast<Layer>(i));
  return out;
}

std::string findings_families(const Report& report) {
  std::map<std::tuple<std::string, Severity, std::string>, int> groups;
  for (const auto& f : report.findings) ++groups[{f.check, f.severity, f.node}];
  std::string out = family("gpuctl_diagnose_findings",
                           "Findings of gpuctl diagnose left after --suppress, by check, severity and node "
                           "(node is empty for a finding on no node).");
  for (const auto& [key, count] : groups) {
    const auto& [check, severity, node] = key;
    out += sample("gpuctl_diagnose_findings", {{"check", check}, {"severity", to_string(severity)}, {"node", node}},
                  std::to_string(count));
  }
  std::map<std::string, int> suppressed;
  for (const auto& run : report.checks) suppressed[run.id] = 0;
  for (const auto& s : report.suppressed) ++suppressed[s.finding.check];
  out += family("gpuctl_diagnose_suppressed_findings", "Findings set apart by --suppress rules, by check.");
  for (const auto& [check, count] : suppressed) {
    out += sample("gpuctl_diagnose_suppressed_findings", {{"check", check}}, std::to_string(count));
  }
  return out;
}

std::string check_families(const Report& report) {
  std::string out = family("gpuctl_diagnose_check_status",
                           "1 for the status each selected check ended with (pass, fail, skipped), 0 for the others.");
  for (const auto& run : report.checks) {
    for (CheckStatus status : {CheckStatus::pass, CheckStatus::fail, CheckStatus::skipped}) {
      out += sample("gpuctl_diagnose_check_status", {{"check", run.id}, {"status", to_string(status)}},
                    run.status == status ? "1" : "0");
    }
  }
  out += family("gpuctl_diagnose_check_duration_seconds", "How long each check took over the gathered lists.");
  for (const auto& run : report.checks) {
    out += sample("gpuctl_diagnose_check_duration_seconds", {{"check", run.id}}, seconds(run.duration));
  }
  return out;
}

std::string node_families(const Report& report) {
  std::string out = family("gpuctl_diagnose_node_layer_ok",
                           "1 while this layer of the GPU node and every layer below it pass, 0 from the node's first "
                           "failing layer on (a finding of severity error or worse).");
  for (const auto& v : report.verdicts) {
    for (Layer layer : all_layers()) {
      bool ok = !v.layer || layer < *v.layer;
      out += sample("gpuctl_diagnose_node_layer_ok", {{"node", v.node}, {"layer", layer_label(layer)}}, ok ? "1" : "0");
    }
  }
  out += family("gpuctl_diagnose_node_failing_layer",
                "1 for each failing GPU node, labelled with its first failing layer and the check that found it.");
  for (const auto& v : report.verdicts) {
    if (!v.layer) continue;
    out += sample("gpuctl_diagnose_node_failing_layer",
                  {{"node", v.node}, {"layer", layer_label(*v.layer)}, {"check", v.check}}, "1");
  }
  return out;
}

}  // namespace

std::string_view layer_label(Layer layer) {
  switch (layer) {
    case Layer::reachable: return "reachable";
    case Layer::driver: return "driver";
    case Layer::gpus_present: return "gpus_present";
    case Layer::gpu_errors: return "gpu_errors";
    case Layer::node: return "node";
    case Layer::network: return "network";
    case Layer::device_plugin: return "device_plugin";
    case Layer::gpus_registered: return "gpus_registered";
    case Layer::gpus_healthy: return "gpus_healthy";
    case Layer::gpu_pods: return "gpu_pods";
    case Layer::workload: return "workload";
  }
  return "unknown";
}

std::string to_prometheus(const Report& report, std::chrono::system_clock::time_point run_at) {
  std::string out = findings_families(report) + check_families(report) + node_families(report);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(run_at.time_since_epoch()).count();
  std::string unix_seconds = fmt::format("{:.3f}", static_cast<double>(ms) / 1e3);
  out += family("gpuctl_diagnose_last_run_timestamp_seconds", "When gpuctl diagnose read the cluster, in Unix time.");
  out += sample("gpuctl_diagnose_last_run_timestamp_seconds", {}, unix_seconds);
  return out;
}

}  // namespace gpuctl::ops::diagnose
