// Running a restore: kind by kind in the table's order, each kind's live objects listed once,
// every object planned (restore_plan.cpp) and then applied in parallel; one object's failure
// never stops the others, and Ctrl-C stops before the next object, never inside one.
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"
#include "gpuctl/ops/restore/restore.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/parallel.hpp"
#include "restore_internal.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

using restore_detail::api_path_of;
using restore_detail::api_version_of;
using Key = restore_detail::LiveKey;

// `conflict with "kubectl-edit" using v1` -> kubectl-edit
std::string manager_in(std::string_view message) {
  const auto open = message.find('"');
  if (open == std::string_view::npos) return std::string(message);
  const auto close = message.find('"', open + 1);
  return std::string(
      message.substr(open + 1, close == std::string_view::npos ? std::string_view::npos : close - open - 1));
}

std::vector<ManagerConflict> conflicts_of(const Error& error) {
  std::vector<ManagerConflict> out;
  for (const auto& c : error.causes) {
    if (c.type == "FieldManagerConflict" || c.message.starts_with("conflict with")) {
      out.push_back({manager_in(c.message), c.field});
    }
  }
  return out;
}

// Removes from a node's apply body the fields the server named in conflicts
// (".metadata.labels.nvidia.com/gpu.product", ".spec.unschedulable"); false when one of them is
// not a field the body sets, so the request cannot be narrowed.
bool drop_conflicting_fields(json& body, const std::vector<ManagerConflict>& conflicts) {
  for (const auto& c : conflicts) {
    bool dropped = false;
    for (const char* map : {"labels", "annotations"}) {
      const std::string prefix = fmt::format(".metadata.{}.", map);
      if (c.field.starts_with(prefix) && body["metadata"].contains(map)) {
        dropped = body["metadata"][map].erase(c.field.substr(prefix.size())) > 0;
      }
    }
    if (c.field == ".spec.unschedulable" && body.contains("spec")) dropped = body["spec"].erase("unschedulable") > 0;
    if (!dropped) return false;
  }
  return true;
}

bool body_is_empty_node(const json& body) {
  const json& meta = body["metadata"];
  const bool labels = meta.contains("labels") && !meta["labels"].empty();
  const bool annotations = meta.contains("annotations") && !meta["annotations"].empty();
  return !labels && !annotations && !(body.contains("spec") && !body["spec"].empty());
}

class Restorer {
 public:
  Restorer(kube::Client& client, const RestoreSource& source, const RestoreOptions& options, RestoreReport& report)
      : client_(client), options_(options), report_(report) {
    for (const auto& o : source.objects) {
      if (!in_scope(o, options.scope)) continue;
      scoped_.push_back(&o);
      if (o.kind->resource == "persistentvolumeclaims") restored_claims_.emplace(o.namespace_name, o.name);
    }
  }

  Result<void> run() {
    GPUCTL_TRY(read_live_claims());
    for (const auto& kind : backup_kinds()) {
      std::vector<const BackupObject*> objects;
      for (const BackupObject* o : scoped_) {
        if (o->kind == &kind) objects.push_back(o);
      }
      if (objects.empty()) continue;
      if (util::cancelled()) {
        report_.interrupted = true;
        break;
      }
      restore_kind(kind, objects);
      if (report_.interrupted) break;
    }
    if (report_.interrupted) name_not_started();
    return {};
  }

 private:
  // After Ctrl-C: the objects in scope that were never reached, for the report.
  void name_not_started() {
    std::set<std::tuple<const BackupKind*, std::string, std::string>> reached;
    for (const auto& item : report_.items) reached.emplace(item.kind, item.namespace_name, item.name);
    for (const BackupObject* o : scoped_) {
      if (reached.contains({o->kind, o->namespace_name, o->name})) continue;
      report_.not_started.push_back(o->label());
    }
  }

  Result<void> read_live_claims() {
    if (std::ranges::none_of(scoped_, [](const BackupObject* o) { return o->kind->resource == "persistentvolumes"; }))
      return {};
    GPUCTL_TRY_ASSIGN(auto claims, client_.list(kube::paths::persistent_volume_claims()));
    for (const auto& c : claims.items)
      live_claims_[{kube::namespace_of(c), kube::name_of(c)}] = kube::string_field(kube::field(c, "metadata"), "uid");
    return {};
  }

