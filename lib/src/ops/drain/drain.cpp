// The I/O half of drain: what the per-node drain and rolling maintenance share (the pods of a
// node, the DaemonSets gone missing, cancellation), several nodes at once, and the plan behind
// --dry-run. One node's drain is drain_node.cpp and drain_evict.cpp; rolling maintenance is
// drain_rolling.cpp.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "drain_internal.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/parallel.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

std::string_view to_string(DrainOutcome outcome) {
  switch (outcome) {
    case DrainOutcome::drained: return "drained";
    case DrainOutcome::failed: return "failed";
    case DrainOutcome::timed_out: return "timed_out";
    case DrainOutcome::interrupted: return "interrupted";
  }
  return "failed";
}

bool EvictionSlots::try_acquire() {
  std::lock_guard guard(mutex_);
  if (free_ <= 0) return false;
  --free_;
  return true;
}

void EvictionSlots::release() {
  std::lock_guard guard(mutex_);
  ++free_;
}

Result<bool> eviction_supported(kube::Client& client) {
  GPUCTL_TRY_ASSIGN(json doc, client.get(kube::paths::core_v1_discovery()));
  for (const auto& r : kube::array_field(doc, "resources")) {
    if (kube::string_field(r, "name") == "pods/eviction" && kube::string_field(r, "kind") == "Eviction") return true;
  }
  return false;
}

namespace drain_detail {

bool stop_requested(const DrainOptions& o) { return (o.cancel && o.cancel->load()) || util::cancelled(); }

std::string interrupted_by() {
  std::string by = util::cancel_signal_name();
  return by.empty() ? "interrupted" : "interrupted by " + by;
}

std::string seconds_text(std::chrono::milliseconds d) {
  return util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(d));
}

std::string key_of(const json& pod) { return kube::namespace_of(pod) + "/" + kube::name_of(pod); }
std::string uid_of(const json& pod) { return kube::string_field(kube::field(pod, "metadata"), "uid"); }

std::string grouped(const std::vector<std::pair<std::string, std::string>>& message_and_pod) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& [m, p] : message_and_pod) {
    if (!by.count(m)) order.push_back(m);
    by[m].push_back(p);
  }
  std::vector<std::string> parts;
  for (const auto& m : order) parts.push_back(fmt::format("{}: {}", m, fmt::join(by[m], ", ")));
  return fmt::format("{}", fmt::join(parts, "; "));
}

Result<std::vector<std::pair<std::string, std::string>>> missing_daemonsets(kube::Client& client,
                                                                            const std::vector<json>& pods) {
  std::vector<std::pair<std::string, std::string>> missing;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& pod : pods) {
    json c = controller_of(pod);
    if (kube::string_field(c, "kind") != "DaemonSet" || kube::pod_is_terminal(pod)) continue;
    auto key = std::make_pair(kube::namespace_of(pod), kube::string_field(c, "name"));
    if (!seen.insert(key).second) continue;
    auto ds = client.get(kube::paths::daemon_set(key.first, key.second));
    if (!ds && ds.error().is_not_found()) {
      missing.push_back(key);
    } else if (!ds) {
      return fail(ds.error().with_context("reading DaemonSet " + key.first + "/" + key.second));
    }
  }
  return missing;
}

Result<std::vector<json>> pods_on(kube::Client& client, const std::string& node, const std::string& selector,
                                  std::string* resource_version) {
  kube::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node;
  lo.label_selector = selector;
  GPUCTL_TRY_ASSIGN(kube::ListResult list, client.list(kube::paths::pods(), lo));
  if (resource_version) *resource_version = list.resource_version;
  return list.items;
}

}  // namespace drain_detail

namespace {

// The result of a node gpuctl did not get to.
NodeDrainResult not_started(const json& node) {
  NodeDrainResult r;
  r.node = kube::name_of(node);
  r.outcome = DrainOutcome::interrupted;
  r.cordon = "-";
  r.message = "not started: " + drain_detail::interrupted_by() + " (re-run to drain it)";
  return r;
}

}  // namespace

NodeDrainResult drain_node(kube::Client& client, const json& node, const DrainOptions& options) {
  return drain_detail::NodeDrainer(client, node, options).run();
}

std::vector<NodeDrainResult> drain_nodes(kube::Client& client, const std::vector<json>& nodes,
                                         const DrainOptions& options, int max_concurrent) {
  std::vector<NodeDrainResult> results(nodes.size());
  std::size_t started = util::parallel_for(
      nodes.size(), max_concurrent, [&](std::size_t i) { results[i] = drain_node(client, nodes[i], options); },
      [&] { return !drain_detail::stop_requested(options); });
  for (std::size_t i = started; i < nodes.size(); ++i) results[i] = not_started(nodes[i]);
  return results;
}

// ---- Plans --------------------------------------------------------------------------------------

Result<DrainPlan> plan_drain(kube::Client& client, const std::vector<json>& nodes, const DrainPolicy& policy,
                             const std::string& pod_selector) {
  PlanInputs in;
  in.nodes = nodes;
  GPUCTL_TRY_ASSIGN(kube::ListResult pdbs, client.list(kube::paths::pod_disruption_budgets()));
  in.pdbs = std::move(pdbs.items);
  bool any_gpu = false;
  for (const auto& n : nodes) {
    GPUCTL_TRY_ASSIGN(std::vector<json> pods, drain_detail::pods_on(client, kube::name_of(n), pod_selector));
    GPUCTL_TRY_ASSIGN(auto missing, drain_detail::missing_daemonsets(client, pods));
    in.missing_daemonsets.insert(in.missing_daemonsets.end(), missing.begin(), missing.end());
    // A pod's GPUs are extended resources or DRA devices through its claims.
    any_gpu =
        any_gpu ||
        std::any_of(pods.begin(), pods.end(),
                    [](const json& p) {
                      return requests_gpus(p) || !kube::array_field(kube::field(p, "spec"), "resourceClaims").empty();
                    }) ||
        is_gpu_node(n);
    in.pods.push_back(std::move(pods));
  }
  if (any_gpu) {
    NodeInventoryOptions io;
    io.include_non_gpu_nodes = true;
    // Room for pods holding DRA devices: the same objects the inventory counted from.
    DraInventory dra;
    GPUCTL_TRY_ASSIGN(in.inventory, collect_node_inventory(client, io, &dra));
    if (dra.served) in.dra = std::move(dra);
  }
  return build_drain_plan(in, policy, std::chrono::system_clock::now());
}

}  // namespace gpuctl::ops
