// gpuctl quota set / fix / delete: option parsing, the pure builders and plans, and the writes
// (create or replace with resourceVersion, 409 Conflict answered by reading again).
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

constexpr int kMaxAttempts = 5;
const std::string kRequests = "requests.";

std::optional<std::int64_t> parse_count(std::string_view t) {
  if (t.empty() || t.size() > 12) return std::nullopt;
  std::int64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

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

std::string qstr(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The object as it may be sent back: no status, no managedFields.
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

// "requests.nvidia.com/gpu 4 -> 2, requests.nvidia.com/mig-1g.10gb 2 added"
std::string diff_summary(const json& before, const json& after) {
  std::vector<std::string> parts;
  std::set<std::string> keys;
  if (before.is_object()) for (const auto& [k, v] : before.items()) keys.insert(k);
  if (after.is_object()) for (const auto& [k, v] : after.items()) keys.insert(k);
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
    return diff_summary(before.contains("/spec/hard"_json_pointer) ? before.at("/spec/hard"_json_pointer) : json(nullptr),
                        after.contains("/spec/hard"_json_pointer) ? after.at("/spec/hard"_json_pointer) : json(nullptr));
  }
  std::string s = diff_summary(max_of_type(before, "Pod"), max_of_type(after, "Pod"));
  return s.empty() ? "spec rewritten" : "max per pod: " + s;
}

Result<std::optional<json>> get_optional(kube::Client& client, const std::string& path) {
  auto got = client.get(path);
  if (got) return std::optional<json>(std::move(*got));
  if (got.error().is_not_found()) return std::optional<json>();
  return fail(got.error());
}

std::map<std::string, std::int64_t> pod_usage(const std::vector<json>& pods) {
  std::map<std::string, std::int64_t> used;
  for (const auto& pod : pods) {
    if (kube::pod_is_terminal(pod)) continue;
    for (const auto& [resource, q] : kube::pod_requests(pod)) {
      if (resource.starts_with(kNvidiaResourcePrefix)) used[resource] = kube::saturating_add(used[resource], q.value());
    }
  }
  return used;
}

Result<ApplyResult> apply_one(kube::Client& client, const json& desired, bool client_dry_run,
                              const kube::WriteOptions& options) {
  const std::string kind = kube::string_field(desired, "kind");
  const std::string ns = kube::namespace_of(desired);
  const std::string name = kube::name_of(desired);
  ApplyResult out;
  auto applied = retry_on_conflict(kMaxAttempts, out.conflicts, [&](int) -> Result<void> {
    // Every attempt reads afresh: after a conflict somebody else created or changed the object.
    GPUCTL_TRY_ASSIGN(std::optional<json> existing, get_optional(client, path_of(kind, ns, name)));
    GPUCTL_TRY_ASSIGN(out.plan, plan_managed_object(desired, existing));
    if (client_dry_run || out.plan.action == ApplyAction::unchanged) {
      out.result = out.plan.object;
      return {};
    }
    GPUCTL_TRY_ASSIGN(out.result, out.plan.action == ApplyAction::create
                                      ? client.create(path_of(kind, ns, ""), out.plan.object, options)
                                      : client.replace(path_of(kind, ns, name), out.plan.object, options));
    return {};
  });
  if (!applied) return fail(applied.error().with_context(fmt::format("{} {}/{}", lowercase(kind), ns, name)));
  return out;
}

}  // namespace

std::string namespace_name_problem(std::string_view name) {
  if (name.empty()) return "a namespace name must not be empty";
  if (name.size() > 63) return fmt::format("must be no more than 63 characters (has {})", name.size());
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : name) {
    if (!alnum(c) && c != '-') {
      return "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
    }
  }
  if (!alnum(name.front()) || !alnum(name.back())) {
    return "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
  }
  return {};
}

