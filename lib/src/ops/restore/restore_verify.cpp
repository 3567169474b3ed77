// `restore --verify`: what the seed asks an admin to check after a restore, read back from the
// cluster: claims Bound and no pod failing to mount them since the restore began, quotas counted
// by the quota controller with no key it never enforces, the nodes' archived labels, taints and
// cordons present, the Jobs there. Controllers act asynchronously, so the checks are repeated
// until they pass or the timeout ends.
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "gpuctl/ops/restore/restore.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "restore_internal.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

// What one round of checks reads, each list once: a verified kind's objects, and per namespace
// the pods and FailedMount events the claims' checks look at. A round of thousands of nodes is one
// list, not thousands of GETs.
class RoundReader {
 public:
  RoundReader(kube::Client& client, std::string namespace_name)
      : client_(client), namespace_name_(std::move(namespace_name)) {}

  // The live object, nullptr when absent; the list's error when the kind could not be read.
  Result<const json*> object(const BackupObject& o) {
    auto [it, fresh] = kinds_.try_emplace(o.kind);
    if (fresh) {
      it->second = restore_detail::list_live(client_, *o.kind, restore_detail::api_version_of(o), namespace_name_);
    }
    if (!it->second) return std::unexpected(it->second.error());
    if (!*it->second) return static_cast<const json*>(nullptr);
    auto found = (*it->second)->find({o.namespace_name, o.name});
    return found == (*it->second)->end() ? nullptr : &found->second;
  }

  struct Mounts {
    std::vector<json> pods;
    std::vector<json> failed_mounts;  // events with reason FailedMount
  };
  const Result<Mounts>& mounts(const std::string& ns) {
    auto [it, fresh] = mounts_.try_emplace(ns);
    if (fresh) it->second = read_mounts(ns);
    return it->second;
  }

 private:
  Result<Mounts> read_mounts(const std::string& ns) {
    GPUCTL_TRY_ASSIGN(auto pods, client_.list(kube::paths::pods(ns)));
    kube::ListOptions failed_mounts;
    failed_mounts.field_selector = "reason=FailedMount";
    GPUCTL_TRY_ASSIGN(auto events, client_.list(kube::paths::events(ns), failed_mounts));
    return Mounts{std::move(pods.items), std::move(events.items)};
  }

  kube::Client& client_;
  std::string namespace_name_;
  std::map<const BackupKind*, Result<std::optional<restore_detail::LiveObjects>>> kinds_;
  std::map<std::string, Result<Mounts>> mounts_;
};

VerifyCheck check_claim(const json& claim, const BackupObject& o) {
  const std::string phase = kube::string_field(kube::field(claim, "status"), "phase");
  return {"pvc-bound", o.label(), phase == "Bound",
          phase == "Bound" ? fmt::format("Bound to {}", kube::string_field(kube::field(claim, "spec"), "volumeName"))
                           : fmt::format("phase {}", phase.empty() ? "unknown" : phase)};
}

// FailedMount events since `started` of the pods that mount the claim.
VerifyCheck check_mounts(RoundReader& reader, const BackupObject& o, std::chrono::system_clock::time_point started) {
  VerifyCheck check{"no-failed-mount", o.label(), true, "no FailedMount event since the restore"};
  const auto& read = reader.mounts(o.namespace_name);
  if (!read) {
    check.passed = false;
    check.detail = fmt::format("cannot read pods and events: {}", read.error().message);
    return check;
  }
  std::set<std::string> mounting;
  for (const auto& p : read->pods) {
    for (const auto& v : kube::array_field(kube::field(p, "spec"), "volumes")) {
      if (kube::string_field(kube::field(v, "persistentVolumeClaim"), "claimName") == o.name)
        mounting.insert(kube::name_of(p));
    }
  }
  for (const auto& e : read->failed_mounts) {
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
  VerifyCheck check{"quota-enforced", o.label(), false, ""};
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
  return {"node-state", o.label(), missing.empty(),
          missing.empty() ? "labels, taints and cordon present" : fmt::format("missing: {}", fmt::join(missing, ", "))};
}

// The check of one restored object against its live state; nullopt for kinds not verified.
std::optional<VerifyCheck> check_object(RoundReader& reader, const BackupObject& o) {
  const std::string_view r = o.kind->resource;
  if (r != "persistentvolumeclaims" && r != "resourcequotas" && r != "nodes" && r != "jobs") return std::nullopt;
  auto live = reader.object(o);
  if (!live || *live == nullptr) {
    const char* check = r == "persistentvolumeclaims" ? "pvc-bound"
                        : r == "resourcequotas"       ? "quota-enforced"
                        : r == "nodes"                ? "node-state"
                                                      : "job-created";
    return VerifyCheck{check, o.label(), false, live ? "not found" : live.error().message};
  }
  if (r == "persistentvolumeclaims") return check_claim(**live, o);
  if (r == "resourcequotas") return check_quota(**live, o);
  if (r == "nodes") return check_node(**live, o);
  return VerifyCheck{"job-created", o.label(), true,
                     fmt::format("exists (uid {})", kube::string_field(kube::field(**live, "metadata"), "uid"))};
}

}  // namespace

std::vector<VerifyCheck> verify_restore(kube::Client& client, const RestoreSource& source, const RestoreReport& report,
                                        const RestoreOptions& options, std::chrono::system_clock::time_point started) {
  // What was restored or found in place; skipped objects (missing nodes, owned Jobs) are not.
  std::set<std::tuple<const BackupKind*, std::string, std::string>> in_place;
  for (const auto& item : report.items) {
    if (item.result == RestoreResult::applied || item.result == RestoreResult::unchanged)
      in_place.emplace(item.kind, item.namespace_name, item.name);
  }
  std::vector<const BackupObject*> restored;
  for (const auto& o : source.objects) {
    if (in_place.contains({o.kind, o.namespace_name, o.name})) restored.push_back(&o);
  }
  const auto deadline = std::chrono::steady_clock::now() + options.verify_timeout;
  for (;;) {
    std::vector<VerifyCheck> checks;
    RoundReader reader(client, options.scope.namespace_name);
    for (const BackupObject* o : restored) {
      if (auto check = check_object(reader, *o)) checks.push_back(std::move(*check));
      if (o->kind->resource == "persistentvolumeclaims") checks.push_back(check_mounts(reader, *o, started));
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
