// What `gpuctl taint --device` decides before anything is sent: which device NODE/DEVICE is
// (through the node's ResourceSlices), the DeviceTaintRule that quarantines it, and the writes
// one taint spec needs against the rules there now. Pure; device_taint_apply.cpp reads and sends.
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/dra/device_taint.hpp"
#include "gpuctl/util/sha256.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

Error invalid(std::string message) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = std::move(message);
  return e;
}

// A DNS subdomain's characters: lower-case alphanumerics, '-' and '.'.
bool subdomain_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'; }
bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

const json& selector_of(const json& rule) { return kube::field_at(rule, {"spec", "deviceSelector"}); }

kube::Taint taint_of(const json& rule) {
  const json& t = kube::field_at(rule, {"spec", "taint"});
  return {kube::string_field(t, "key"), kube::string_field(t, "value"), kube::string_field(t, "effect"),
          kube::string_field(t, "timeAdded")};
}

// Fields of a v1alpha3 selector gpuctl does not evaluate here (a class, CEL).
bool has_unjudged_selectors(const json& selector) {
  return !kube::string_field(selector, "deviceClassName").empty() || !kube::array_field(selector, "selectors").empty();
}

std::string describe(const DeviceRef& ref, const DraDeviceId& id) {
  return fmt::format("{} ({}, pool {})", ref.text(), id.driver, id.pool);
}

// The merge patch that turns the rule's taint into `taint`, guarded by its resourceVersion.
json update_patch(const json& rule, const kube::Taint& taint) {
  return {{"metadata", {{"resourceVersion", kube::string_field(kube::field(rule, "metadata"), "resourceVersion")}}},
          {"spec",
           {{"taint",
             {{"key", taint.key},
              {"value", taint.value.empty() ? json(nullptr) : json(taint.value)},
              {"effect", taint.effect}}}}}};
}

json delete_options(const json& rule) {
  return {
      {"preconditions", {{"resourceVersion", kube::string_field(kube::field(rule, "metadata"), "resourceVersion")}}}};
}

// Rules that taint exactly this device with `key`, gpuctl's (by name) first, then by name.
std::vector<const json*> exact_rules_with_key(const std::vector<json>& rules, const DraDeviceId& id,
                                              std::string_view key, std::string_view ours) {
  std::vector<const json*> out;
  for (const auto& r : rules) {
    if (selects_exactly(r, id) && taint_of(r).key == key) out.push_back(&r);
  }
  std::ranges::sort(out, [&](const json* a, const json* b) {
    const std::string na = kube::name_of(*a), nb = kube::name_of(*b);
    if ((na == ours) != (nb == ours)) return na == ours;
    return na < nb;
  });
  return out;
}

void note_broader_rules(const std::vector<json>& rules, const DraDeviceId& id, const TaintSpec& spec,
                        DeviceTaintPlan& plan) {
  for (const auto& r : rules) {
    const kube::Taint t = taint_of(r);
    if (t.key != spec.taint.key || selects_exactly(r, id) || !selects(r, id)) continue;
    if (spec.remove && !spec.taint.effect.empty() && t.effect != spec.taint.effect) continue;
    plan.notes.push_back(fmt::format(
        "DeviceTaintRule {} also taints {} with {}; it selects more than this device, so gpuctl leaves it (kubectl "
        "delete devicetaintrule {})",
        kube::name_of(r), id.device, kube::to_string(t), kube::name_of(r)));
  }
}

}  // namespace

Result<DeviceRef> parse_device_ref(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || text.find('/', slash + 1) != std::string_view::npos) {
    return fail(invalid(fmt::format(
        "--device \"{}\": name one device as NODE/DEVICE, e.g. gpu-node-7/gpu-3 (gpuctl gpus lists them)", text)));
  }
  DeviceRef ref{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
  if (auto p = kube::paths::dns_subdomain_problem(ref.node); !p.empty()) {
    return fail(invalid(fmt::format("--device \"{}\": node \"{}\" is not a valid node name: {}", text, ref.node, p)));
  }
  if (auto p = kube::paths::dns_label_problem(ref.device); !p.empty()) {
    return fail(invalid(fmt::format("--device \"{}\": \"{}\" is not a valid device name: {}", text, ref.device, p)));
  }
  return ref;
}