  PlanContext context() const {
    PlanContext c;
    c.live_claim_uid = [this](const std::string& ns, const std::string& name) -> std::optional<std::string> {
      auto it = live_claims_.find({ns, name});
      return it == live_claims_.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    c.restores_claim = [this](const std::string& ns, const std::string& name) {
      return restored_claims_.contains({ns, name});
    };
    return c;
  }

  void restore_kind(const BackupKind& kind, const std::vector<const BackupObject*>& objects) {
    progress(fmt::format("restoring {} {}", objects.size(), kind.folder()));
    const std::string api_version = api_version_of(*objects.front());
    auto live = restore_detail::list_live(client_, kind, api_version, options_.scope.namespace_name);
    std::vector<RestoreItem> items(objects.size());
    std::vector<RestorePlan> plans(objects.size());
    std::vector<char> planned(objects.size(), 0);  // not for a kind that could not be listed
    for (std::size_t i = 0; i < objects.size(); ++i) {
      RestoreItem& item = items[i];
      item.kind = &kind;
      item.namespace_name = objects[i]->namespace_name;
      item.name = objects[i]->name;
      if (!live) {
        item.action = RestoreAction::skip;
        item.result = RestoreResult::failed;
        item.error = fmt::format("cannot list {}: {}", kind.folder(), live.error().message);
        continue;
      }
      if (!*live) {
        item.action = RestoreAction::skip;
        item.result = RestoreResult::skipped;
        item.reason = fmt::format("kind not served by this cluster ({} {})", api_version, kind.kind);
        continue;
      }
      auto found = (*live)->find({item.namespace_name, item.name});
      std::optional<json> now;
      if (found != (*live)->end()) now = found->second;
      plans[i] = plan_restore(*objects[i], now, context());
      planned[i] = 1;
      item.action = plans[i].action;
      item.reason = plans[i].reason;
      item.changes = plans[i].changes;
      if (kind.resource == "nodes" && !now) report_.missing_nodes.push_back(item.name);
      if (kind.resource == "namespaces" && item.action == RestoreAction::create) created_namespaces_.insert(item.name);
    }
    const std::size_t started = util::parallel_for(
        objects.size(), options_.max_parallel,
        [&](std::size_t i) {
          if (planned[i]) apply(*objects[i], plans[i], items[i]);
        },
        [] { return !util::cancelled(); });
    if (started < objects.size()) {
      report_.interrupted = true;
      items.resize(started);
    }
    for (auto& item : items) {
      if (options_.on_item) options_.on_item(item);
      report_.items.push_back(std::move(item));
    }
  }

  void apply(const BackupObject& object, const RestorePlan& plan, RestoreItem& item) {
    switch (plan.action) {
      case RestoreAction::unchanged: item.result = RestoreResult::unchanged; return;
      case RestoreAction::skip: item.result = RestoreResult::skipped; return;
      case RestoreAction::create:
      case RestoreAction::update: break;
    }
    if (options_.dry_run == DryRun::client) {
      item.result = RestoreResult::planned;
      return;
    }
    if (options_.dry_run == DryRun::server && object.kind->namespaced &&
        created_namespaces_.contains(object.namespace_name)) {
      // The server cannot check an object in a namespace a dry run did not create.
      item.result = RestoreResult::planned;
      item.reason =
          fmt::format("namespace {} is created first; the server checks this object only then", object.namespace_name);
      return;
    }
    const std::string path = api_path_of(object);
    if (!plan.guarded_patch.is_null()) {
      if (auto sent = send_guarded_patch(object, path, plan); !sent) return failed(item, sent.error());
    }
    if (!plan.apply.is_null()) {
      if (auto sent = send_apply(object, path, plan.apply, item); !sent) return failed(item, sent.error());
    }
    if (item.result != RestoreResult::conflict)
      item.result = options_.dry_run == DryRun::none ? RestoreResult::applied : RestoreResult::planned;
  }

  // The merge patch carries the resourceVersion it was planned on: a 409 means the object
  // changed in between, so it is read and planned again (ops::retry_on_conflict).
  Result<void> send_guarded_patch(const BackupObject& object, const std::string& path, const RestorePlan& first) {
    int conflicts = 0;
    return retry_on_conflict(3, conflicts, [&](int attempt) -> Result<void> {
      json patch = first.guarded_patch;
      if (attempt > 0) {
        GPUCTL_TRY_ASSIGN(json live, client_.get(path));
        patch = plan_restore(object, live, context()).guarded_patch;
        if (patch.is_null()) return {};  // somebody else did it meanwhile
      }
      GPUCTL_TRY(client_.patch(path, kube::PatchType::merge, patch, write_options(options_.dry_run)));
      return {};
    });
  }

  // Server-side apply. A node's fields another manager owns are left to it and named as
  // conflicts, and the rest of the node is applied without them: a label someone else wrote
  // must not keep the cordon and the other labels from coming back.
  Result<void> send_apply(const BackupObject& object, const std::string& path, json body, RestoreItem& item) {
    kube::WriteOptions write = write_options(options_.dry_run);
    write.force = options_.force_conflicts;
    auto applied = client_.patch(path, kube::PatchType::apply, body, write);
    if (applied || object.kind->resource != "nodes" || !applied.error().is_conflict()) {
      return applied ? Result<void>() : std::unexpected(applied.error());
    }
    item.conflicts = conflicts_of(applied.error());
    if (item.conflicts.empty() || !drop_conflicting_fields(body, item.conflicts))
      return std::unexpected(applied.error());
    item.result = RestoreResult::conflict;
    item.error = applied.error().message;
    if (body_is_empty_node(body)) return {};
    auto rest = client_.patch(path, kube::PatchType::apply, body, write);
    return rest ? Result<void>() : std::unexpected(rest.error());
  }

  static void failed(RestoreItem& item, const Error& error) {
    item.conflicts = error.is_conflict() ? conflicts_of(error) : std::vector<ManagerConflict>{};
    item.result = item.conflicts.empty() ? RestoreResult::failed : RestoreResult::conflict;
    item.error = error.message;
  }

  void progress(const std::string& what) const {
    if (options_.on_progress) options_.on_progress(what);
  }

  kube::Client& client_;
  const RestoreOptions& options_;
  RestoreReport& report_;
  std::vector<const BackupObject*> scoped_;
  std::set<Key> restored_claims_;
  std::map<Key, std::string> live_claims_;
  std::set<std::string> created_namespaces_;
};

}  // namespace

