// `gpuctl taint --device` against the cluster: which version serves DeviceTaintRules, the node's
// ResourceSlices, who holds the device (the pre-flight of NoExecute), and the writes that
// device_taint.cpp plans, each guarded by the rule's resourceVersion and planned again on 409.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/discovery.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/dra/device_taint.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

std::string group_version(std::string_view version) { return fmt::format("{}/{}", kResourceApiGroup, version); }

std::string rules_path(std::string_view version) {
  return kube::paths::resources(group_version(version), kDeviceTaintRuleResource, false);
}
std::string rule_path(std::string_view version, std::string_view name) {
  return kube::paths::resource(group_version(version), kDeviceTaintRuleResource, false, "", name);
}

// The tolerations an allocation result carries, or those of the request (or of its
// firstAvailable alternative "request/sub") it was made for.
const json& tolerations_for(const json& claim, const json& result) {
  if (const json& copied = kube::array_field(result, "tolerations"); !copied.empty()) return copied;
  const std::string request = kube::string_field(result, "request");
  const auto slash = request.find('/');
  const std::string main = request.substr(0, slash);
  for (const auto& r : kube::array_field(kube::field_at(claim, {"spec", "devices"}), "requests")) {
    if (kube::string_field(r, "name") != main) continue;
    if (slash != std::string::npos) {
      for (const auto& sub : kube::array_field(r, "firstAvailable")) {
        if (kube::string_field(sub, "name") == request.substr(slash + 1)) return kube::array_field(sub, "tolerations");
      }
    }
    if (const json& exactly = kube::array_field(kube::field(r, "exactly"), "tolerations"); !exactly.empty())
      return exactly;
    return kube::array_field(r, "tolerations");  // v1beta1's flat request
  }
  return kube::array_field(json(nullptr), "tolerations");
}

std::string pods_of(const DraClaim& claim) {
  if (claim.reserved_for.empty()) return "no pod uses it now";
  std::vector<std::string> pods;
  for (const auto& p : claim.reserved_for) pods.push_back(p.namespace_name + "/" + p.name);
  return fmt::format("pods {}", fmt::join(pods, ", "));
}

// The rules as the spec's writes leave them, so the next spec plans on what is there then.
void apply_locally(std::vector<json>& rules, const DeviceTaintWrite& write, const json& answer) {
  auto same = [&](const json& r) { return kube::name_of(r) == write.rule; };
  if (write.action == DeviceTaintAction::remove) {
    std::erase_if(rules, same);
  } else if (write.action == DeviceTaintAction::create) {
    rules.push_back(answer.is_object() ? answer : write.body);
  } else if (auto it = std::ranges::find_if(rules, same); it != rules.end()) {
    if (answer.is_object()) {
      *it = answer;
    } else {
      it->merge_patch(write.body);
    }
  }
}

class SpecApplier {
 public:
  SpecApplier(kube::Client& client, const DeviceTaintRequest& request, std::vector<json>& rules)
      : client_(client), request_(request), rules_(rules) {}

  void apply(std::size_t index, DeviceTaintResult& out) {
    const TaintSpec& spec = request_.specs[index];
    const std::string& text = request_.spec_texts[index];
    int conflicts = 0;
    std::vector<std::string> notes;
    auto done = retry_on_conflict(request_.max_conflict_retries + 1, conflicts, [&](int attempt) -> Result<void> {
      if (attempt > 0) {  // someone else wrote a rule since we listed: plan on what is there now
        GPUCTL_TRY_ASSIGN(auto list, client_.list(rules_path(request_.version)));
        rules_ = std::move(list.items);
      }
      GPUCTL_TRY_ASSIGN(DeviceTaintPlan plan,
                        plan_device_taint(rules_, request_.version, request_.ref, request_.id, spec));
      notes = std::move(plan.notes);
      if (plan.writes.empty()) {
        out.changes.push_back({text, plan.unchanged_rule, DeviceTaintOutcome::unchanged, plan.unchanged, "", "",
                               nullptr, conflicts, std::nullopt});
        return {};
      }
      for (const auto& write : plan.writes) GPUCTL_TRY(send(text, write, conflicts, out));
      return {};
    });
    for (auto& n : notes) out.notes.push_back(std::move(n));
    if (done) return;
    DeviceTaintChange failed{text, "", DeviceTaintOutcome::failed, "", "", "", nullptr, conflicts, done.error()};
    if (done.error().is_conflict()) {
      failed.error->message = fmt::format(
          "the DeviceTaintRules of {} kept changing under us ({} conflicts in a row); "
          "run the command again",
          request_.ref.text(), conflicts + 1);
    }
    out.changes.push_back(std::move(failed));
  }

