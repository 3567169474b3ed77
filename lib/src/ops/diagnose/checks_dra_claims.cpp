// The checks of DRA claims and classes (issue 19): claims of pending pods the scheduler has not
// allocated (dra-claim-unallocated) and DeviceClasses no published device satisfies
// (dra-class-matches-nothing). Selectors are judged by the CEL subset of dra_cel.hpp; what it
// cannot evaluate is said to be unknown, never counted as a device that does not match.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "check_support.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

const DraClaim* find_claim(const DraInventory& inventory, const std::string& ns, const std::string& name) {
  for (const auto& c : inventory.claims) {
    if (c.namespace_name == ns && c.name == name) return &c;
  }
  return nullptr;
}

const DraDeviceClass* find_class(const DraInventory& inventory, const std::string& name) {
  for (const auto& c : inventory.classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// The claims a pod waits for: those the pod itself names (ops::pod_claim_refs) and any claim it owns.
std::vector<PodClaimRef> claims_of(const json& pod, const DraInventory& inventory) {
  std::vector<PodClaimRef> out = pod_claim_refs(pod);
  const std::string ns = kube::namespace_of(pod), name = kube::name_of(pod);
  for (const auto& c : inventory.claims) {
    bool known = std::any_of(out.begin(), out.end(), [&](const PodClaimRef& r) { return r.name == c.name; });
    if (c.namespace_name == ns && c.owner_pod == name && !known) out.push_back({c.name, "owned by the pod"});
  }
  // Template entries already matched by an owned claim need no "not made yet".
  std::erase_if(out, [&](const PodClaimRef& c) {
    return c.name.empty() && std::any_of(out.begin(), out.end(), [](const PodClaimRef& o) { return !o.name.empty(); });
  });
  return out;
}

bool pending_unscheduled(const json& pod) {
  if (string_field(field(pod, "status"), "phase") != "Pending") return false;
  if (!string_field(field(pod, "spec"), "nodeName").empty()) return false;
  for (const auto& c : kube::array_field(field(pod, "status"), "conditions")) {
    if (string_field(c, "type") == "PodScheduled" && string_field(c, "status") == "False") return true;
  }
  return false;
}

// The scheduler's words: the PodScheduled condition's message, else its newest FailedScheduling event.
std::optional<Evidence> scheduler_reason(const json& pod, const EventIndex* events) {
  for (const auto& c : kube::array_field(field(pod, "status"), "conditions")) {
    if (string_field(c, "type") != "PodScheduled" || string_field(c, "message").empty()) continue;
    return Evidence{fmt::format("pod {} condition PodScheduled", pod_ref(pod)),
                    fmt::format("{}: {}", string_field(c, "reason"), string_field(c, "message")),
                    string_field(c, "lastTransitionTime")};
  }
  if (events == nullptr) return std::nullopt;
  const json* newest = nullptr;
  for (const json* e : events->about("Pod", kube::namespace_of(pod), kube::name_of(pod))) {
    if (string_field(*e, "reason") != "FailedScheduling") continue;
    if (newest == nullptr || event_time(*e) >= event_time(*newest)) newest = e;
  }
  if (newest == nullptr) return std::nullopt;
  return event_evidence(*newest);
}

// The devices a request could get: how many match, how many of those are free (held by no claim,
// no blocking taint), the most free on one node, and how many free ones could not be judged.
struct Supply {
  std::int64_t matching = 0;
  std::int64_t free = 0;
  std::int64_t most_on_one_node = 0;
  std::string best_node;
  std::int64_t free_unknown = 0;
  std::string problem;  // why some could not be judged
};

Supply supply_for(const DraInventory& inventory, const std::vector<std::string>& selectors) {
  Supply s;
  std::map<std::string, std::int64_t> per_node;
  for (const auto& d : inventory.devices) {
    CelVerdict v = evaluate_device_selectors(selectors, d);
    if (v.kind == CelVerdict::Kind::no_match) continue;
    bool free = !d.unhealthy() && inventory.holder({d.driver, d.pool, d.name}) == nullptr;
    if (v.kind == CelVerdict::Kind::unsupported) {
      s.free_unknown += free;
      if (s.problem.empty()) s.problem = v.problem;
      continue;
    }
    ++s.matching;
    if (!free) continue;
    ++s.free;
    if (++per_node[d.node] > s.most_on_one_node) s.most_on_one_node = per_node[d.node], s.best_node = d.node;
  }
  return s;
}

std::string wanted(const DraClaimRequest& r) {
  std::string n = r.allocation_mode == "All" ? "all" : std::to_string(r.count);
  std::string text = fmt::format("request {}: {} of class {}", r.name, n, r.device_class);
  if (!r.selectors.empty()) text += fmt::format(" where {}", fmt::join(r.selectors, " && "));
  return text;
}

std::string supply_text(const Supply& s) {
  std::string text = fmt::format("{} free device(s) match ({} match in all)", s.free, s.matching);
  if (s.free > 0 && !s.best_node.empty())
    text += fmt::format(", at most {} on one node ({})", s.most_on_one_node, s.best_node);
  if (s.free_unknown > 0)
    text +=
        fmt::format("; whether {} more free device(s) match could not be evaluated ({})", s.free_unknown, s.problem);
  return text;
}

// Each request of the claim and what the cluster has for it, one part each.
std::vector<std::string> request_parts(const DraInventory& inventory, const DraClaim& claim) {
  std::vector<std::string> parts;
  for (const auto& r : claim.requests) {
    const DraDeviceClass* cls = find_class(inventory, r.device_class);
    if (cls == nullptr) {
      parts.push_back(fmt::format("{}; device class {} does not exist", wanted(r), r.device_class));
      continue;
    }
    std::vector<std::string> selectors = cls->selectors;
    selectors.insert(selectors.end(), r.selectors.begin(), r.selectors.end());
    parts.push_back(fmt::format("{}; {}", wanted(r), supply_text(supply_for(inventory, selectors))));
  }
  return parts;
}

std::string pending_for(const Snapshot& snapshot, const json& pod) {
  auto created = util::parse_rfc3339(string_field(field(pod, "metadata"), "creationTimestamp"));
  if (!created || *created > snapshot.now) return "";
  return " for " + util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(snapshot.now - *created));
}

Finding claim_finding(const Snapshot& snapshot, const DraInventory& inventory, const json& pod, const PodClaimRef& ref,
                      const DraClaim* claim, const std::optional<Evidence>& reason) {
  const std::string ns = kube::namespace_of(pod);
  std::string what;
  if (ref.name.empty()) {
    what = fmt::format("its claim {} has not been made", ref.how);
  } else if (claim == nullptr) {
    what = fmt::format("claim {}/{} ({}) does not exist", ns, ref.name, ref.how);
  } else {
    what = fmt::format("claim {}/{} is not allocated: {}", ns, ref.name,
                       fmt::join(request_parts(inventory, *claim), "; "));
  }
  std::string says = reason ? fmt::format("; the scheduler says: {}", reason->text) : "";
  Finding f;
  f.check = "dra-claim-unallocated";
  f.severity = Severity::error;
  f.object = {claim != nullptr ? "ResourceClaim" : "Pod", ns, claim != nullptr ? claim->name : kube::name_of(pod)};
  f.summary = fmt::format("pod {} pending{}: {}{}", pod_ref(pod), pending_for(snapshot, pod), what, says);
  if (reason) f.evidence.push_back(*reason);
  if (claim != nullptr) {
    for (const auto& r : claim->requests) {
      f.evidence.push_back({fmt::format("ResourceClaim {}/{} spec.devices.requests", ns, claim->name), wanted(r), ""});
    }
    f.remedy.push_back(fmt::format("kubectl describe resourceclaim -n {} {}", ns, claim->name));
  }
  f.remedy.push_back(fmt::format("kubectl describe pod -n {} {}", ns, kube::name_of(pod)));
  f.remedy.push_back("gpuctl nodes");
  return f;
}

// Whether any published device satisfies the class; how many could not be judged, and why.
struct Reach {
  bool matched = false;
  std::size_t unknown = 0;
  std::string problem;
};

Reach reach_of(const DraInventory& inventory, const DraDeviceClass& cls) {
  Reach reach;
  for (const auto& d : inventory.devices) {
    CelVerdict v = evaluate_device_selectors(cls.selectors, d);
    if (v.matches()) return {true, 0, ""};
    if (v.kind == CelVerdict::Kind::unsupported && reach.unknown++ == 0) reach.problem = v.problem;
  }
  return reach;
}

std::vector<std::string> claims_requesting(const DraInventory& inventory, const std::string& device_class) {
  std::vector<std::string> out;
  for (const auto& c : inventory.claims) {
    bool asks = std::any_of(c.requests.begin(), c.requests.end(),
                            [&](const DraClaimRequest& r) { return r.device_class == device_class; });
    if (asks) out.push_back(c.namespace_name + "/" + c.name);
  }
  return out;
}

Finding class_finding(const DraInventory& inventory, const DraDeviceClass& cls, const Reach& reach) {
  Finding f;
  f.check = "dra-class-matches-nothing";
  f.object = {"DeviceClass", "", cls.name};
  const std::size_t n = inventory.devices.size();
  if (reach.unknown > 0) {
    // Unknown is not "none": the class may well match, so nothing stronger than info is said.
    f.severity = Severity::info;
    f.summary = fmt::format(
        "DeviceClass {}: no published device is known to match it; its selectors could not be evaluated for {} of "
        "the {} device(s) ({})",
        cls.name, reach.unknown, n, reach.problem);
  } else {
    std::vector<std::string> claims = claims_requesting(inventory, cls.name);
    f.severity = claims.empty() ? Severity::info : Severity::warning;
    f.summary = fmt::format("DeviceClass {} matches none of the {} published device(s)", cls.name, n);
    if (!inventory.pool_problems.empty())
      f.summary += fmt::format(" ({} pool(s) left out: dra-pool-incomplete)", inventory.pool_problems.size());
    if (!claims.empty()) {
      f.summary +=
          fmt::format("; {} claim(s) request it and cannot be allocated: {}", claims.size(), first_few(claims));
    } else if (dra_unread(inventory, "resourceclaims").empty()) {
      f.summary += "; no claim requests it";
    } else {
      f.summary += "; whether a claim requests it is not known (resourceclaims could not be read)";
    }
  }
  for (std::size_t i = 0; i < cls.selectors.size(); ++i) {
    f.evidence.push_back(
        {fmt::format("DeviceClass {} spec.selectors[{}].cel.expression", cls.name, i), cls.selectors[i], ""});
  }
  f.remedy = {fmt::format("kubectl get deviceclass {} -o yaml", cls.name), "kubectl get resourceslices -o yaml",
              "gpuctl nodes"};
  return f;
}

}  // namespace

