// The pure half of drain: filters, PDB budgets and selectors, and the dry-run plan.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

std::string_view to_string(PodAction action) {
  switch (action) {
    case PodAction::evict: return "evict";
    case PodAction::skip: return "skip";
    case PodAction::refuse: return "refuse";
    case PodAction::blocked: return "blocked";
  }
  return "evict";
}

json controller_of(const json& pod) {
  for (const auto& ref : kube::array_field(kube::field(pod, "metadata"), "ownerReferences")) {
    if (kube::bool_field(ref, "controller")) return ref;
  }
  return nullptr;
}

bool requests_gpus(const json& pod) {
  for (const auto& [name, q] : kube::pod_requests(pod)) {
    if (is_nvidia_resource(name)) return true;
  }
  return false;
}

std::int64_t gpu_request(const json& pod) {
  auto requests = kube::pod_requests(pod);
  auto it = requests.find(std::string(kGpuResource));
  return it == requests.end() ? 0 : it->second.value();
}

namespace {

bool has_empty_dir(const json& pod) {
  auto spec = pod.find("spec");
  if (spec == pod.end()) return false;
  auto volumes = spec->find("volumes");
  if (volumes == spec->end() || !volumes->is_array()) return false;
  return std::any_of(volumes->begin(), volumes->end(), [](const json& v) { return v.contains("emptyDir"); });
}

bool is_daemonset_pod(const json& pod) {
  json c = controller_of(pod);
  return kube::string_field(c, "kind") == "DaemonSet";
}

}  // namespace

std::optional<PodVerdict> filter_long_deleted(const json& pod, const DrainPolicy& policy, const PodFacts& facts) {
  if (policy.skip_wait_for_delete_timeout_seconds <= 0) return std::nullopt;
  auto ts = kube::string_field(kube::field(pod, "metadata"), "deletionTimestamp");
  if (ts.empty()) return std::nullopt;
  auto since = util::parse_rfc3339(ts);
  if (!since) return std::nullopt;
  if (facts.now - *since > std::chrono::seconds(policy.skip_wait_for_delete_timeout_seconds)) {
    return PodVerdict{PodAction::skip, "deleting", "deleted long ago (--skip-wait-for-delete-timeout)"};
  }
  return std::nullopt;
}

std::optional<PodVerdict> filter_daemonset(const json& pod, const DrainPolicy& policy, const PodFacts& facts) {
  if (!is_daemonset_pod(pod) || kube::pod_is_terminal(pod)) return std::nullopt;
  if (!facts.daemonset_exists) {
    if (policy.force) return std::nullopt;  // orphaned: evicted, as kubectl does with --force
    return PodVerdict{PodAction::refuse, "orphaned-daemonset",
                      "its DaemonSet no longer exists (use --force to evict it)"};
  }
  if (policy.ignore_daemonsets) {
    return PodVerdict{PodAction::skip, "daemonset", "DaemonSet-managed, left in place (--ignore-daemonsets)"};
  }
  return PodVerdict{PodAction::refuse, "daemonset", "DaemonSet-managed (use --ignore-daemonsets to leave it in place)"};
}

std::optional<PodVerdict> filter_mirror(const json& pod, const DrainPolicy&, const PodFacts&) {
  if (kube::annotation_of(pod, "kubernetes.io/config.mirror")) {
    return PodVerdict{PodAction::skip, "mirror", "static (mirror) pod, managed by the kubelet"};
  }
  return std::nullopt;
}

std::optional<PodVerdict> filter_local_storage(const json& pod, const DrainPolicy& policy, const PodFacts&) {
  if (kube::pod_is_terminal(pod) || !has_empty_dir(pod) || policy.delete_emptydir_data) return std::nullopt;
  return PodVerdict{PodAction::refuse, "local-storage",
                    "has emptyDir data that eviction deletes (use --delete-emptydir-data to evict it)"};
}

std::optional<PodVerdict> filter_unmanaged(const json& pod, const DrainPolicy& policy, const PodFacts&) {
  if (kube::pod_is_terminal(pod) || policy.force || controller_of(pod).is_object()) return std::nullopt;
  return PodVerdict{PodAction::refuse, "unmanaged",
                    "declares no controller, so nothing would recreate it (use --force to evict it)"};
}

std::optional<PodVerdict> filter_non_gpu(const json& pod, const DrainPolicy& policy, const PodFacts&) {
  if (!policy.gpu_pods_only || requests_gpus(pod)) return std::nullopt;
  return PodVerdict{PodAction::skip, "not-gpu", "requests no nvidia.com/* resource (--gpu-pods-only)"};
}

const std::vector<PodFilter>& drain_filters() {
  static const std::vector<PodFilter> filters = {&filter_long_deleted,  &filter_daemonset, &filter_mirror,
                                                 &filter_local_storage, &filter_unmanaged, &filter_non_gpu};
  return filters;
}

