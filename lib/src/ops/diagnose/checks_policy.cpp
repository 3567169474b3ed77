// The cluster's GPU policy checks: taints that keep GPU pools to GPU work (gpu-node-untainted,
// gpu-taint-untolerated), quotas (quota-not-enforced, quota-exhausted, from `gpuctl quota`'s own
// view), kubelet versions (kubelet-version-skew) and monitoring (monitoring-missing).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "check_support.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/quota/quota.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

// The kubelet may be up to this many minor versions older than the API server, never newer
// (the version skew policy since Kubernetes 1.28).
constexpr int kKubeletMaxMinorsBehind = 3;

// Taints an admin sets to keep a pool apart (not the node controller's node.kubernetes.io/*).
std::vector<kube::Taint> pool_taints(const json& node) {
  std::vector<kube::Taint> out;
  for (auto& t : kube::node_taints(node)) {
    if (t.effect == "NoSchedule" && !t.key.starts_with("node.kubernetes.io/") &&
        !t.key.starts_with("node-role.kubernetes.io/"))
      out.push_back(std::move(t));
  }
  return out;
}

std::string pool_of(const json& node) {
  std::string product = gpu_product_of(node).first;
  return product.empty() ? "GPU" : product;
}

bool from_daemon_set_or_node(const json& pod) {
  for (const auto& owner : kube::array_field(field(pod, "metadata"), "ownerReferences")) {
    std::string kind = string_field(owner, "kind");
    if (kind == "DaemonSet" || kind == "Node") return true;
  }
  return false;
}

// A taint that marks a whole pool (the rest of it keeps non-GPU work off), not one node's state
// (maintenance, a health taint): on at least two nodes and on most of the pool.
struct PoolTaint {
  std::string pool;
  kube::Taint taint;
  std::vector<std::string> tainted;    // nodes with it
  std::vector<std::string> untainted;  // GPU nodes of the pool without it
};