 private:
  Result<void> send(const std::string& text, const DeviceTaintWrite& write, int conflicts, DeviceTaintResult& out) {
    DeviceTaintChange change{text,      write.rule,  DeviceTaintOutcome::created, write.summary, "", "", write.body,
                             conflicts, std::nullopt};
    const kube::WriteOptions options = write_options(request_.dry_run);
    const bool send_it = request_.dry_run != DryRun::client;
    Result<json> answer = json(nullptr);
    switch (write.action) {
      case DeviceTaintAction::create:
        change.method = "POST";
        change.path = rules_path(request_.version);
        if (send_it) answer = client_.create(change.path, write.body, options);
        break;
      case DeviceTaintAction::update:
        change.method = "PATCH";
        change.outcome = DeviceTaintOutcome::updated;
        change.path = rule_path(request_.version, write.rule);
        if (send_it) answer = client_.patch(change.path, kube::PatchType::merge, write.body, options);
        break;
      case DeviceTaintAction::remove:
        change.method = "DELETE";
        change.outcome = DeviceTaintOutcome::deleted;
        change.path = rule_path(request_.version, write.rule);
        if (send_it) answer = client_.remove(change.path, write.body, options);
        // Gone already: whoever deleted it did what was asked.
        if (!answer && answer.error().is_not_found()) answer = json(nullptr);
        break;
    }
    if (!answer) return fail(answer.error().with_context(fmt::format("DeviceTaintRule {}", write.rule)));
    apply_locally(rules_, write, write.action == DeviceTaintAction::remove ? json(nullptr) : *answer);
    out.changes.push_back(std::move(change));
    return {};
  }

  kube::Client& client_;
  const DeviceTaintRequest& request_;
  std::vector<json>& rules_;
};

}  // namespace

Result<std::string> device_taint_rule_version(kube::Client& client) {
  GPUCTL_TRY_ASSIGN(std::string version, kube::served_version(client, kResourceApiGroup, kDeviceTaintRuleResource));
  if (!version.empty()) return version;
  return fail(Errc::not_served,
              "this cluster does not serve DeviceTaintRules (resource.k8s.io), so one device cannot be tainted: an "
              "admin enables them with kube-apiserver --runtime-config=resource.k8s.io/v1beta2/devicetaintrules=true "
              "and the feature gate DRADeviceTaintRules=true on the API server, scheduler and controller manager "
              "(Kubernetes 1.36; on 1.33-1.35 resource.k8s.io/v1alpha3 with DRADeviceTaints), or taint the whole "
              "node: gpuctl taint NODE KEY=VALUE:EFFECT");
}

Result<DraDeviceId> find_device(kube::Client& client, const DeviceRef& ref, std::string_view driver) {
  kube::ListOptions options;
  options.field_selector = "spec.nodeName=" + ref.node;
  auto slices = client.list(kube::paths::resources(kResourceApiVersion, "resourceslices", false), options);
  if (!slices && slices.error().is_not_found()) {
    // Before resource.k8s.io/v1 (Kubernetes 1.33): the slices' names and pools read the same.
    GPUCTL_TRY_ASSIGN(std::string version, kube::served_version(client, kResourceApiGroup, "resourceslices"));
    if (version.empty()) {
      return fail(Errc::not_served, fmt::format("this cluster does not serve DRA (resource.k8s.io ResourceSlices), so "
                                                "node {} has no devices to taint: taint the node: gpuctl taint {} "
                                                "KEY=VALUE:EFFECT",
                                                ref.node, ref.node));
    }
    slices = client.list(kube::paths::resources(group_version(version), "resourceslices", false), options);
  }
  if (!slices) return fail(slices.error().with_context(fmt::format("listing the ResourceSlices of node {}", ref.node)));
  return resolve_device(slices->items, ref, driver);
}

bool allocation_tolerates(const json& claim, const DraDeviceId& id, const kube::Taint& taint) {
  for (const auto& result : kube::array_field(kube::field_at(claim, {"status", "allocation", "devices"}), "results")) {
    if (kube::string_field(result, "driver") != id.driver || kube::string_field(result, "pool") != id.pool ||
        kube::string_field(result, "device") != id.device)
      continue;
    const json& tolerations = tolerations_for(claim, result);
    return std::ranges::any_of(tolerations, [&](const json& t) { return toleration_matches(t, taint); });
  }
  return false;
}