Result<QuotaSpec> parse_quota_spec(std::string_view namespace_name, std::string_view gpus,
                                   std::optional<std::string_view> max_per_pod,
                                   const std::vector<std::string>& resources) {
  QuotaSpec spec;
  if (auto p = namespace_name_problem(namespace_name); !p.empty()) {
    return fail(Errc::invalid_argument, fmt::format("namespace \"{}\": {}", namespace_name, p));
  }
  spec.namespace_name = std::string(namespace_name);
  auto n = parse_count(gpus);
  if (!n) {
    return fail(Errc::invalid_argument,
                fmt::format("--gpus \"{}\": give the number of GPUs the namespace may request in all, a whole number "
                            "of 0 or more (e.g. --gpus 8)", gpus));
  }
  spec.gpus = *n;
  if (max_per_pod) {
    auto m = parse_count(*max_per_pod);
    if (!m) {
      return fail(Errc::invalid_argument,
                  fmt::format("--max-per-pod \"{}\": give the most GPUs one pod may request, a whole number of 0 or "
                              "more (e.g. --max-per-pod 4)", *max_per_pod));
    }
    spec.max_per_pod = *m;
  }
  std::set<std::string> seen;
  for (const auto& r : resources) {
    auto eq = r.find('=');
    if (eq == std::string::npos) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": expected NAME=COUNT, e.g. --resource nvidia.com/mig-1g.10gb=4", r));
    }
    std::string name = r.substr(0, eq);
    std::string value = r.substr(eq + 1);
    for (std::string_view prefix : {"requests.", "limits."}) {
      if (name.starts_with(prefix)) {
        return fail(Errc::invalid_argument,
                    fmt::format("--resource \"{}\": give the resource name without the \"{}\" prefix (--resource {}={}); "
                                "gpuctl writes the requests. key, the only one Kubernetes enforces",
                                r, prefix, name.substr(prefix.size()), value));
      }
    }
    if (name == kGpuResource) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": whole GPUs are set with --gpus {}", r, value.empty() ? "N" : value));
    }
    auto slash = name.find('/');
    std::string problem = qualified_name_problem(name);
    if (slash == std::string::npos || !problem.empty() || name.starts_with("kubernetes.io/") ||
        name.find(".kubernetes.io/") != std::string::npos) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": \"{}\" is not an extended resource name (a qualified name such as "
                              "nvidia.com/mig-1g.10gb){}", r, name, problem.empty() ? "" : ": " + problem));
    }
    auto k = parse_count(value);
    if (!k) {
      return fail(Errc::invalid_argument,
                  fmt::format("--resource \"{}\": the count \"{}\" must be a whole number of 0 or more "
                              "(extended resources are counted in integers)", r, value));
    }
    if (!seen.insert(name).second) {
      return fail(Errc::invalid_argument, fmt::format("--resource {} is given twice: give each resource once", name));
    }
    spec.resources.emplace_back(name, *k);
  }
  std::sort(spec.resources.begin(), spec.resources.end());
  return spec;
}

json build_gpu_quota(const QuotaSpec& spec) {
  json hard = json::object();
  hard[kRequests + std::string(kGpuResource)] = std::to_string(spec.gpus);
  for (const auto& [name, count] : spec.resources) hard[kRequests + name] = std::to_string(count);
  return {{"apiVersion", "v1"},
          {"kind", "ResourceQuota"},
          {"metadata",
           {{"name", kGpuQuotaName},
            {"namespace", spec.namespace_name},
            {"labels", {{kManagedByLabel, kManagedByValue}}}}},
          {"spec", {{"hard", hard}}}};
}