std::vector<PoolTaint> pool_wide_taints(const Snapshot& snapshot) {
  std::map<std::string, std::vector<const json*>> pools;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (is_gpu_node(node)) pools[pool_of(node)].push_back(&node);
  }
  std::vector<PoolTaint> out;
  for (const auto& [pool, nodes] : pools) {
    std::map<std::string, PoolTaint> by_taint;
    for (const json* n : nodes) {
      for (const auto& t : pool_taints(*n)) {
        PoolTaint& p = by_taint[kube::to_string(t)];
        p.pool = pool;
        p.taint = t;
        p.tainted.push_back(kube::name_of(*n));
      }
    }
    for (auto& [text, p] : by_taint) {
      if (p.tainted.size() < 2 || p.tainted.size() * 2 <= nodes.size()) continue;
      for (const json* n : nodes) {
        std::string name = kube::name_of(*n);
        if (std::find(p.tainted.begin(), p.tainted.end(), name) == p.tainted.end()) p.untainted.push_back(name);
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

void untainted_in_tainted_pools(const Snapshot& snapshot, std::vector<Finding>& out) {
  for (const auto& p : pool_wide_taints(snapshot)) {
    std::string taint = kube::to_string(p.taint);
    std::size_t pool_size = p.tainted.size() + p.untainted.size();
    for (const auto& name : p.untainted) {
      Finding f = node_finding("gpu-node-untainted", Severity::warning, name,
                               fmt::format("{} has no NoSchedule taint while {} of the {} {} nodes have {}: any pod "
                                           "may take its CPU and memory and starve GPU jobs",
                                           name, p.tainted.size(), pool_size, p.pool, taint));
      f.remedy = {fmt::format("gpuctl taint {} {}", name, taint)};
      out.push_back(std::move(f));
    }
  }
}

void non_gpu_pods_on_gpu_nodes(const Snapshot& snapshot, std::vector<Finding>& out) {
  std::set<std::string> gpu_nodes;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (is_gpu_node(node)) gpu_nodes.insert(kube::name_of(node));
  }
  std::map<std::string, std::map<std::string, int>> by_node;
  for (const auto& pod : snapshot.list(Source::pods)) {
    std::string node = string_field(field(pod, "spec"), "nodeName");
    if (!gpu_nodes.count(node) || kube::pod_is_terminal(pod) || is_gpu_pod(pod) || from_daemon_set_or_node(pod))
      continue;
    ++by_node[node][kube::namespace_of(pod)];
  }
  for (const auto& [node, namespaces] : by_node) {
    int total = 0;
    std::vector<std::string> parts;
    for (const auto& [ns, n] : namespaces) total += n, parts.push_back(fmt::format("{}: {}", ns, n));
    Finding f =
        node_finding("gpu-node-untainted", Severity::warning, node,
                     fmt::format("{} runs {} pod(s) that use no GPU ({})", node, total, fmt::join(parts, ", ")));
    f.remedy = {fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={}", node),
                fmt::format("gpuctl taint {} nvidia.com/gpu=present:NoSchedule", node)};
    out.push_back(std::move(f));
  }
}

QuotaViewInput quota_input(const Snapshot& snapshot) {
  QuotaViewInput input;
  input.quotas = snapshot.list(Source::quotas);
  input.limit_ranges = snapshot.list(Source::limit_ranges);
  for (const auto& pod : snapshot.list(Source::pods)) input.pod_requests.add(pod);
  input.events = snapshot.list(Source::events);
  input.jobs = snapshot.list(Source::jobs);
  input.jobs_listed = snapshot.lists.count(Source::jobs) > 0;
  return input;
}

// "v1.36.3" -> {1, 36}; nullopt when it does not read.
std::optional<std::pair<int, int>> major_minor(std::string_view version) {
  if (version.starts_with('v')) version.remove_prefix(1);
  int major = 0, minor = 0;
  if (std::sscanf(std::string(version).c_str(), "%d.%d", &major, &minor) != 2) return std::nullopt;
  return std::pair{major, minor};
}

}  // namespace

std::vector<Finding> check_gpu_node_untainted(const Snapshot& snapshot) {
  std::vector<Finding> out;
  untainted_in_tainted_pools(snapshot, out);
  non_gpu_pods_on_gpu_nodes(snapshot, out);
  return out;
}

std::vector<Finding> check_gpu_taint_untolerated(const Snapshot& snapshot) {
  std::map<std::string, std::pair<kube::Taint, std::vector<std::string>>> taints;
  for (const auto& p : pool_wide_taints(snapshot)) {
    auto& slot = taints[kube::to_string(p.taint)];
    slot.first = p.taint;
    slot.second.insert(slot.second.end(), p.tainted.begin(), p.tainted.end());
  }
  std::vector<Finding> out;
  for (const auto& [text, slot] : taints) {
    auto tolerated = [&](const json& spec) { return kube::tolerates(kube::tolerations_of(spec), slot.first); };
    bool anyone = false;
    for (const auto& pod : snapshot.list(Source::pods)) {
      anyone = anyone || (!from_daemon_set_or_node(pod) && is_gpu_pod(pod) && tolerated(field(pod, "spec")));
    }
    for (const auto& job : snapshot.list(Source::jobs)) {
      anyone = anyone || tolerated(field_at(job, {"spec", "template", "spec"}));
    }
    if (anyone) continue;
    Finding f;
    f.check = "gpu-taint-untolerated";
    f.severity = Severity::warning;
    f.object = {"Node", "", slot.second.front()};
    f.summary = fmt::format("no GPU workload tolerates {}, the taint of {} GPU node(s) ({}): their GPUs idle", text,
                            slot.second.size(), first_few(slot.second));
    f.remedy = {fmt::format("add to the GPU pods: tolerations: [{{key: {}, operator: Exists, effect: {}}}]",
                            slot.first.key, slot.first.effect),
                "gpuctl submit adds the GPU pools' tolerations itself"};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_quota_not_enforced(const Snapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& q : snapshot.list(Source::quotas)) {
    for (const auto& finding : check_quota_keys(q)) {
      Finding f;
      f.check = "quota-not-enforced";
      f.severity = Severity::warning;
      f.object = {"ResourceQuota", finding.namespace_name, finding.quota};
      f.summary = finding.message;
      f.evidence.push_back({fmt::format("resourcequota {}/{} spec.hard", finding.namespace_name, finding.quota),
                            fmt::format("{}: {}", finding.key, finding.value), ""});
      f.remedy = {fmt::format("gpuctl quota fix {}", finding.namespace_name)};
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> check_quota_exhausted(const Snapshot& snapshot) {
  std::vector<Finding> out;
  auto view = build_quota_view(quota_input(snapshot));
  for (const auto& ns : view.items) {
    if (ns.held_back.empty()) continue;
    for (const auto& q : ns.quotas) {
      for (const auto& r : q.resources) {
        if (!r.enforced || !r.used || *r.used < r.hard) continue;
        std::vector<std::string> held;
        for (const auto& h : ns.held_back) held.push_back(fmt::format("{} {}", h.kind, h.name));
        Finding f;
        f.check = "quota-exhausted";
        f.severity = Severity::warning;
        f.object = {"ResourceQuota", ns.namespace_name, q.name};
        f.summary = fmt::format("{} is at its GPU limit ({} {} of {} used) and holds back {} workload(s): {}",
                                ns.namespace_name, *r.used, r.resource, r.hard, held.size(), first_few(held));
        for (const auto& h : ns.held_back) {
          if (f.evidence.size() < 3) {
            f.evidence.push_back({fmt::format("event on {} {}/{} (x{})", h.kind, ns.namespace_name, h.name, h.count),
                                  h.reason, h.last_seen});
          }
        }
        f.remedy = {fmt::format("gpuctl quota -n {}", ns.namespace_name),
                    fmt::format("gpuctl jobs -n {}", ns.namespace_name)};
        out.push_back(std::move(f));
      }
    }
  }
  return out;
}

std::vector<Finding> check_kubelet_version_skew(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const auto& version = snapshot.list(Source::server_version);
  std::string server = version.empty() ? "" : string_field(version.front(), "gitVersion");
  auto server_mm = major_minor(server);
  std::map<std::string, std::map<std::string, std::vector<std::string>>> pools;  // pool -> version -> nodes
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (!is_gpu_node(node)) continue;
    std::string name = kube::name_of(node);
    std::string kubelet = string_field(field_at(node, {"status", "nodeInfo"}), "kubeletVersion");
    pools[pool_of(node)][kubelet].push_back(name);
    auto mm = major_minor(kubelet);
    if (!mm || !server_mm) continue;
    int behind = (server_mm->first - mm->first) * 100 + server_mm->second - mm->second;
    if (behind >= 0 && behind <= kKubeletMaxMinorsBehind) continue;
    Finding f = node_finding(
        "kubelet-version-skew", Severity::error, name,
        behind < 0
            ? fmt::format("{}'s kubelet {} is newer than the API server {}: not supported", name, kubelet, server)
            : fmt::format("{}'s kubelet {} is {} minor versions behind the API server {} (at most {} are "
                          "supported)",
                          name, kubelet, behind, server, kKubeletMaxMinorsBehind));
    f.evidence.push_back({fmt::format("node {} status.nodeInfo.kubeletVersion", name), kubelet, ""});
    f.evidence.push_back({"GET /version gitVersion", server, ""});
    f.remedy = {fmt::format("gpuctl drain {} --ignore-daemonsets, then upgrade its kubelet", name)};
    out.push_back(std::move(f));
  }
  for (const auto& [pool, versions] : pools) {
    if (versions.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [v, nodes] : versions)
      parts.push_back(fmt::format("{} on {} ({})", v, nodes.size(), first_few(nodes, 2)));
    Finding f;
    f.check = "kubelet-version-skew";
    f.severity = Severity::warning;
    f.object = {"Node", "", versions.begin()->second.front()};
    f.summary = fmt::format("the {} pool runs {} kubelet versions: {}", pool, versions.size(), fmt::join(parts, "; "));
    f.remedy = {"gpuctl nodes -o wide"};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_monitoring_missing(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const auto& apis = snapshot.list(Source::api_groups);
  bool metrics = false;
  if (!apis.empty()) {
    for (const auto& g : kube::array_field(apis.front(), "groups"))
      metrics = metrics || string_field(g, "name") == "metrics.k8s.io";
  }
  auto info = [](std::string name, std::string summary, std::vector<std::string> remedy) {
    Finding f;
    f.check = "monitoring-missing";
    f.severity = Severity::info;
    f.object = {"APIService", "", std::move(name)};
    f.summary = std::move(summary);
    f.remedy = std::move(remedy);
    return f;
  };
  if (!metrics) {
    out.push_back(info("v1beta1.metrics.k8s.io", "no metrics API (metrics.k8s.io): kubectl top and autoscaling fail",
                       {"install metrics-server: kubectl apply -f https://github.com/kubernetes-sigs/metrics-server/"
                        "releases/latest/download/components.yaml"}));
  }
  bool dcgm = false;
  for (const auto& ds : snapshot.list(Source::daemon_sets)) {
    dcgm = dcgm || kube::name_of(ds).find("dcgm-exporter") != std::string::npos ||
           kube::label_of(ds, "app") == "nvidia-dcgm-exporter" ||
           kube::label_of(ds, "app.kubernetes.io/name") == "dcgm-exporter";
  }
  // Its metrics read from Prometheus (--via prometheus): an exporter runs, as a DaemonSet or not.
  for (const auto& [name, probe] : snapshot.probes) dcgm = dcgm || (probe.via == "prometheus" && probe.report);
  bool gpu_nodes = std::any_of(snapshot.list(Source::nodes).begin(), snapshot.list(Source::nodes).end(),
                               [](const json& n) { return is_gpu_node(n); });
  if (!dcgm && gpu_nodes) {
    Finding f = info("dcgm-exporter",
                     "no DCGM exporter DaemonSet: GPU utilisation, memory, temperature and XID "
                     "errors are not collected",
                     {"helm install dcgm-exporter gpu-helm-charts/dcgm-exporter (or enable it in the GPU Operator)"});
    f.object.kind = "DaemonSet";
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
