// Backup: what an object keeps in the archive, the archive written and read back, and every way
// a damaged or foreign archive is refused before restore sends anything.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/util/sha256.hpp"
#include "gpuctl/util/tar_gz.hpp"

using gpuctl::Errc;
using json = nlohmann::json;
namespace ops = gpuctl::ops;

namespace {

const ops::BackupKind& kind(std::string_view name) { return *ops::find_backup_kind(name); }

json live_node() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "gpu-1", "uid": "u1", "resourceVersion": "77", "creationTimestamp": "2026-01-01T00:00:00Z",
                 "labels": {"nvidia.com/gpu.product": "NVIDIA-H100", "nvidia.com/gfd.timestamp": "1796579621",
                            "team": "a"},
                 "annotations": {"gpuctl.io/cordon-reason": "Xid 79", "node.alpha.kubernetes.io/ttl": "0"},
                 "managedFields": [{"manager": "kubelet"}]},
    "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24",
             "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                         "timeAdded": "2026-01-01T00:00:00Z"},
                        {"key": "maint", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]},
    "status": {"capacity": {"nvidia.com/gpu": "8"}}})");
}

ops::BackupContents sample_contents() {
  ops::BackupContents c;
  c.cluster = {"https://10.0.0.1:6443", "v1.36.3", "prod"};
  c.objects.push_back({&kind("nodes"), "", "gpu-1", ops::strip_for_backup(kind("nodes"), live_node())});
  json quota = {{"apiVersion", "v1"},
                {"kind", "ResourceQuota"},
                {"metadata", {{"name", "gpu"}, {"namespace", "team-a"}}},
                {"spec", {{"hard", {{"requests.nvidia.com/gpu", "8"}}}}}};
  c.objects.push_back({&kind("resourcequotas"), "team-a", "gpu", quota});
  c.gaps.push_back({"secrets", "forbidden: no"});
  return c;
}

}  // namespace

TEST_CASE("backup: a node keeps its labels, annotations, taints and cordon, not what the system sets", "[backup]") {
  json kept = ops::strip_for_backup(kind("nodes"), live_node());
  CHECK(kept["metadata"] == json({{"name", "gpu-1"},
                                  {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100"}, {"team", "a"}}},
                                  {"annotations", {{"gpuctl.io/cordon-reason", "Xid 79"}}}}));
  CHECK(kept["spec"] == json::parse(R"({"unschedulable": true, "taints": [
      {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
      {"key": "maint", "effect": "NoExecute"}]})"));
  CHECK_FALSE(kept.contains("status"));
}

TEST_CASE("backup: --node-keys narrows labels, annotations and taints to the prefixes", "[backup]") {
  json kept = ops::strip_for_backup(kind("nodes"), live_node(), {"nvidia.com/"});
  CHECK(kept["metadata"]["labels"] == json({{"nvidia.com/gpu.product", "NVIDIA-H100"}}));
  CHECK_FALSE(kept["metadata"].contains("annotations"));
  CHECK(kept["spec"]["taints"].size() == 1);
  CHECK(kept["spec"]["unschedulable"] == true);
}

TEST_CASE("backup: a Job is kept without the selector and labels its controller generated", "[backup]") {
  json job = json::parse(R"({"apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "train", "namespace": "a", "uid": "j1", "labels": {"controller-uid": "j1", "job-name": "train",
                 "batch.kubernetes.io/controller-uid": "j1", "team": "a"}},
    "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "j1"}},
             "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "j1",
                                                  "batch.kubernetes.io/job-name": "train", "job-name": "train",
                                                  "controller-uid": "j1"}},
                          "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    "status": {"active": 1}})");
  json kept = ops::strip_for_backup(kind("jobs"), job);
  CHECK_FALSE(kept["spec"].contains("selector"));
  CHECK(kept["metadata"]["labels"] == json({{"team", "a"}}));
  CHECK_FALSE(kept["spec"]["template"]["metadata"].contains("labels"));
  CHECK_FALSE(kept.contains("status"));
  CHECK_FALSE(kept["metadata"].contains("uid"));
}

TEST_CASE("backup: a PV keeps its claim's name but not its uid, a PVC drops its binding annotations", "[backup]") {
  json pv = json::parse(R"({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data",
    "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}, "finalizers": ["kubernetes.io/pv-protection"]},
    "spec": {"claimRef": {"namespace": "a", "name": "data", "uid": "c1", "resourceVersion": "5", "kind": "PersistentVolumeClaim"}},
    "status": {"phase": "Bound"}})");
  json kept = ops::strip_for_backup(kind("pv"), pv);
  CHECK(kept["spec"]["claimRef"] == json({{"namespace", "a"}, {"name", "data"}, {"kind", "PersistentVolumeClaim"}}));
  CHECK_FALSE(kept["metadata"].contains("annotations"));
  CHECK_FALSE(kept["metadata"].contains("finalizers"));
  json pvc = json::parse(R"({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data",
    "namespace": "a", "annotations": {"pv.kubernetes.io/bind-completed": "yes", "keep": "me"}},
    "spec": {"volumeName": "data"}})");
  json kept_claim = ops::strip_for_backup(kind("pvc"), pvc);
  CHECK(kept_claim["metadata"]["annotations"] == json({{"keep", "me"}}));
  CHECK(kept_claim["spec"]["volumeName"] == "data");
}