PodVerdict classify_pod(const json& pod, const DrainPolicy& policy, const PodFacts& facts) {
  for (auto filter : drain_filters()) {
    if (auto verdict = filter(pod, policy, facts)) return *verdict;
  }
  if (kube::pod_is_terminal(pod)) return {PodAction::evict, "finished", "finished, deleted without a PDB check"};
  return {PodAction::evict, "", ""};
}

// ---- PDBs ---------------------------------------------------------------------------------------

PdbBudget pdb_budget(const json& pdb) {
  PdbBudget b;
  b.ns = kube::namespace_of(pdb);
  b.name = kube::name_of(pdb);
  const json& status = kube::field(pdb, "status");
  b.disruptions_allowed = kube::integer_field(status, "disruptionsAllowed").value_or(0);
  b.desired_healthy = kube::integer_field(status, "desiredHealthy").value_or(0);
  b.current_healthy = kube::integer_field(status, "currentHealthy").value_or(0);
  b.expected_pods = kube::integer_field(status, "expectedPods").value_or(0);
  b.observed = kube::integer_field(status, "observedGeneration").value_or(0) >=
               kube::integer_field(kube::field(pdb, "metadata"), "generation").value_or(0);
  return b;
}

std::string describe_budget(const PdbBudget& b) {
  if (!b.observed) return fmt::format("pdb {}/{} is still being processed by the disruption controller", b.ns, b.name);
  return fmt::format("pdb {}/{} allows {} disruption{}, needs {} healthy, has {}", b.ns, b.name, b.disruptions_allowed,
                     b.disruptions_allowed == 1 ? "" : "s", b.desired_healthy, b.current_healthy);
}