Result<DraDeviceId> resolve_device(const std::vector<json>& node_slices, const DeviceRef& ref,
                                   std::string_view driver) {
  std::set<DraDeviceId> found;
  std::set<std::string> published;  // "gpu-0 (gpu.nvidia.com)", for the error that finds none
  for (const auto& slice : node_slices) {
    const json& spec = kube::field(slice, "spec");
    const std::string slice_driver = kube::string_field(spec, "driver");
    const std::string pool = kube::string_field(kube::field(spec, "pool"), "name");
    if (!driver.empty() && slice_driver != driver) continue;
    for (const auto& device : kube::array_field(spec, "devices")) {
      const std::string name = kube::string_field(device, "name");
      if (name == ref.device) found.insert({slice_driver, pool, name});
      published.insert(fmt::format("{} ({})", name, slice_driver));
    }
  }
  const std::string of_driver = driver.empty() ? "" : fmt::format(" of driver {}", driver);
  if (found.size() == 1) return *found.begin();
  if (found.empty() && published.empty()) {
    return fail(invalid(fmt::format(
        "node {} publishes no DRA devices{} (no ResourceSlice with spec.nodeName={}): check that its DRA driver runs "
        "there, or taint the whole node: gpuctl taint {} KEY=VALUE:EFFECT",
        ref.node, of_driver, ref.node, ref.node)));
  }
  if (found.empty()) {
    std::vector<std::string> names(published.begin(), published.end());
    constexpr std::size_t kNamed = 16;
    const std::string more = names.size() > kNamed ? fmt::format(" and {} more", names.size() - kNamed) : "";
    if (names.size() > kNamed) names.resize(kNamed);
    return fail(invalid(fmt::format("node {} publishes no device \"{}\"{}; it has: {}{}", ref.node, ref.device,
                                    of_driver, fmt::join(names, ", "), more)));
  }
  std::vector<std::string> where;
  for (const auto& id : found) where.push_back(fmt::format("{} (pool {})", id.driver, id.pool));
  return fail(invalid(fmt::format("device \"{}\" of node {} is published by {}: choose one with --driver DRIVER",
                                  ref.device, ref.node, fmt::join(where, " and "))));
}

std::string device_taint_rule_name(const DeviceRef& ref, const DraDeviceId& id, std::string_view key) {
  const std::string hash =
      util::sha256_hex(fmt::format("{}/{}/{}/{}", id.driver, id.pool, id.device, key)).substr(0, 8);
  std::string base = fmt::format("gpuctl-{}-{}", ref.node, ref.device);
  for (auto& c : base) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!subdomain_char(c)) c = '-';
  }
  // Room for "-" and the hash within a DNS subdomain's 253 characters. The node and device are
  // valid names (parse_device_ref), so only a cut can leave a label ending in '-' or '.'.
  constexpr std::size_t kMaxName = 253;
  if (base.size() > kMaxName - 1 - hash.size()) base.resize(kMaxName - 1 - hash.size());
  while (!base.empty() && !alnum(base.back())) base.pop_back();
  return base + "-" + hash;
}

json build_device_taint_rule(std::string_view version, const DeviceRef& ref, const DraDeviceId& id,
                             const kube::Taint& taint) {
  json t = {{"key", taint.key}, {"effect", taint.effect}};
  if (!taint.value.empty()) t["value"] = taint.value;
  return {
      {"apiVersion", fmt::format("{}/{}", kResourceApiGroup, version)},
      {"kind", "DeviceTaintRule"},
      {"metadata",
       {{"name", device_taint_rule_name(ref, id, taint.key)},
        {"labels", {{"app.kubernetes.io/managed-by", kDeviceTaintManagedBy}}},
        {"annotations", {{std::string(kDeviceAnnotation), ref.text()}}}}},
      {"spec", {{"deviceSelector", {{"driver", id.driver}, {"pool", id.pool}, {"device", id.device}}}, {"taint", t}}}};
}