namespace restore_detail {

Result<std::optional<LiveObjects>> list_live(kube::Client& client, const BackupKind& kind,
                                             const std::string& api_version, const std::string& namespace_name) {
  const std::string ns = kind.namespaced ? namespace_name : "";
  auto list = client.list(kube::paths::resources(api_version, kind.resource, kind.namespaced, ns));
  if (!list) {
    if (list.error().is_not_found()) return std::optional<LiveObjects>();
    return std::unexpected(list.error());
  }
  LiveObjects out;
  for (auto& item : list->items) {
    LiveKey key{kind.namespaced ? kube::namespace_of(item) : "", kube::name_of(item)};
    out.emplace(std::move(key), std::move(item));
  }
  return std::optional<LiveObjects>(std::move(out));
}

std::string api_version_of(const BackupObject& o) { return kube::string_field(o.object, "apiVersion"); }

std::string api_path_of(const BackupObject& o) {
  return kube::paths::resource(api_version_of(o), o.kind->resource, o.kind->namespaced, o.namespace_name, o.name);
}

}  // namespace restore_detail

Result<RestoreReport> restore(kube::Client& client, const RestoreSource& source, const RestoreOptions& options) {
  GPUCTL_TRY(check_target_cluster(source.manifest, client.config().server, options.to_other_cluster));
  RestoreReport report;
  report.dry_run = options.dry_run;
  report.source = source.source;
  report.ignored = source.ignored;
  const auto started = std::chrono::system_clock::now();
  Restorer restorer(client, source, options, report);
  GPUCTL_TRY(restorer.run());
  if (options.verify && options.dry_run == DryRun::none && !report.interrupted) {
    report.verify = verify_restore(client, source, report, options, started);
    // Checks cut short by Ctrl-C read as failures; the report says what really happened.
    if (util::cancelled()) report.interrupted = true;
  }
  return report;
}

}  // namespace gpuctl::ops
