// `restore --verify`: what the seed asks an admin to check after a restore, read back from the
// cluster: claims Bound and no pod failing to mount them since the restore began, quotas counted
// by the quota controller with no key it never enforces, the nodes' archived labels, taints and
// cordons present, the Jobs there. Controllers act asynchronously, so the checks are repeated
// until they pass or the timeout ends.
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "gpuctl/ops/restore/restore.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

std::string object_name(const BackupObject& o) {
  return fmt::format("{} {}{}", o.kind->kind, o.namespace_name.empty() ? "" : o.namespace_name + "/", o.name);
}

std::string path_of(const BackupObject& o) {
  return kube::paths::resource(kube::string_field(o.object, "apiVersion"), o.kind->resource, o.kind->namespaced,
                               o.namespace_name, o.name);
}

VerifyCheck check_claim(const json& claim, const BackupObject& o) {
  const std::string phase = kube::string_field(kube::field(claim, "status"), "phase");
  return {"pvc-bound", object_name(o), phase == "Bound",
          phase == "Bound" ? fmt::format("Bound to {}", kube::string_field(kube::field(claim, "spec"), "volumeName"))
                           : fmt::format("phase {}", phase.empty() ? "unknown" : phase)};
}

// FailedMount events since `started` of the pods that mount the claim.
VerifyCheck check_mounts(kube::Client& client, const BackupObject& o, std::chrono::system_clock::time_point started) {
  VerifyCheck check{"no-failed-mount", object_name(o), true, "no FailedMount event since the restore"};
  auto pods = client.list(kube::paths::pods(o.namespace_name));
  kube::ListOptions failed_mounts;
  failed_mounts.field_selector = "reason=FailedMount";
  auto events = client.list(kube::paths::events(o.namespace_name), failed_mounts);
  if (!pods || !events) {
    check.passed = false;
    check.detail = fmt::format("cannot read pods and events: {}", (!pods ? pods.error() : events.error()).message);
    return check;
  }
  std::set<std::string> mounting;
  for (const auto& p : pods->items) {
    for (const auto& v : kube::array_field(kube::field(p, "spec"), "volumes")) {
      if (kube::string_field(kube::field(v, "persistentVolumeClaim"), "claimName") == o.name)
        mounting.insert(kube::name_of(p));
    }
  }
  for (const auto& e : events->items) {
    const json& involved = kube::field(e, "involvedObject");
    if (kube::string_field(involved, "kind") != "Pod" || !mounting.contains(kube::string_field(involved, "name")))
      continue;
    std::string at = kube::string_field(e, "lastTimestamp");
    if (at.empty()) at = kube::string_field(e, "eventTime");
    auto when = util::parse_rfc3339(at);
    if (when && *when < started) continue;
    check.passed = false;
    check.detail = fmt::format("pod {}: {}", kube::string_field(involved, "name"), kube::string_field(e, "message"));
  }
  return check;
}

VerifyCheck check_quota(const json& quota, const BackupObject& o) {
  VerifyCheck check{"quota-enforced", object_name(o), false, ""};
  if (auto findings = check_quota_keys(quota); !findings.empty()) {
    check.detail = findings.front().message;
    return check;
  }
  const json& hard = kube::field_at(quota, {"spec", "hard"});
  const json& counted = kube::field_at(quota, {"status", "hard"});
  check.passed = hard == counted && kube::field(kube::field(quota, "status"), "used").is_object();
  check.detail = check.passed ? "counted by the quota controller" : "not yet counted by the quota controller";
  return check;
}

VerifyCheck check_node(const json& node, const BackupObject& o) {
  std::vector<std::string> missing;
  const json& labels = kube::field_at(node, {"metadata", "labels"});
  const json& want_labels = kube::field_at(o.object, {"metadata", "labels"});
  if (want_labels.is_object()) {
    for (const auto& [k, v] : want_labels.items()) {
      if (!labels.is_object() || !labels.contains(k) || labels[k] != v) missing.push_back("label " + k);
    }
  }
  const auto taints = kube::node_taints(node);
  for (const auto& want : kube::node_taints(o.object)) {
    const bool present = std::ranges::any_of(taints, [&](const kube::Taint& t) {
      return t.key == want.key && t.effect == want.effect && t.value == want.value;
    });
    if (!present) missing.push_back("taint " + kube::to_string(want));
  }
  if (kube::node_unschedulable(o.object) && !kube::node_unschedulable(node)) missing.push_back("cordon");
  return {"node-state", object_name(o), missing.empty(),
          missing.empty() ? "labels, taints and cordon present" : fmt::format("missing: {}", fmt::join(missing, ", "))};
}

// The check of one restored object against its live state; nullopt for kinds not verified.
std::optional<VerifyCheck> check_object(kube::Client& client, const BackupObject& o) {
  const std::string_view r = o.kind->resource;
  if (r != "persistentvolumeclaims" && r != "resourcequotas" && r != "nodes" && r != "jobs") return std::nullopt;
  auto live = client.get(path_of(o));
  if (!live) {
    const char* check = r == "persistentvolumeclaims" ? "pvc-bound"
                        : r == "resourcequotas"       ? "quota-enforced"
                        : r == "nodes"                ? "node-state"
                                                      : "job-created";
    return VerifyCheck{check, object_name(o), false, live.error().message};
  }
  if (r == "persistentvolumeclaims") return check_claim(*live, o);
  if (r == "resourcequotas") return check_quota(*live, o);
  if (r == "nodes") return check_node(*live, o);
  return VerifyCheck{"job-created", object_name(o), true,
                     fmt::format("exists (uid {})", kube::string_field(kube::field(*live, "metadata"), "uid"))};
}

}  // namespace

std::vector<VerifyCheck> verify_restore(kube::Client& client, const RestoreSource& source, const RestoreReport& report,
                                        const RestoreOptions& options, std::chrono::system_clock::time_point started) {
  // What was restored or found in place; skipped objects (missing nodes, owned Jobs) are not.
  std::vector<const BackupObject*> restored;
  for (const auto& item : report.items) {
    if (item.result != RestoreResult::applied && item.result != RestoreResult::unchanged) continue;
    for (const auto& o : source.objects) {
      if (o.kind == item.kind && o.namespace_name == item.namespace_name && o.name == item.name) restored.push_back(&o);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + options.verify_timeout;
  for (;;) {
    std::vector<VerifyCheck> checks;
    for (const BackupObject* o : restored) {
      if (auto check = check_object(client, *o)) checks.push_back(std::move(*check));
      if (o->kind->resource == "persistentvolumeclaims") checks.push_back(check_mounts(client, *o, started));
    }
    const bool all_passed = std::ranges::all_of(checks, [](const VerifyCheck& c) { return c.passed; });
    if (all_passed || std::chrono::steady_clock::now() >= deadline || util::cancelled()) return checks;
    if (options.on_progress) {
      const auto failing = std::ranges::count_if(checks, [](const VerifyCheck& c) { return !c.passed; });
      options.on_progress(fmt::format("verifying: waiting for {} of {} checks", failing, checks.size()));
    }
    if (!util::sleep_unless_cancelled(std::chrono::seconds(1))) return checks;
  }
}

}  // namespace gpuctl::ops
