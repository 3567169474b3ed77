// The archive: manifest.yaml first, then one YAML file per object; and reading one back, which
// trusts nothing in it until every file's checksum matches its manifest.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpuctl/build_info.hpp"
#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/output/yaml.hpp"
#include "gpuctl/util/sha256.hpp"
#include "gpuctl/util/tar_gz.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

constexpr std::string_view kManifestPath = "manifest.yaml";

json kinds_section(const std::vector<BackupObject>& objects, const std::map<std::string, std::string>& checksums) {
  json kinds = json::array();
  for (const auto& kind : backup_kinds()) {
    json files = json::array();
    std::string api_version;
    for (const auto& o : objects) {
      if (o.kind != &kind) continue;
      files.push_back({{"path", o.path()}, {"sha256", checksums.at(o.path())}});
      api_version = kube::string_field(o.object, "apiVersion");
    }
    if (files.empty()) continue;
    kinds.push_back({{"resource", kind.folder()},
                     {"kind", kind.kind},
                     {"apiVersion", api_version},
                     {"count", files.size()},
                     {"files", std::move(files)}});
  }
  return kinds;
}

json gaps_section(const BackupContents& contents) {
  json gaps = json::array();
  for (const auto& g : contents.gaps) gaps.push_back({{"resource", g.resource}, {"reason", g.reason}});
  return gaps;
}

Error refused(std::string_view source, const std::string& why) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = fmt::format("{}: {}", source, why);
  return e;
}

// The manifest's kinds, each file with its checksum, in the manifest's order.
struct ListedFile {
  const BackupKind* kind;
  std::string sha256;
};

Result<std::map<std::string, ListedFile>> listed_files(const json& manifest, std::string_view source) {
  std::map<std::string, ListedFile> out;
  for (const auto& k : kube::array_field(manifest, "kinds")) {
    const BackupKind* kind = find_backup_kind(kube::string_field(k, "resource"));
    if (kind == nullptr) {
      return std::unexpected(refused(
          source, fmt::format("the manifest lists kind \"{}\", which this gpuctl does not know; use a newer gpuctl",
                              kube::string_field(k, "resource"))));
    }
    for (const auto& f : kube::array_field(k, "files")) {
      out[kube::string_field(f, "path")] = {kind, kube::string_field(f, "sha256")};
    }
  }
  return out;
}

// One file's object, checked against where the archive put it.
Result<BackupObject> read_object(const util::TarEntry& entry, const BackupKind& kind, std::string_view source) {
  const std::string where = fmt::format("{}: {}", source, entry.path);
  GPUCTL_TRY_ASSIGN(json object, kube::parse_manifest(entry.data, where));
  BackupObject o;
  o.kind = &kind;
  o.name = kube::name_of(object);
  if (kind.namespaced) o.namespace_name = kube::namespace_of(object);
  o.object = std::move(object);
  if (backup_kind_of(o.object) != &kind || o.path() != entry.path || o.name.empty()) {
    return std::unexpected(refused(source, fmt::format("{} does not hold the {} its path names; the archive was "
                                                       "edited by hand",
                                                       entry.path, kind.kind)));
  }
  return o;
}

Result<json> read_manifest(const std::vector<util::TarEntry>& entries, std::string_view source) {
  if (entries.empty() || entries.front().path != kManifestPath) {
    return std::unexpected(refused(source, "is not a gpuctl backup (no manifest.yaml first in the archive)"));
  }
  GPUCTL_TRY_ASSIGN(json manifest,
                    kube::parse_manifest(entries.front().data, fmt::format("{}: manifest.yaml", source)));
  if (kube::string_field(manifest, "kind") != "BackupManifest") {
    return std::unexpected(refused(source, "is not a gpuctl backup (its manifest.yaml is no BackupManifest)"));
  }
  const auto format = kube::integer_field(manifest, "formatVersion");
  if (!format || *format < 1) return std::unexpected(refused(source, "its manifest has no formatVersion"));
  if (*format > kBackupFormatVersion) {
    return std::unexpected(
        refused(source, fmt::format("was written in backup format {} (by gpuctl {}); this gpuctl reads format {} and "
                                    "older: use a newer gpuctl",
                                    *format, kube::string_field(manifest, "gpuctlVersion"), kBackupFormatVersion)));
  }
  return manifest;
}

}  // namespace