TaintImpact device_taint_impact(const DeviceRef& ref, const DraDeviceId& id, const kube::Taint& taint,
                                const DraClaim* holder, const json& holder_claim, const std::string& claims_unreadable,
                                bool evict_allowed) {
  TaintImpact impact;
  if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") return impact;
  const std::string t = kube::to_string(taint);
  if (!claims_unreadable.empty()) {
    if (taint.effect == "NoExecute" && !evict_allowed) {
      impact.refusals.push_back(fmt::format("cannot tell which pods hold {} ({}); add --yes to taint it {} anyway",
                                            ref.text(), claims_unreadable, t));
    } else {
      impact.warnings.push_back(fmt::format("cannot tell which pods hold {}: {}", ref.text(), claims_unreadable));
    }
    return impact;
  }
  if (holder == nullptr) return impact;
  const std::string claim = holder->namespace_name + "/" + holder->name;
  const std::string pods = pods_of(*holder);
  if (allocation_tolerates(holder_claim, id, taint)) {
    impact.warnings.push_back(fmt::format("{} is allocated to claim {} ({}), which tolerates {}: it keeps the device",
                                          ref.text(), claim, pods, t));
  } else if (taint.effect == "NoSchedule") {
    impact.warnings.push_back(
        fmt::format("{} is allocated to claim {} ({}); it keeps the device, but no claim that "
                    "does not tolerate {} will be given it again",
                    ref.text(), claim, pods, t));
  } else if (evict_allowed) {
    impact.warnings.push_back(
        fmt::format("{} is allocated to claim {}: {} will be evicted ({})", ref.text(), claim, pods, t));
  } else {
    impact.refusals.push_back(
        fmt::format("{} is allocated to claim {}, whose {} would be evicted by {} (add --yes "
                    "to evict them, or give the claim's request a toleration)",
                    ref.text(), claim, pods, t));
  }
  return impact;
}

Result<TaintImpact> device_taint_preflight(kube::Client& client, const DeviceRef& ref, const DraDeviceId& id,
                                           const std::vector<kube::Taint>& added, bool evict_allowed) {
  TaintImpact impact;
  const bool blocking = std::ranges::any_of(
      added, [](const kube::Taint& t) { return t.effect == "NoSchedule" || t.effect == "NoExecute"; });
  if (!blocking) return impact;
  DraReadOptions options;
  options.classes = false;
  options.taint_rules = false;
  GPUCTL_TRY_ASSIGN(DraInventory inventory, collect_dra(client, options));
  const std::string unreadable = fmt::format("{}", fmt::join(inventory.warnings, "; "));
  const DraClaim* holder = inventory.holder(id);
  json claim;
  if (holder != nullptr) {
    // The claim itself, for the tolerations its allocation carries; unreadable means none known.
    auto read = client.get(
        kube::paths::resource(kResourceApiVersion, "resourceclaims", true, holder->namespace_name, holder->name));
    if (read) claim = std::move(*read);
  }
  for (const auto& taint : added) {
    auto one = device_taint_impact(ref, id, taint, holder, claim, unreadable, evict_allowed);
    impact.warnings.insert(impact.warnings.end(), one.warnings.begin(), one.warnings.end());
    impact.refusals.insert(impact.refusals.end(), one.refusals.begin(), one.refusals.end());
  }
  return impact;
}

std::string_view to_string(DeviceTaintOutcome outcome) {
  switch (outcome) {
    case DeviceTaintOutcome::created: return "created";
    case DeviceTaintOutcome::updated: return "updated";
    case DeviceTaintOutcome::deleted: return "deleted";
    case DeviceTaintOutcome::unchanged: return "unchanged";
    case DeviceTaintOutcome::failed: return "failed";
  }
  return "failed";
}

Result<DeviceTaintResult> apply_device_taints(kube::Client& client, const DeviceTaintRequest& request) {
  GPUCTL_TRY_ASSIGN(auto list, client.list(rules_path(request.version)));
  std::vector<json> rules = std::move(list.items);
  DeviceTaintResult out;
  SpecApplier applier(client, request, rules);
  for (std::size_t i = 0; i < request.specs.size(); ++i) applier.apply(i, out);
  return out;
}

json to_json(const DeviceTaintRequest& request, const DeviceTaintResult& result) {
  json items = json::array();
  for (const auto& c : result.changes) {
    json sent = c.method.empty() ? json(nullptr) : json{{"method", c.method}, {"path", c.path}, {"body", c.body}};
    items.push_back({{"spec", c.spec},
                     {"rule", c.rule},
                     {"result", to_string(c.outcome)},
                     {"summary", c.summary},
                     {"request", sent},
                     {"conflicts", c.conflicts},
                     {"error", c.error ? json(c.error->message) : json(nullptr)}});
  }
  std::string_view mode = request.dry_run == DryRun::client   ? "client"
                          : request.dry_run == DryRun::server ? "server"
                                                              : "none";
  return schema_document("DeviceTaintChangeList", {{"device",
                                                    {{"node", request.ref.node},
                                                     {"name", request.id.device},
                                                     {"driver", request.id.driver},
                                                     {"pool", request.id.pool}}},
                                                   {"ruleApiVersion", group_version(request.version)},
                                                   {"dryRun", mode},
                                                   {"items", items},
                                                   {"notes", result.notes}});
}

}  // namespace gpuctl::ops