bool selects_exactly(const json& rule, const DraDeviceId& id) {
  const json& s = selector_of(rule);
  return !has_unjudged_selectors(s) && kube::string_field(s, "driver") == id.driver &&
         kube::string_field(s, "pool") == id.pool && kube::string_field(s, "device") == id.device;
}

bool selects(const json& rule, const DraDeviceId& id) {
  const json& s = selector_of(rule);
  if (!s.is_object() || has_unjudged_selectors(s)) return false;
  auto matches = [&](std::string_view field, const std::string& value) {
    const std::string set = kube::string_field(s, field);
    return set.empty() || set == value;
  };
  return matches("driver", id.driver) && matches("pool", id.pool) && matches("device", id.device);
}

std::string_view to_string(DeviceTaintAction action) {
  switch (action) {
    case DeviceTaintAction::create: return "create";
    case DeviceTaintAction::update: return "update";
    case DeviceTaintAction::remove: return "remove";
  }
  return "create";
}

Result<DeviceTaintPlan> plan_device_taint(const std::vector<json>& rules, std::string_view version,
                                          const DeviceRef& ref, const DraDeviceId& id, const TaintSpec& spec) {
  DeviceTaintPlan plan;
  const std::string ours = device_taint_rule_name(ref, id, spec.taint.key);
  note_broader_rules(rules, id, spec, plan);
  auto exact = exact_rules_with_key(rules, id, spec.taint.key, ours);
  if (spec.remove) {
    for (const json* r : exact) {
      const kube::Taint t = taint_of(*r);
      if (!spec.taint.effect.empty() && t.effect != spec.taint.effect) continue;
      plan.writes.push_back({DeviceTaintAction::remove, kube::name_of(*r),
                             fmt::format("removed {} from {}", kube::to_string(t), describe(ref, id)),
                             delete_options(*r)});
    }
    if (plan.writes.empty()) {
      plan.unchanged = fmt::format("no DeviceTaintRule taints {} with {}{}", describe(ref, id), spec.taint.key,
                                   spec.taint.effect.empty() ? "" : ":" + spec.taint.effect);
    }
    return plan;
  }
  for (const auto& r : rules) {
    if (kube::name_of(r) == ours && !(selects_exactly(r, id) && taint_of(r).key == spec.taint.key)) {
      return fail(invalid(fmt::format(
          "DeviceTaintRule {} exists but does not taint {} with {}: gpuctl would write its rule under that name; "
          "delete or rename that rule first",
          ours, describe(ref, id), spec.taint.key)));
    }
  }
  if (exact.empty()) {
    plan.writes.push_back({DeviceTaintAction::create, ours,
                           fmt::format("added {} to {}", kube::to_string(spec.taint), describe(ref, id)),
                           build_device_taint_rule(version, ref, id, spec.taint)});
    return plan;
  }
  const json& rule = *exact.front();
  const kube::Taint now = taint_of(rule);
  for (std::size_t i = 1; i < exact.size(); ++i) {
    plan.notes.push_back(fmt::format("DeviceTaintRule {} also taints {} with {}; remove it with {}-",
                                     kube::name_of(*exact[i]), ref.text(), kube::to_string(taint_of(*exact[i])),
                                     spec.taint.key));
  }
  if (now.value == spec.taint.value && now.effect == spec.taint.effect) {
    plan.unchanged = fmt::format("{} already tainted {} by DeviceTaintRule {}", describe(ref, id), kube::to_string(now),
                                 kube::name_of(rule));
    plan.unchanged_rule = kube::name_of(rule);
    return plan;
  }
  plan.writes.push_back(
      {DeviceTaintAction::update, kube::name_of(rule),
       fmt::format("changed {} to {} on {}", kube::to_string(now), kube::to_string(spec.taint), describe(ref, id)),
       update_patch(rule, spec.taint)});
  return plan;
}

}  // namespace gpuctl::ops