Result<BackupArchive> build_backup_archive(const BackupContents& contents, const BackupOptions& options,
                                           std::int64_t created_at_unix) {
  std::vector<util::TarEntry> entries;
  std::map<std::string, std::string> checksums;
  entries.push_back({std::string(kManifestPath), ""});
  std::vector<const BackupObject*> ordered;
  for (const auto& o : contents.objects) ordered.push_back(&o);
  // Table order, then namespace and name: the same state gives the same archive.
  auto rank = [](const BackupKind* k) { return k - backup_kinds().data(); };
  std::ranges::stable_sort(ordered, [&](const BackupObject* a, const BackupObject* b) {
    return std::tuple(rank(a->kind), a->namespace_name, a->name) <
           std::tuple(rank(b->kind), b->namespace_name, b->name);
  });
  for (const BackupObject* o : ordered) {
    std::string text = output::to_yaml(o->object);
    checksums[o->path()] = util::sha256_hex(text);
    entries.push_back({o->path(), std::move(text)});
  }
  const auto created = std::chrono::system_clock::time_point(std::chrono::seconds(created_at_unix));
  json manifest = schema_document("BackupManifest", {{"formatVersion", kBackupFormatVersion},
                                                     {"gpuctlVersion", std::string(build_version())},
                                                     {"cluster",
                                                      {{"server", contents.cluster.server},
                                                       {"version", contents.cluster.version},
                                                       {"context", contents.cluster.context}}},
                                                     {"createdAt", util::format_rfc3339(created)},
                                                     {"options",
                                                      {{"nodeKeys", options.node_key_prefixes},
                                                       {"allJobs", options.all_jobs},
                                                       {"includeSecrets", options.include_secrets}}},
                                                     {"finishedJobsLeftOut", contents.finished_jobs_left_out},
                                                     {"kinds", kinds_section(contents.objects, checksums)},
                                                     {"gaps", gaps_section(contents)},
                                                     {"notServed", contents.not_served}});
  entries.front().data = output::to_yaml(manifest);
  GPUCTL_TRY_ASSIGN(std::string bytes, util::write_tar_gz(entries, created_at_unix));
  return BackupArchive{std::move(manifest), std::move(bytes), contents.objects.size()};
}

Result<ReadArchive> read_backup_archive(std::string_view bytes, std::string_view source) {
  GPUCTL_TRY_ASSIGN(std::vector<util::TarEntry> entries, util::read_tar_gz(bytes, source));
  GPUCTL_TRY_ASSIGN(json manifest, read_manifest(entries, source));
  GPUCTL_TRY_ASSIGN(auto listed, listed_files(manifest, source));
  ReadArchive out;
  out.manifest = std::move(manifest);
  std::set<std::string> seen;
  for (std::size_t i = 1; i < entries.size(); ++i) {
    const auto& entry = entries[i];
    auto it = listed.find(entry.path);
    if (it == listed.end()) {
      return std::unexpected(refused(source, fmt::format("holds {}, which its manifest does not list; the archive "
                                                         "was changed after it was written",
                                                         entry.path)));
    }
    if (util::sha256_hex(entry.data) != it->second.sha256) {
      return std::unexpected(refused(source, fmt::format("{} does not match its checksum in the manifest; the "
                                                         "archive is damaged or was edited: use another copy",
                                                         entry.path)));
    }
    seen.insert(entry.path);
    GPUCTL_TRY_ASSIGN(BackupObject o, read_object(entry, *it->second.kind, source));
    out.objects.push_back(std::move(o));
  }
  for (const auto& [path, file] : listed) {
    if (!seen.contains(path)) {
      return std::unexpected(
          refused(source, fmt::format("its manifest lists {}, which the archive does not hold; it is incomplete: "
                                      "use another copy",
                                      path)));
    }
  }
  return out;
}

bool looks_like_archive(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string default_backup_file_name(std::string_view context_name, std::int64_t unix_time) {
  std::string context;
  for (char c : context_name) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    context += plain ? c : '_';
  }
  if (context.empty()) context = "cluster";
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm utc{};
  gmtime_r(&t, &utc);
  return fmt::format("gpuctl-backup-{}-{:04}{:02}{:02}T{:02}{:02}{:02}Z.tar.gz", context, utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

std::string describe_counts(const json& manifest) {
  std::vector<std::string> parts;
  std::int64_t total = 0;
  for (const auto& k : kube::array_field(manifest, "kinds")) {
    const auto count = kube::integer_field(k, "count").value_or(0);
    total += count;
    parts.push_back(fmt::format("{} {}", count, kube::string_field(k, "resource")));
  }
  if (parts.empty()) return "no objects";
  return fmt::format("{} objects: {}", total, fmt::join(parts, ", "));
}

}  // namespace gpuctl::ops