bool selector_matches(const json& selector, const json& labels) {
  if (!selector.is_object() || selector.empty()) return false;
  auto label = [&](const std::string& key) -> std::optional<std::string> {
    if (!labels.is_object()) return std::nullopt;
    auto it = labels.find(key);
    if (it == labels.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  bool any = false;
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && ml->is_object()) {
    for (const auto& [k, v] : ml->items()) {
      any = true;
      if (!v.is_string() || label(k) != v.get<std::string>()) return false;
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && me->is_array()) {
    for (const auto& e : *me) {
      any = true;
      auto value = label(kube::string_field(e, "key"));
      std::string op = kube::string_field(e, "operator");
      std::vector<std::string> values;
      for (const auto& v : kube::array_field(e, "values")) {
        if (v.is_string()) values.push_back(v.get<std::string>());
      }
      bool in = value && std::find(values.begin(), values.end(), *value) != values.end();
      if (op == "In" && !in) return false;
      if (op == "NotIn" && in) return false;
      if (op == "Exists" && !value) return false;
      if (op == "DoesNotExist" && value) return false;
    }
  }
  return any;
}

std::vector<const json*> pdbs_for_pod(const json& pod, const std::vector<json>& pdbs) {
  std::vector<const json*> out;
  const std::string ns = kube::namespace_of(pod);
  const json& labels = kube::field_at(pod, {"metadata", "labels"});
  for (const auto& pdb : pdbs) {
    if (kube::namespace_of(pdb) != ns) continue;
    if (selector_matches(kube::field_at(pdb, {"spec", "selector"}), labels)) out.push_back(&pdb);
  }
  return out;
}

// ---- The plan -----------------------------------------------------------------------------------

DrainPlan build_drain_plan(const PlanInputs& in, const DrainPolicy& policy, std::chrono::system_clock::time_point now) {
  DrainPlan plan;
  std::set<std::string> draining;
  for (const auto& n : in.nodes) draining.insert(kube::name_of(n));
  // Free GPUs per product on nodes that stay (schedulable, Ready, not drained).
  std::map<std::string, std::int64_t> free_by_product;
  std::map<std::string, std::string> product_of_node;
  if (in.inventory) {
    for (const auto& n : in.inventory->nodes) {
      product_of_node[n.name] = n.product;
      if (draining.count(n.name) || !n.schedulable || n.readiness != "Ready") continue;
      free_by_product[n.product] = kube::saturating_add(free_by_product[n.product], n.gpus.free());
    }
  }
  std::map<std::string, std::int64_t> taken;  // GPUs already promised to moved pods, per product
  DraRoom dra_room;
  if (in.dra && in.inventory) {
    dra_room.dra = &*in.dra;
    for (const auto& n : in.inventory->nodes) {
      if (!draining.count(n.name) && n.schedulable && n.readiness == "Ready") dra_room.staying_nodes.insert(n.name);
    }
    for (const auto& d : in.dra->devices) {
      if (!d.node.empty()) dra_room.devices_by_node[d.node].push_back(&d);
    }
  }
  for (std::size_t i = 0; i < in.nodes.size(); ++i) {
    NodePlan np;
    np.node = kube::name_of(in.nodes[i]);
    np.already_cordoned = kube::node_unschedulable(in.nodes[i]);
    std::vector<std::string> refused, blocked;
    for (const auto& pod : i < in.pods.size() ? in.pods[i] : std::vector<json>{}) {
      PodPlan pp;
      pp.ns = kube::namespace_of(pod);
      pp.name = kube::name_of(pod);
      PodFacts facts;
      facts.now = now;
      json c = controller_of(pod);
      if (kube::string_field(c, "kind") == "DaemonSet") {
        auto key = std::make_pair(pp.ns, kube::string_field(c, "name"));
        facts.daemonset_exists =
            std::find(in.missing_daemonsets.begin(), in.missing_daemonsets.end(), key) == in.missing_daemonsets.end();
      }
      auto verdict = classify_pod(pod, policy, facts);
      pp.action = verdict.action;
      pp.reason = verdict.reason;
      pp.message = verdict.message;
      pp.gpu_pod = requests_gpus(pod);
      pp.gpus = gpu_request(pod);
      for (const json* pdb : pdbs_for_pod(pod, in.pdbs)) pp.pdbs.push_back(pdb_budget(*pdb));
      if (pp.action == PodAction::evict && !kube::pod_is_terminal(pod)) {
        if (pp.pdbs.size() > 1) {
          pp.action = PodAction::blocked;
          pp.reason = "several-pdbs";
          pp.message = "more than one PodDisruptionBudget matches; the eviction API refuses such pods (500)";
        } else if (pp.pdbs.size() == 1 && pp.pdbs[0].disruptions_allowed <= 0) {
          pp.action = PodAction::blocked;
          pp.reason = "pdb";
          pp.message = describe_budget(pp.pdbs[0]);
        }
      }
      if (pp.action != PodAction::skip) plan_dra_move(pp, dra_room);
      if (pp.gpu_pod && pp.dra_devices == 0 && in.inventory && pp.action != PodAction::skip) {
        pp.product = product_of_node[np.node];
        pp.free_gpus_elsewhere = kube::saturating_sub(free_by_product[pp.product], taken[pp.product]);
        pp.fits_elsewhere = pp.free_gpus_elsewhere >= pp.gpus;
        if (pp.fits_elsewhere) taken[pp.product] = kube::saturating_add(taken[pp.product], pp.gpus);
      }
      if (pp.action == PodAction::refuse) refused.push_back(pp.ns + "/" + pp.name);
      if (pp.action == PodAction::blocked) blocked.push_back(pp.ns + "/" + pp.name);
      np.pods.push_back(std::move(pp));
    }
    np.completes = refused.empty() && blocked.empty();
    if (!refused.empty()) {
      np.message = fmt::format("refused, nothing would be evicted: {}", fmt::join(refused, ", "));
    } else if (!blocked.empty()) {
      np.message = fmt::format("blocked by disruption budgets now: {}", fmt::join(blocked, ", "));
    }
    plan.nodes.push_back(std::move(np));
  }
  return plan;
}

json to_json(const DrainPlan& plan) {
  json items = json::array();
  for (const auto& n : plan.nodes) {
    json pods = json::array();
    for (const auto& p : n.pods) {
      json pdbs = json::array();
      for (const auto& b : p.pdbs) {
        pdbs.push_back({{"namespace", b.ns},
                        {"name", b.name},
                        {"disruptionsAllowed", b.disruptions_allowed},
                        {"desiredHealthy", b.desired_healthy},
                        {"currentHealthy", b.current_healthy},
                        {"expectedPods", b.expected_pods}});
      }
      json pod = {{"namespace", p.ns},   {"name", p.name},       {"action", std::string(to_string(p.action))},
                  {"reason", p.reason},  {"message", p.message}, {"pdbs", pdbs},
                  {"gpuPod", p.gpu_pod}, {"gpus", p.gpus}};
      if (p.dra_devices > 0) {
        pod["moveTo"] = {{"dra",
                          {{"devices", p.dra_devices},
                           {"fit", p.dra_fit},
                           {"node", p.dra_node.empty() ? json(nullptr) : json(p.dra_node)},
                           {"message", p.dra_message.empty() ? json(nullptr) : json(p.dra_message)}}},
                         {"fits", p.dra_fit == "fits"}};
      } else if (p.gpu_pod && !p.product.empty()) {
        pod["moveTo"] = {
            {"product", p.product}, {"freeGpusElsewhere", p.free_gpus_elsewhere}, {"fits", p.fits_elsewhere}};
      } else if (p.gpu_pod) {
        pod["moveTo"] = {
            {"product", nullptr}, {"freeGpusElsewhere", p.free_gpus_elsewhere}, {"fits", p.fits_elsewhere}};
      } else {
        pod["moveTo"] = nullptr;
      }
      pods.push_back(std::move(pod));
    }
    items.push_back({{"node", n.node},
                     {"alreadyCordoned", n.already_cordoned},
                     {"completes", n.completes},
                     {"message", n.message},
                     {"pods", pods}});
  }
  return schema_document("DrainPlan", {{"items", items}});
}

}  // namespace gpuctl::ops
