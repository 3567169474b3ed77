// Reading the cluster for a backup: every kind of the table listed once (optional kinds only
// where discovery says the cluster serves them), narrowed to what an admin restores (GPU Jobs
// that have not finished, the device plugin's DaemonSets and the ConfigMaps and Secrets they and
// the Jobs reference), and stripped to what recreates each object.
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/discovery.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/util/cancel.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

std::string group_version_of(const BackupKind& kind, std::string_view version) {
  return kind.group.empty() ? std::string(version) : fmt::format("{}/{}", kind.group, version);
}

bool finished(const json& job) {
  for (const auto& c : kube::array_field(kube::field(job, "status"), "conditions")) {
    const std::string type = kube::string_field(c, "type");
    if ((type == "Complete" || type == "Failed") && kube::string_field(c, "status") == "True") return true;
  }
  return false;
}

// The ConfigMaps and Secrets a pod template reads: volumes (also projected), env, envFrom and
// image pull secrets.
struct References {
  std::set<std::pair<std::string, std::string>> config_maps;  // (namespace, name)
  std::set<std::pair<std::string, std::string>> secrets;
};

void add_container_references(const json& container, const std::string& ns, References& refs) {
  for (const auto& env : kube::array_field(container, "env")) {
    const json& from = kube::field(env, "valueFrom");
    if (auto n = kube::string_field(kube::field(from, "configMapKeyRef"), "name"); !n.empty())
      refs.config_maps.emplace(ns, n);
    if (auto n = kube::string_field(kube::field(from, "secretKeyRef"), "name"); !n.empty()) refs.secrets.emplace(ns, n);
  }
  for (const auto& from : kube::array_field(container, "envFrom")) {
    if (auto n = kube::string_field(kube::field(from, "configMapRef"), "name"); !n.empty())
      refs.config_maps.emplace(ns, n);
    if (auto n = kube::string_field(kube::field(from, "secretRef"), "name"); !n.empty()) refs.secrets.emplace(ns, n);
  }
}

void add_template_references(const json& owner, References& refs) {
  const std::string ns = kube::namespace_of(owner);
  const json& spec = kube::field_at(owner, {"spec", "template", "spec"});
  for (const auto& volume : kube::array_field(spec, "volumes")) {
    if (auto n = kube::string_field(kube::field(volume, "configMap"), "name"); !n.empty())
      refs.config_maps.emplace(ns, n);
    if (auto n = kube::string_field(kube::field(volume, "secret"), "secretName"); !n.empty())
      refs.secrets.emplace(ns, n);
    for (const auto& source : kube::array_field(kube::field(volume, "projected"), "sources")) {
      if (auto n = kube::string_field(kube::field(source, "configMap"), "name"); !n.empty())
        refs.config_maps.emplace(ns, n);
      if (auto n = kube::string_field(kube::field(source, "secret"), "name"); !n.empty()) refs.secrets.emplace(ns, n);
    }
  }
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : kube::array_field(spec, list)) add_container_references(c, ns, refs);
  }
  for (const auto& s : kube::array_field(spec, "imagePullSecrets")) {
    if (auto n = kube::string_field(s, "name"); !n.empty()) refs.secrets.emplace(ns, n);
  }
}

// Is the listed object one an admin restores? Built-in PriorityClasses, the per-namespace root
// CA ConfigMap and service account tokens are the server's own; claims made for pods, theirs.
bool wanted(const BackupKind& kind, const json& object, const BackupOptions& options, BackupContents& out) {
  if (kind.resource == "priorityclasses") return !kube::name_of(object).starts_with("system-");
  if (kind.resource == "resourceclaims") return claim_left_out_reason(object).empty();
  if (kind.resource == "daemonsets") return looks_like_device_plugin(object);
  if (kind.resource == "jobs") {
    if (!options.all_jobs && !job_requests_gpu(object)) return false;
    if (finished(object)) {
      ++out.finished_jobs_left_out;
      return false;
    }
  }
  return true;
}

class Collector {
 public:
  Collector(kube::Client& client, const BackupOptions& options, BackupContents& out)
      : client_(client), options_(options), out_(out) {}