json build_gpu_limit_range(const QuotaSpec& spec) {
  const std::string m = std::to_string(spec.max_per_pod.value_or(0));
  const std::string gpu(kGpuResource);
  return {{"apiVersion", "v1"},
          {"kind", "LimitRange"},
          {"metadata",
           {{"name", kGpuLimitRangeName},
            {"namespace", spec.namespace_name},
            {"labels", {{kManagedByLabel, kManagedByValue}}}}},
          {"spec",
           {{"limits",
             json::array({{{"type", "Container"}, {"max", {{gpu, m}}}, {"default", {{gpu, "0"}}}, {"defaultRequest", {{gpu, "0"}}}},
                          {{"type", "Pod"}, {"max", {{gpu, m}}}}})}}}};
}

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
    return fail(Errc::invalid_argument,
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

std::vector<std::string> below_use_warnings(const QuotaSpec& spec, const std::map<std::string, std::int64_t>& used) {
  std::vector<std::pair<std::string, std::int64_t>> wanted = {{std::string(kGpuResource), spec.gpus}};
  wanted.insert(wanted.end(), spec.resources.begin(), spec.resources.end());
  std::vector<std::string> out;
  for (const auto& [resource, hard] : wanted) {
    auto it = used.find(resource);
    if (it == used.end() || it->second <= hard) continue;
    out.push_back(fmt::format("namespace {} already uses {} {}{}, more than the new quota of {}: running pods stay, "
                              "new pods asking for {} are refused until fewer than {} are in use",
                              spec.namespace_name, it->second, kRequests, resource, hard, resource,
                              std::max<std::int64_t>(hard, 1)));
  }
  return out;
}

Result<SetResult> set_quota(kube::Client& client, const QuotaSpec& spec, DryRun dry_run) {
  const bool client_dry_run = dry_run == DryRun::client;
  const kube::WriteOptions options = write_options(dry_run);
  SetResult out;
  // Current use: the controller's count when it has one for every key, else the pods'.
  const std::string quota_path = kube::paths::resource_quota(spec.namespace_name, kGpuQuotaName);
  GPUCTL_TRY_ASSIGN(std::optional<json> existing, get_optional(client, quota_path));
  std::map<std::string, std::int64_t> used;
  bool counted = existing && existing->contains("/status/used"_json_pointer);
  std::vector<std::string> resources = {std::string(kGpuResource)};
  for (const auto& [name, count] : spec.resources) resources.push_back(name);
  for (const auto& r : resources) {
    if (!counted) break;
    const json& u = existing->at("/status/used"_json_pointer);
    if (!u.contains(kRequests + r)) {
      counted = false;
      break;
    }
    auto q = kube::Quantity::parse(qstr(u[kRequests + r]));
    used[r] = q ? q->value() : 0;
  }
  if (!counted) {
    kube::ListOptions running;
    running.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
    GPUCTL_TRY_ASSIGN(kube::ListResult pods, client.list(kube::paths::pods(spec.namespace_name), running));
    used = pod_usage(pods.items);
  }
  out.warnings = below_use_warnings(spec, used);

  GPUCTL_TRY_ASSIGN(ApplyResult quota, apply_one(client, build_gpu_quota(spec), client_dry_run, options));
  out.objects.push_back(std::move(quota));
  if (spec.max_per_pod) {
    auto limits = apply_one(client, build_gpu_limit_range(spec), client_dry_run, options);
    if (!limits) {
      return fail(limits.error().with_context(
          fmt::format("resourcequota/{} {}, but the LimitRange failed", kGpuQuotaName, to_string(out.objects[0].plan.action))));
    }
    out.objects.push_back(std::move(*limits));
  }
  return out;
}

std::optional<FixPlan> plan_quota_fix(const json& quota) {
  auto findings = check_quota_keys(quota);
  if (findings.empty()) return std::nullopt;
  FixPlan plan;
  plan.namespace_name = kube::namespace_of(quota);
  plan.quota = kube::name_of(quota);
  plan.object = writable(quota);
  json& hard = plan.object["spec"]["hard"];
  for (const auto& f : findings) {
    const std::string value = qstr(hard[f.key]);
    hard.erase(f.key);
    if (!hard.contains(f.replacement)) {
      hard[f.replacement] = value;
      plan.changes.push_back(fmt::format("{}={} -> {}={}", f.key, value, f.replacement, value));
      continue;
    }
    const std::string kept = qstr(hard[f.replacement]);
    auto a = kube::Quantity::parse(value);
    auto b = kube::Quantity::parse(kept);
    if (a && b && *a < *b) {
      hard[f.replacement] = value;
      plan.changes.push_back(fmt::format("{}={} -> {}={} (stricter than {}={})", f.key, value, f.replacement, value,
                                         f.replacement, kept));
    } else {
      plan.changes.push_back(fmt::format("{}={} removed ({}={} is as strict or stricter)", f.key, value, f.replacement, kept));
    }
  }
  plan.findings = std::move(findings);
  return plan;
}

std::size_t FixResult::failed() const {
  return static_cast<std::size_t>(std::count_if(items.begin(), items.end(), [](const FixItem& i) { return i.error.has_value(); }));
}

Result<FixResult> fix_quotas(kube::Client& client, std::string_view namespace_name, DryRun dry_run) {
  const bool client_dry_run = dry_run == DryRun::client;
  const kube::WriteOptions options = write_options(dry_run);
  GPUCTL_TRY_ASSIGN(kube::ListResult quotas, client.list(kube::paths::resource_quotas(namespace_name)));
  FixResult out;
  for (std::size_t i = 0; i < quotas.items.size(); ++i) {
    const json& quota = quotas.items[i];
    if (auto problem = kube::quota_shape_problem(quota); !problem.empty()) {
      // Never rewritten: what gpuctl cannot read it must not replace. Named, exit 1.
      FixItem item;
      item.plan.namespace_name = kube::namespace_of(quota);
      item.plan.quota = kube::name_of(quota);
      item.error = fail(Errc::parse, fmt::format("{} skipped: {}", kube::object_label("resourcequota", quota, i), problem)).error();
      out.items.push_back(std::move(item));
      continue;
    }
    auto plan = plan_quota_fix(quota);
    if (!plan) continue;
    FixItem item;
    item.plan = std::move(*plan);
    if (client_dry_run) {
      item.result = item.plan.object;
      out.items.push_back(std::move(item));
      continue;
    }
    const std::string path = kube::paths::resource_quota(item.plan.namespace_name, item.plan.quota);
    auto fixed = retry_on_conflict(kMaxAttempts, item.conflicts, [&](int attempt) -> Result<void> {
      if (attempt > 0) {
        // Changed since the list: read it again and plan again (it may need no fix any more).
        GPUCTL_TRY_ASSIGN(json fresh, client.get(path));
        auto again = plan_quota_fix(fresh);
        if (!again) {
          item.result = std::move(fresh);
          item.plan.changes = {"already fixed by someone else"};
          return {};
        }
        item.plan = std::move(*again);
      }
      GPUCTL_TRY_ASSIGN(item.result, client.replace(path, item.plan.object, options));
      return {};
    });
    if (!fixed) item.error = fixed.error();
    out.items.push_back(std::move(item));
  }
  return out;
}

Result<DeleteResult> delete_quota(kube::Client& client, std::string_view namespace_name, DryRun dry_run) {
  const bool client_dry_run = dry_run == DryRun::client;
  const kube::WriteOptions options = write_options(dry_run);
  DeleteResult out;
  out.namespace_name = std::string(namespace_name);
  std::vector<std::string> not_ours;
  for (auto [kind, name] : {std::pair<std::string, std::string_view>{"ResourceQuota", kGpuQuotaName},
                            std::pair<std::string, std::string_view>{"LimitRange", kGpuLimitRangeName}}) {
    const std::string path = path_of(kind, namespace_name, name);
    GPUCTL_TRY_ASSIGN(std::optional<json> existing, get_optional(client, path));
    DeleteItem item{kind, std::string(name), false};
    if (existing && kube::label_of(*existing, kManagedByLabel) != std::string(kManagedByValue)) {
      not_ours.push_back(fmt::format("{}/{}", lowercase(kind), name));
      existing.reset();
    }
    if (existing) {
      if (client_dry_run) {
        item.deleted = true;
      } else {
        json preconditions = {{"preconditions", {{"uid", kube::string_field(kube::field(*existing, "metadata"), "uid")}}}};
        auto removed = client.remove(path, preconditions, options);
        if (removed) {
          item.deleted = true;
        } else if (!removed.error().is_not_found()) {
          return fail(removed.error().with_context(fmt::format("deleting {}/{} in namespace {}", lowercase(kind), name, namespace_name)));
        }
      }
    }
    out.items.push_back(std::move(item));
  }
  if (std::any_of(out.items.begin(), out.items.end(), [](const DeleteItem& i) { return i.deleted; })) return out;

  // Nothing of gpuctl's: say what is there instead.
  std::vector<std::string> others = not_ours;
  if (auto quotas = client.list(kube::paths::resource_quotas(namespace_name))) {
    for (const auto& q : quotas->items) {
      if (kube::name_of(q) != kGpuQuotaName) others.push_back("resourcequota/" + kube::name_of(q));
    }
  }
  Error e;
  e.code = Errc::api;
  e.http_status = 404;
  e.reason = "NotFound";
  e.message = fmt::format("namespace {} has no gpuctl quota (no resourcequota/{} or limitrange/{} with label {}={})",
                          namespace_name, kGpuQuotaName, kGpuLimitRangeName, kManagedByLabel, kManagedByValue);
  if (others.empty()) {
    e.message += "; it has no other quota either";
  } else {
    e.message += fmt::format("; gpuctl leaves objects it did not create alone: {} (delete them with kubectl delete -n {} ...)",
                             fmt::join(others, ", "), namespace_name);
  }
  return fail(std::move(e));
}

}  // namespace gpuctl::ops