std::vector<Finding> check_dra_claim_unallocated(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return out;
  if (std::string unread = dra_unread(*inventory, "resourceclaims"); !unread.empty()) {
    // Without the claims, a pending pod's claim would look missing: say what is not known instead.
    Finding f;
    f.check = "dra-claim-unallocated";
    f.severity = Severity::info;
    f.object = {"ResourceClaim", "", ""};
    f.summary = "ResourceClaims could not be read, so which pending pods wait for a claim is not known";
    f.evidence.push_back({"list resourceclaims", unread, ""});
    f.remedy = {"grant gpuctl's user list on resourceclaims.resource.k8s.io in every namespace"};
    out.push_back(std::move(f));
    return out;
  }
  std::optional<EventIndex> events;
  if (snapshot.lists.count(Source::events)) events.emplace(snapshot);
  for (const auto& pod : snapshot.list(Source::pods)) {
    if (!pending_unscheduled(pod)) continue;
    std::optional<Evidence> reason;
    bool judged = false;
    for (const auto& ref : claims_of(pod, *inventory)) {
      const DraClaim* claim = ref.name.empty() ? nullptr : find_claim(*inventory, kube::namespace_of(pod), ref.name);
      if (claim != nullptr && claim->allocated) continue;
      if (!judged) reason = scheduler_reason(pod, events ? &*events : nullptr), judged = true;
      out.push_back(claim_finding(snapshot, *inventory, pod, ref, claim, reason));
    }
  }
  return out;
}

std::vector<Finding> check_dra_class_matches_nothing(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return out;
  for (const auto& cls : inventory->classes) {
    Reach reach = reach_of(*inventory, cls);
    if (!reach.matched) out.push_back(class_finding(*inventory, cls, reach));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
