// The check table, the selection of checks and the pure run over one snapshot (diagnose.hpp).
#include "gpuctl/ops/diagnose/diagnose.hpp"

#include <algorithm>

#include <fmt/format.h>

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

const std::vector<Check>& checks() {
  static const std::vector<Check> table = {
      {"node-not-ready",
       "GPU nodes NotReady or Unknown, and the GPU pods stranded there",
       Layer::node,
       {Source::nodes, Source::pods},
       Severity::critical,
       check_node_not_ready},
      {"node-network-unavailable",
       "GPU nodes whose network is not set up (NetworkUnavailable)",
       Layer::network,
       {Source::nodes},
       Severity::error,
       check_node_network_unavailable},
      {"node-pressure",
       "GPU nodes under memory, disk or PID pressure",
       Layer::node,
       {Source::nodes},
       Severity::warning,
       check_node_pressure},
      {"device-plugin-missing",
       "GPU-labelled nodes that advertise no nvidia.com/* resource",
       Layer::gpus_registered,
       {Source::nodes},
       Severity::critical,
       check_device_plugin_missing},
      {"gpu-unhealthy-devices",
       "GPUs the device plugin reports unhealthy (allocatable below capacity)",
       Layer::gpus_healthy,
       {Source::nodes},
       Severity::error,
       check_gpu_unhealthy_devices},
      {"gpu-allocation-failed",
       "GPU pods the kubelet refused at admission (the node cannot give out GPUs)",
       Layer::gpu_pods,
       {Source::pods, Source::events},
       Severity::error,
       check_gpu_allocation_failed},
      {"gpu-pods-pending",
       "GPU pods that cannot be scheduled, with the cause in numbers; GPU Jobs refused by quota",
       Layer::workload,
       {Source::nodes, Source::pods, Source::events},
       Severity::error,
       check_gpu_pods_pending,
       {Source::pvcs}},
      {"oom-killed",
       "GPU pods' containers killed for exceeding their memory limit",
       Layer::workload,
       {Source::pods},
       Severity::warning,
       check_oom_killed},
      {"restart-storm",
       "GPU pods' containers restarting over and over (--restart-threshold)",
       Layer::workload,
       {Source::pods},
       Severity::warning,
       check_restart_storm},
      {"pvc-unbound",
       "Claims that do not bind (and why), and ReadWriteOnce claims of parallel GPU Jobs",
       Layer::workload,
       {Source::pvcs, Source::pvs, Source::storage_classes, Source::pods, Source::jobs},
       Severity::error,
       check_pvc_unbound,
       {Source::events}},
      {"volume-mount-failed",
       "GPU pods stuck in ContainerCreating on a failed mount (NFS server, export, client, permissions)",
       Layer::workload,
       {Source::events, Source::pods},
       Severity::error,
       check_volume_mount_failed},
      {"device-plugin-unhealthy",
       "The device plugin DaemonSet: a pod on every GPU node, Ready, not restarting, one version",
       Layer::device_plugin,
       {Source::nodes, Source::daemon_sets, Source::plugin_pods},
       Severity::critical,
       check_device_plugin_unhealthy},
      {"device-plugin-log-errors",
       "Known failures in the device plugin pods' recent logs (registration, NVML, strategy)",
       Layer::device_plugin,
       {Source::plugin_logs},
       Severity::error,
       check_device_plugin_log_errors},
      {"gpu-job-failed",
       "Failed GPU Jobs and their GPU cause (termination message, last log lines)",
       Layer::workload,
       {Source::jobs, Source::pods},
       Severity::error,
       check_gpu_job_failed,
       {Source::job_logs}},
      {"jobs-not-cleaned",
       "Finished GPU Jobs older than a day without ttlSecondsAfterFinished",
       Layer::workload,
       {Source::jobs},
       Severity::info,
       check_jobs_not_cleaned},
      {"gpu-node-untainted",
       "GPU nodes without their pool's NoSchedule taint; non-GPU pods on GPU nodes",
       Layer::workload,
       {Source::nodes, Source::pods},
       Severity::warning,
       check_gpu_node_untainted},
      {"gpu-taint-untolerated",
       "GPU pool taints no GPU workload tolerates (the pool idles)",
       Layer::workload,
       {Source::nodes, Source::pods, Source::jobs},
       Severity::warning,
       check_gpu_taint_untolerated},
      {"quota-not-enforced",
       "GPU quota keys Kubernetes never enforces (nvidia.com/gpu instead of requests.nvidia.com/gpu)",
       Layer::workload,
       {Source::quotas},
       Severity::warning,
       check_quota_not_enforced},
      {"quota-exhausted",
       "Namespaces at their GPU quota with work held back",
       Layer::workload,
       {Source::quotas, Source::pods, Source::events},
       Severity::warning,
       check_quota_exhausted,
       {Source::limit_ranges, Source::jobs}},
      {"kubelet-version-skew",
       "GPU nodes' kubelets outside the API server's version skew; mixed versions in a pool",
       Layer::node,
       {Source::nodes, Source::server_version},
       Severity::error,
       check_kubelet_version_skew},
      {"driver-too-old-for-cuda",
       "GPU pods whose CUDA needs a newer driver than their node has (GPU Feature Discovery's labels)",
       Layer::workload,
       {Source::nodes, Source::pods},
       Severity::error,
       check_driver_too_old_for_cuda},
      {"monitoring-missing",
       "No metrics API (kubectl top fails), no DCGM exporter",
       Layer::workload,
       {Source::api_groups, Source::daemon_sets, Source::nodes},
       Severity::info,
       check_monitoring_missing},
  };
  return table;
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

// Why `check` cannot run on `snapshot`: its first unreadable list; "" when all were read.
std::string missing_list(const Check& check, const Snapshot& snapshot) {
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
    } else {
      auto started = std::chrono::steady_clock::now();
      std::vector<Finding> found = check->run(snapshot);
      run.duration = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
      if (!found.empty()) run.status = CheckStatus::fail;
      for (auto& f : found) report.findings.push_back(std::move(f));
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
