// What a restore reads: a gpuctl archive (checked whole before anything is used), or the
// kubectl export the seed tells admins to keep (`kubectl get nodes -o yaml > nodes-backup.yaml`:
// a v1 List; or multi-document YAML, or one object), stripped as a backup would have kept it.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/restore/restore.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

// Documents in one export: `kubectl get -A ... -o yaml` of a large cluster is one List, so this
// bounds only hand-joined multi-document files.
constexpr int kMaxExportDocuments = 100000;

std::string describe(const json& object) {
  const std::string ns = kube::namespace_of(object);
  return fmt::format("{} {}{}", kube::string_field(object, "kind"), ns.empty() ? "" : ns + "/", kube::name_of(object));
}

void add_export_object(json object, RestoreSource& out) {
  // What the cluster makes again by itself (slices, claims made for pods) is named, not restored.
  if (std::string reason = left_out_reason(object); !reason.empty()) {
    out.ignored.push_back(fmt::format("{}: {}", describe(object), reason));
    return;
  }
  const BackupKind* kind = backup_kind_of(object);
  if (kind == nullptr) {
    out.ignored.push_back(fmt::format("{}: gpuctl does not restore this kind", describe(object)));
    return;
  }
  BackupObject o;
  o.kind = kind;
  o.name = kube::name_of(object);
  if (kind->namespaced) o.namespace_name = kube::namespace_of(object);
  if (o.name.empty() || (kind->namespaced && o.namespace_name.empty())) {
    out.ignored.push_back(
        fmt::format("{}: no metadata.name{}", describe(object), kind->namespaced ? " or namespace" : ""));
    return;
  }
  o.object = strip_for_backup(*kind, std::move(object));
  out.objects.push_back(std::move(o));
}

Result<RestoreSource> read_export(std::string_view text, std::string_view source) {
  GPUCTL_TRY_ASSIGN(std::vector<json> documents, kube::parse_manifests(text, source, kMaxExportDocuments));
  RestoreSource out;
  out.source = std::string(source);
  for (auto& doc : documents) {
    if (kube::string_field(doc, "kind").ends_with("List") && doc.contains("items")) {
      if (!doc["items"].is_array()) {
        return fail(Errc::invalid_argument, fmt::format("{}: the List's items is not a list", source));
      }
      for (auto& item : doc["items"]) {
        if (!item.is_object())
          return fail(Errc::invalid_argument, fmt::format("{}: a List item is not an object", source));
        add_export_object(std::move(item), out);
      }
    } else {
      add_export_object(std::move(doc), out);
    }
  }
  // The table's order, as an archive has it.
  auto rank = [](const BackupObject& o) { return o.kind - backup_kinds().data(); };
  std::ranges::stable_sort(out.objects,
                           [&](const BackupObject& a, const BackupObject& b) { return rank(a) < rank(b); });
  if (out.objects.empty()) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: holds nothing gpuctl restores (nodes, namespaces, quotas, limit ranges, classes, "
                            "volumes, claims, Jobs, DaemonSets, ConfigMaps, ...)",
                            source));
  }
  return out;
}

}  // namespace

Result<RestoreSource> read_restore_source(std::string_view bytes, std::string_view source) {
  if (!looks_like_archive(bytes)) return read_export(bytes, source);
  GPUCTL_TRY_ASSIGN(ReadArchive archive, read_backup_archive(bytes, source));
  RestoreSource out;
  out.source = std::string(source);
  out.manifest = std::move(archive.manifest);
  out.objects = std::move(archive.objects);
  return out;
}

Result<void> check_target_cluster(const json& manifest, std::string_view target_server, bool to_other_cluster) {
  if (manifest.is_null() || to_other_cluster) return {};
  const std::string archived = kube::string_field(kube::field(manifest, "cluster"), "server");
  if (archived == target_server) return {};
  return fail(Errc::invalid_argument,
              fmt::format("the archive was taken from {} but the target is {}; restoring one cluster's nodes and "
                          "quotas onto another is refused: pass --to-other-cluster if that is what you mean",
                          archived.empty() ? "an unknown server" : archived, target_server));
}

}  // namespace gpuctl::ops
