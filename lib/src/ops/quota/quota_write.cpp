// quota set / fix / delete share this: the plan of one object gpuctl manages (create, update
// only when the spec differs as the API server would store it, never touch an object of
// someone else), and the helpers of quota_write_internal.hpp. The spec and builders are
// quota_write_spec.cpp; the commands quota_write_set.cpp, quota_write_fix.cpp and
// quota_write_delete.cpp.
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "quota_write_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace quota_write_detail {

std::string qstr(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

json writable(json object) {
  object.erase("status");
  if (object.contains("metadata") && object["metadata"].is_object()) object["metadata"].erase("managedFields");
  return object;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string path_of(std::string_view kind, std::string_view ns, std::string_view name) {
  if (kind == "LimitRange") return name.empty() ? kube::paths::limit_ranges(ns) : kube::paths::limit_range(ns, name);
  return name.empty() ? kube::paths::resource_quotas(ns) : kube::paths::resource_quota(ns, name);
}

Result<std::optional<json>> get_optional(kube::Client& client, const std::string& path) {
  auto got = client.get(path);
  if (got) return std::optional<json>(std::move(*got));
  if (got.error().is_not_found()) return std::optional<json>();
  return fail(got.error());
}

}  // namespace quota_write_detail

namespace {

using quota_write_detail::lowercase;
using quota_write_detail::qstr;
using quota_write_detail::writable;

// Equal as JSON, except that strings are also equal when they are the same quantity ("1" and
// "1000m"), as the API server would store them.
bool same(const json& a, const json& b) {
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k) || !same(v, b[k])) return false;
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!same(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_string() && b.is_string() && a != b) {
    const auto& sa = a.get_ref<const std::string&>();
    const auto& sb = b.get_ref<const std::string&>();
    if (sa.empty() || sb.empty() || !std::isdigit(static_cast<unsigned char>(sa[0])) ||
        !std::isdigit(static_cast<unsigned char>(sb[0]))) {
      return false;
    }
    auto qa = kube::Quantity::parse(sa);
    auto qb = kube::Quantity::parse(sb);
    return qa && qb && *qa == *qb;
  }
  return a == b;
}

// "requests.nvidia.com/gpu 4 -> 2, requests.nvidia.com/mig-1g.10gb 2 added"
std::string diff_summary(const json& before, const json& after) {
  std::vector<std::string> parts;
  std::set<std::string> keys;
  if (before.is_object())
    for (const auto& [k, v] : before.items()) keys.insert(k);
  if (after.is_object())
    for (const auto& [k, v] : after.items()) keys.insert(k);
  for (const auto& k : keys) {
    bool in_before = before.is_object() && before.contains(k);
    bool in_after = after.is_object() && after.contains(k);
    if (in_before && in_after) {
      if (!same(before[k], after[k])) parts.push_back(fmt::format("{} {} -> {}", k, qstr(before[k]), qstr(after[k])));
    } else if (in_after) {
      parts.push_back(fmt::format("{} {} added", k, qstr(after[k])));
    } else {
      parts.push_back(fmt::format("{} {} removed", k, qstr(before[k])));
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

json max_of_type(const json& limit_range, std::string_view type) {
  for (const auto& l : kube::array_field(kube::field(limit_range, "spec"), "limits")) {
    if (kube::string_field(l, "type") == type && l.contains("max")) return l["max"];
  }
  return nullptr;
}

std::string change_summary(const std::string& kind, const json& before, const json& after) {
  if (kind == "ResourceQuota") {
    return diff_summary(
        before.contains("/spec/hard"_json_pointer) ? before.at("/spec/hard"_json_pointer) : json(nullptr),
        after.contains("/spec/hard"_json_pointer) ? after.at("/spec/hard"_json_pointer) : json(nullptr));
  }
  std::string s = diff_summary(max_of_type(before, "Pod"), max_of_type(after, "Pod"));
  return s.empty() ? "spec rewritten" : "max per pod: " + s;
}

}  // namespace

std::string_view to_string(ApplyAction action) {
  switch (action) {
    case ApplyAction::create: return "created";
    case ApplyAction::update: return "configured";
    case ApplyAction::unchanged: return "unchanged";
  }
  return "";
}

Result<ObjectPlan> plan_managed_object(const json& desired, const std::optional<json>& existing) {
  ObjectPlan plan;
  plan.kind = kube::string_field(desired, "kind");
  plan.namespace_name = kube::namespace_of(desired);
  plan.name = kube::name_of(desired);
  if (!existing) {
    plan.action = ApplyAction::create;
    plan.object = desired;
    return plan;
  }
  if (kube::label_of(*existing, kManagedByLabel) != std::string(kManagedByValue)) {
    return fail(
        Errc::invalid_argument,
        fmt::format("{} {}/{} exists but gpuctl did not create it (no label {}={}): delete or rename it, or add "
                    "the label to let gpuctl manage it",
                    lowercase(plan.kind), plan.namespace_name, plan.name, kManagedByLabel, kManagedByValue));
  }
  const json& want = desired.contains("spec") ? desired["spec"] : json::object();
  const json& have = existing->contains("spec") ? (*existing)["spec"] : json::object();
  if (same(want, have)) {
    plan.action = ApplyAction::unchanged;
    plan.object = *existing;
    return plan;
  }
  plan.action = ApplyAction::update;
  plan.object = writable(*existing);
  plan.object["spec"] = want;
  plan.object["metadata"]["labels"][std::string(kManagedByLabel)] = kManagedByValue;
  plan.summary = change_summary(plan.kind, *existing, desired);
  return plan;
}

}  // namespace gpuctl::ops