TEST_CASE("backup: kinds are found by folder, resource, Kind and kubectl's short names", "[backup]") {
  CHECK(ops::find_backup_kind("jobs.batch") == &kind("jobs"));
  CHECK(ops::find_backup_kind("Job") == &kind("jobs"));
  CHECK(ops::find_backup_kind("quota") == &kind("resourcequotas"));
  CHECK(ops::find_backup_kind("node") == &kind("nodes"));
  CHECK(ops::find_backup_kind("pods") == nullptr);
  CHECK(ops::backup_kind_of(json{{"apiVersion", "apps/v1"}, {"kind", "DaemonSet"}}) == &kind("daemonsets"));
  CHECK(ops::backup_kind_of(json{{"apiVersion", "v1"}, {"kind", "Pod"}}) == nullptr);
}

TEST_CASE("backup: the archive is read back whole, with its manifest and checksums", "[backup]") {
  auto archive = ops::build_backup_archive(sample_contents(), {}, 1796579621);
  REQUIRE(archive);
  auto again = ops::build_backup_archive(sample_contents(), {}, 1796579621);
  REQUIRE(again);
  CHECK(again->bytes == archive->bytes);  // deterministic
  CHECK(archive->manifest["kind"] == "BackupManifest");
  CHECK(archive->manifest["cluster"]["server"] == "https://10.0.0.1:6443");
  CHECK(archive->manifest["gaps"][0]["resource"] == "secrets");
  CHECK(ops::describe_counts(archive->manifest) == "2 objects: 1 resourcequotas, 1 nodes");
  auto read = ops::read_backup_archive(archive->bytes, "b.tar.gz");
  REQUIRE(read);
  REQUIRE(read->objects.size() == 2);
  CHECK(read->objects[0].path() == "resourcequotas/team-a/gpu.yaml");
  CHECK(read->objects[1].object == sample_contents().objects[0].object);
  CHECK(read->manifest == archive->manifest);
}

TEST_CASE("backup: a damaged, extended, foreign or newer archive is refused naming the file", "[backup]") {
  auto archive = ops::build_backup_archive(sample_contents(), {}, 1796579621);
  REQUIRE(archive);
  auto entries = gpuctl::util::read_tar_gz(archive->bytes, "b");
  REQUIRE(entries);

  auto refused = [](const std::vector<gpuctl::util::TarEntry>& changed) {
    auto bytes = gpuctl::util::write_tar_gz(changed, 1796579621);
    REQUIRE(bytes);
    auto read = ops::read_backup_archive(*bytes, "b.tar.gz");
    REQUIRE_FALSE(read);
    CHECK(read.error().code == Errc::invalid_argument);
    return read.error().message;
  };
  auto edited = *entries;
  edited[1].data += "# edited\n";
  CHECK(refused(edited) ==
        "b.tar.gz: resourcequotas/team-a/gpu.yaml does not match its checksum in the manifest; "
        "the archive is damaged or was edited: use another copy");
  auto extra = *entries;
  extra.push_back({"secrets/a/s.yaml", "kind: Secret\n"});
  CHECK(refused(extra).find("holds secrets/a/s.yaml, which its manifest does not list") != std::string::npos);
  auto missing = *entries;
  missing.pop_back();
  CHECK(refused(missing).find("lists nodes/gpu-1.yaml, which the archive does not hold") != std::string::npos);
  auto newer = *entries;
  newer[0].data.replace(newer[0].data.find("formatVersion: 1"), 16, "formatVersion: 9");
  CHECK(refused(newer).find("was written in backup format 9") != std::string::npos);
  auto no_manifest = *entries;
  no_manifest.erase(no_manifest.begin());
  CHECK(refused(no_manifest).find("is not a gpuctl backup") != std::string::npos);

  std::string truncated = archive->bytes.substr(0, archive->bytes.size() - 9);
  auto read = ops::read_backup_archive(truncated, "b.tar.gz");
  REQUIRE_FALSE(read);
  CHECK(read.error().code == Errc::invalid_argument);
}

TEST_CASE("backup: the default file name carries the context and the UTC time", "[backup]") {
  CHECK(ops::default_backup_file_name("prod", 1796579621) == "gpuctl-backup-prod-20261206T175341Z.tar.gz");
  CHECK(ops::default_backup_file_name("arn:aws:eks/x", 0) == "gpuctl-backup-arn_aws_eks_x-19700101T000000Z.tar.gz");
}