  // Lists one kind into out_.objects; a 403 is a gap (or the error), a 404 "not served".
  Result<void> collect_kind(const BackupKind& kind) {
    std::string version(kind.version);
    if (kind.optional) {
      GPUCTL_TRY_ASSIGN(version, kube::served_version(client_, kind.group, kind.resource));
      if (version.empty()) {
        out_.not_served.push_back(kind.folder());
        return {};
      }
    }
    progress(fmt::format("listing {}", kind.folder()));
    auto list = client_.list(kube::paths::resources(group_version_of(kind, version), kind.resource, kind.namespaced));
    if (!list) return gap_or_error(kind, list.error());
    for (auto& item : list->items) {
      if (!wanted(kind, item, options_, out_)) continue;
      if (kind.resource == "daemonsets" || kind.resource == "jobs") add_template_references(item, refs_);
      add(kind, version, std::move(item));
    }
    return {};
  }

  // Reads each referenced ConfigMap (and Secret, when asked) by name: listing every Secret of
  // the cluster would need more rights than a backup of GPU state should.
  Result<void> collect_references() {
    GPUCTL_TRY(collect_named(*find_backup_kind("configmaps"), refs_.config_maps));
    if (options_.include_secrets) GPUCTL_TRY(collect_named(*find_backup_kind("secrets"), refs_.secrets));
    return {};
  }

 private:
  Result<void> collect_named(const BackupKind& kind, const std::set<std::pair<std::string, std::string>>& names) {
    if (!names.empty()) progress(fmt::format("reading {} {}", names.size(), kind.folder()));
    for (const auto& [ns, name] : names) {
      if (util::cancelled()) return fail(Errc::cancelled, "backup interrupted; nothing was written");
      auto object = client_.get(kube::paths::resource("v1", kind.resource, true, ns, name));
      if (!object) {
        if (object.error().is_not_found()) continue;  // referenced, never created: nothing to keep
        return gap_or_error(kind, object.error());
      }
      if (kind.resource == "secrets" && kube::string_field(*object, "type") == "kubernetes.io/service-account-token")
        continue;
      add(kind, "v1", std::move(*object));
    }
    return {};
  }

  void add(const BackupKind& kind, std::string_view version, json item) {
    BackupObject o;
    o.kind = &kind;
    o.name = kube::name_of(item);
    if (kind.namespaced) o.namespace_name = kube::namespace_of(item);
    // A list's items carry neither apiVersion nor kind; the archive's files must, to be
    // readable on their own and by kubectl.
    item["apiVersion"] = group_version_of(kind, version);
    item["kind"] = kind.kind;
    o.object = strip_for_backup(kind, std::move(item), options_.node_key_prefixes);
    out_.objects.push_back(std::move(o));
  }

  Result<void> gap_or_error(const BackupKind& kind, const Error& error) {
    if (error.is_not_found()) {
      out_.not_served.push_back(kind.folder());
      return {};
    }
    if (!error.is_forbidden()) return std::unexpected(error.with_context(fmt::format("listing {}", kind.folder())));
    const std::string& reason = error.message;
    if (!options_.allow_partial) {
      return fail(Errc::api, fmt::format("cannot read {} ({}); nothing was written: grant list/get on it, or pass "
                                         "--allow-partial to record the gap in the manifest",
                                         kind.folder(), reason));
    }
    out_.gaps.push_back({kind.folder(), reason});
    return {};
  }

  void progress(const std::string& what) {
    if (options_.on_progress) options_.on_progress(what);
  }

  kube::Client& client_;
  const BackupOptions& options_;
  BackupContents& out_;
  References refs_;
};

}  // namespace

Result<BackupContents> collect_backup(kube::Client& client, const BackupOptions& options,
                                      std::string_view context_name) {
  BackupContents out;
  out.cluster.server = client.config().server;
  out.cluster.context = std::string(context_name);
  GPUCTL_TRY_ASSIGN(json version, client.get("/version"));
  out.cluster.version = kube::string_field(version, "gitVersion");

  Collector collector(client, options, out);
  for (const auto& kind : backup_kinds()) {
    if (kind.resource == "configmaps" || kind.resource == "secrets") continue;  // by reference, below
    if (util::cancelled()) return fail(Errc::cancelled, "backup interrupted; nothing was written");
    GPUCTL_TRY(collector.collect_kind(kind));
  }
  GPUCTL_TRY(collector.collect_references());
  return out;
}

}  // namespace gpuctl::ops
