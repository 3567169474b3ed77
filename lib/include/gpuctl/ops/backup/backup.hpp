#pragma once
// `gpuctl backup`: the cluster's GPU admin state (node labels, taints and cordons, namespaces,
// quotas and limits, classes, volumes' definitions, GPU Jobs, the device plugin's DaemonSet and
// configuration, DRA (device classes, taint rules, claim templates, user-made claims), Kueue,
// KAI and GPU Operator objects where served) read into one archive of
// readable YAML, one file per object, with a manifest of counts and checksums. What is kept is
// what recreates the object: status and server-set fields are stripped (backup_kinds.cpp).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// The archive format this gpuctl writes; a newer one is refused on reading.
inline constexpr int kBackupFormatVersion = 1;

// One kind an archive may hold. The table's order is the order restore writes in: namespaces,
// classes, volumes, claims, quotas and limits, configuration, DaemonSets, Jobs, nodes last.
struct BackupKind {
  std::string_view resource;  // plural: "nodes", "jobs"
  std::string_view group;     // "" for the core group
  std::string_view version;   // preferred version; "" when discovered (optional kinds)
  std::string_view kind;      // "Node", "Job"
  bool namespaced = false;
  bool optional = false;  // served only by some clusters (DRA, Kueue, KAI, GPU Operator): discovered
  // "nodes", "jobs.batch": kubectl's name for the resource, the archive's folder.
  std::string folder() const;
};

const std::vector<BackupKind>& backup_kinds();
// The kind by its folder ("jobs.batch"), its resource ("jobs"), its Kind ("Job", any case) or
// kubectl's short names ("quota", "pvc"); nullptr when none.
const BackupKind* find_backup_kind(std::string_view name);
// The kind of an object read from a file, by apiVersion's group and kind; nullptr when gpuctl
// does not back it up.
const BackupKind* backup_kind_of(const nlohmann::json& object);

// Why an object is never kept although gpuctl may see it, or "" when nothing says so: a DRA
// ResourceSlice (its driver publishes it again for what is on the node), and a ResourceClaim
// made for a pod (owned by it: from the pod's claim template) or by the scheduler (annotation
// resource.kubernetes.io/extended-resource-claim): the pod's controller or the scheduler makes it
// again, and a restored copy would hold devices for a pod that is gone. Only the claims users
// made themselves are kept, without status. Pure; restore asks it of a kubectl export's objects
// (by apiVersion and kind), backup of each listed claim (list items carry neither).
std::string left_out_reason(const nlohmann::json& object);
std::string claim_left_out_reason(const nlohmann::json& claim);

struct BackupOptions {
  // Node labels, annotations and taints kept: those whose key starts with one of these; empty:
  // all of them.
  std::vector<std::string> node_key_prefixes;
  bool all_jobs = false;         // every unfinished Job, not only the GPU ones
  bool include_secrets = false;  // the Secrets the kept Jobs and DaemonSets reference
  bool allow_partial = false;    // a kind that cannot be listed is a recorded gap, not a failure
  // "listing jobs.batch", "listing nodes (2/19)": what the backup is doing, for a terminal.
  std::function<void(std::string_view)> on_progress;
};

// An object as the archive keeps it: `object` already stripped (strip_for_backup).
struct BackupObject {
  const BackupKind* kind = nullptr;
  std::string namespace_name;
  std::string name;
  nlohmann::json object;
  std::string path() const;   // "nodes/gpu-1.yaml", "jobs.batch/team-a/train.yaml"
  std::string label() const;  // "Node gpu-1", "Job team-a/train": how messages name it
};

// A kind the backup could not read (RBAC) or left out, and why.
struct BackupGap {
  std::string resource;  // folder name
  std::string reason;
};

struct ClusterIdentity {
  std::string server;   // the API server URL of the context
  std::string version;  // gitVersion from /version
  std::string context;  // kubeconfig context name
};

struct BackupContents {
  ClusterIdentity cluster;
  std::vector<BackupObject> objects;
  std::vector<BackupGap> gaps;
  std::vector<std::string> not_served;  // optional kinds this cluster does not serve
  int finished_jobs_left_out = 0;       // finished Jobs are not kept: restoring them would run them again
};

// What an object keeps in the archive: status, uid, resourceVersion, generation, timestamps,
// managedFields, finalizers and the kind's server-set fields removed; a node reduced to its
// labels, annotations, taints and cordon (narrowed to node_key_prefixes); a Job without the
// selector and labels its controller generates; a PVC without its binding annotations and a PV
// without its claim's uid, so they bind again when restored. Pure; restore applies it again to
// kubectl's exports.
nlohmann::json strip_for_backup(const BackupKind& kind, nlohmann::json object,
                                const std::vector<std::string>& node_key_prefixes = {});

// Reads every kind from the cluster. A kind the cluster does not serve is listed in
// not_served; one it refuses (403) fails the backup unless allow_partial records it as a gap.
Result<BackupContents> collect_backup(kube::Client& client, const BackupOptions& options,
                                      std::string_view context_name);

// The archive and its manifest: format, gpuctl and cluster versions, time, and per kind its
// count and each file's sha256; the manifest is also the `-o json|yaml` document of `backup` and
// `backup inspect`.
struct BackupArchive {
  nlohmann::json manifest;  // kind BackupManifest
  std::string bytes;        // the .tar.gz
  std::size_t objects = 0;
};

// The archive of `contents`, created at `created_at_unix`: manifest.yaml first, then one YAML
// file per object. Pure and deterministic.
Result<BackupArchive> build_backup_archive(const BackupContents& contents, const BackupOptions& options,
                                           std::int64_t created_at_unix);

// An archive read back and checked: the manifest's format version known, every file listed with
// its checksum matching, nothing unlisted. `source` names the file in errors.
struct ReadArchive {
  nlohmann::json manifest;
  std::vector<BackupObject> objects;  // in the table's order
};
Result<ReadArchive> read_backup_archive(std::string_view bytes, std::string_view source);

// Is `bytes` a gzip stream (an archive) rather than YAML or JSON text?
bool looks_like_archive(std::string_view bytes);

// The default file name: gpuctl-backup-<context>-<YYYYMMDDTHHMMSSZ>.tar.gz (the context's
// characters outside [A-Za-z0-9._-] replaced by '_').
std::string default_backup_file_name(std::string_view context_name, std::int64_t unix_time);

// "3 nodes, 2 namespaces, 1 resourcequotas": the manifest's counts in one line.
std::string describe_counts(const nlohmann::json& manifest);

}  // namespace gpuctl::ops
