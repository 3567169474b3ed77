// The check table, the selection of checks and the pure run over one snapshot (diagnose.hpp).
#include "gpuctl/ops/diagnose/diagnose.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "check_support.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"

namespace gpuctl::ops::diagnose {

std::string_view to_string(Severity severity) {
  switch (severity) {
    case Severity::info: return "info";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
    case Severity::critical: return "critical";
  }
  return "unknown";
}

std::optional<Severity> parse_severity(std::string_view text) {
  for (Severity s : {Severity::info, Severity::warning, Severity::error, Severity::critical}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

std::string_view to_string(Layer layer) {
  switch (layer) {
    case Layer::reachable: return "reachable";
    case Layer::driver: return "driver";
    case Layer::gpus_present: return "GPUs present";
    case Layer::gpu_errors: return "GPU errors";
    case Layer::node: return "node";
    case Layer::network: return "network";
    case Layer::device_plugin: return "device plugin";
    case Layer::gpus_registered: return "GPUs registered";
    case Layer::gpus_healthy: return "GPUs healthy";
    case Layer::gpu_pods: return "GPU pods";
    case Layer::workload: return "workload";
  }
  return "unknown";
}

std::string_view to_string(Source source) {
  switch (source) {
    case Source::nodes: return "nodes";
    case Source::pods: return "pods";
    case Source::events: return "events";
    case Source::pvcs: return "persistentvolumeclaims";
    case Source::pvs: return "persistentvolumes";
    case Source::storage_classes: return "storageclasses";
    case Source::quotas: return "resourcequotas";
    case Source::limit_ranges: return "limitranges";
    case Source::jobs: return "jobs";
    case Source::daemon_sets: return "daemonsets";
    case Source::plugin_pods: return "device plugin pods";
    case Source::plugin_logs: return "device plugin logs";
    case Source::job_logs: return "failed GPU pods' logs";
    case Source::server_version: return "the server's version";
    case Source::api_groups: return "API discovery";
    case Source::node_probes: return "the GPU nodes over ssh";
    case Source::dra: return "DRA objects (resource.k8s.io)";
  }
  return "unknown";
}

std::string_view to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::pass: return "pass";
    case CheckStatus::fail: return "fail";
    case CheckStatus::skipped: return "skipped";
  }
  return "unknown";
}

const std::vector<nlohmann::json>& Snapshot::list(Source source) const {
  static const std::vector<nlohmann::json> empty;
  auto it = lists.find(source);
  return it == lists.end() ? empty : it->second;
}

const Check* find_check(std::string_view id) {
  for (const auto& c : checks()) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

Result<std::vector<const Check*>> select_checks(const Selection& selection) {
  for (const auto* ids : {&selection.only, &selection.skip}) {
    for (const auto& id : *ids) {
      if (find_check(id) == nullptr) {
        return fail(Errc::invalid_argument,
                    fmt::format("no check named {} (list them with: gpuctl diagnose --list-checks)", id));
      }
    }
  }
  auto named = [](const std::vector<std::string>& ids, std::string_view id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  std::vector<const Check*> out;
  for (const auto& c : checks()) {
    if (!selection.only.empty() && !named(selection.only, c.id)) continue;
    if (named(selection.skip, c.id)) continue;
    out.push_back(&c);
  }
  return out;
}

namespace {

bool needs_probes(const Check& check) {
  return std::find(check.needs.begin(), check.needs.end(), Source::node_probes) != check.needs.end();
}

// A node-side check the node data cannot answer: the DCGM exporter's metrics say nothing of a
// driver that does not load, nvidia-smi's warnings or the NVLink state, so such a check is
// skipped with that reason instead of passing on nothing.
bool unanswerable_from_source(const Check& check, const Snapshot& snapshot) {
  return snapshot.probes_via == "prometheus" && needs_probes(check) && !check.from_metrics;
}

// Why `check` cannot run on `snapshot`: what the caller chose not to read, what the node source
// cannot answer, its first unreadable list; "" when all were read.
std::string missing_list(const Check& check, const Snapshot& snapshot) {
  for (Source s : check.needs) {
    if (auto it = snapshot.not_wanted.find(s); it != snapshot.not_wanted.end()) return it->second;
  }
  if (unanswerable_from_source(check, snapshot)) {
    return "the DCGM exporter's metrics cannot answer it (--via prometheus): it needs nvidia-smi on the node "
           "(--via ssh or --via pod)";
  }
  for (Source s : check.needs) {
    auto it = snapshot.unavailable.find(s);
    if (it != snapshot.unavailable.end()) return fmt::format("could not list {}: {}", to_string(s), it->second);
  }
  return "";
}

}  // namespace

Report run_checks(const Snapshot& snapshot, const std::vector<const Check*>& selected) {
  Report report;
  for (const Check* check : selected) {
    CheckRun run{std::string(check->id), CheckStatus::pass, missing_list(*check, snapshot)};
    if (!run.skipped_because.empty()) {
      run.status = CheckStatus::skipped;
      // The caller's choice (--no-ssh, --via prometheus), not a failure: not a reason for exit 5.
      run.by_request = unanswerable_from_source(*check, snapshot) ||
                       std::any_of(check->needs.begin(), check->needs.end(),
                                   [&](Source s) { return snapshot.not_wanted.count(s) > 0; });
    } else {
      auto started = std::chrono::steady_clock::now();
      std::vector<Finding> found = check->run(snapshot);
      run.duration = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
      if (!found.empty()) run.status = CheckStatus::fail;
      for (auto& f : found) {
        // A node this run read without ssh gets its node commands in a debug pod, not over ssh.
        const NodeProbe* probe = f.node.empty() ? nullptr : support::probe_of(snapshot, f.node);
        if (probe != nullptr && probe->via != "ssh") {
          for (auto& remedy : f.remedy) remedy = support::remedy_without_ssh(remedy, f.node);
        }
        report.findings.push_back(std::move(f));
      }
    }
    report.checks.push_back(std::move(run));
  }
  // What is worst first; within a severity, node by node, so one node's problems read together.
  std::stable_sort(report.findings.begin(), report.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.node != b.node) return a.node < b.node;
    return a.check < b.check;
  });
  report.verdicts = node_verdicts(snapshot, report.findings);
  return report;
}

std::vector<Finding> critical_node_findings(const nlohmann::json& node, const NodeProbe& probe,
                                            const Settings& settings) {
  Snapshot snapshot;
  snapshot.now = std::chrono::system_clock::now();
  snapshot.settings = settings;
  snapshot.lists[Source::nodes] = {node};
  snapshot.probes.emplace(kube::name_of(node), probe);
  std::vector<const Check*> own;
  for (const auto& c : checks()) {
    bool node_only = std::all_of(c.needs.begin(), c.needs.end(),
                                 [](Source s) { return s == Source::nodes || s == Source::node_probes; });
    bool probed = std::find(c.needs.begin(), c.needs.end(), Source::node_probes) != c.needs.end();
    if (node_only && probed) own.push_back(&c);
  }
  std::vector<Finding> out;
  for (auto& f : run_checks(snapshot, own).findings) {
    if (f.severity == Severity::critical) out.push_back(std::move(f));
  }
  return out;
}

std::vector<NodeVerdict> node_verdicts(const Snapshot& snapshot, const std::vector<Finding>& findings) {
  std::vector<NodeVerdict> out;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node)) continue;
    NodeVerdict verdict{kube::name_of(node), std::nullopt, "", ""};
    for (const auto& f : findings) {
      if (f.node != verdict.node || f.severity < Severity::error) continue;
      const Check* c = find_check(f.check);
      if (c == nullptr || (verdict.layer && *verdict.layer <= c->layer)) continue;
      verdict.layer = c->layer;
      verdict.check = f.check;
      verdict.summary = f.summary;
    }
    out.push_back(std::move(verdict));
  }
  std::sort(out.begin(), out.end(), [](const NodeVerdict& a, const NodeVerdict& b) { return a.node < b.node; });
  return out;
}

}  // namespace gpuctl::ops::diagnose
