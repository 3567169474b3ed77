// Restore's plans as pure functions: the diff a dry run shows, what the server-side apply sends,
// node state only added back, a Released volume freed for its recreated claim, what is skipped.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gpuctl/ops/restore/restore.hpp"

using json = nlohmann::json;
namespace ops = gpuctl::ops;

namespace {

const ops::BackupKind& kind(std::string_view name) { return *ops::find_backup_kind(name); }

ops::BackupObject archived_node() {
  return {&kind("nodes"), "", "gpu-1", json::parse(R"({"apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100", "team": "a"}},
    "spec": {"unschedulable": true, "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})")};
}

}  // namespace

TEST_CASE("restore_plan: a node gets back its labels, taints and cordon, and only those are applied",
          "[restore_plan]") {
  json live = json::parse(R"({"metadata": {"name": "gpu-1", "resourceVersion": "9", "labels": {"team": "a",
    "new": "x"}}, "spec": {"taints": [{"key": "quarantine", "effect": "NoSchedule"}]}})");
  auto plan = ops::plan_restore(archived_node(), live);
  CHECK(plan.action == ops::RestoreAction::update);
  REQUIRE(plan.changes.size() == 3);
  CHECK(plan.changes[0].field == "metadata.labels[nvidia.com/gpu.product]");
  CHECK(plan.changes[0].from.is_null());
  CHECK(plan.changes[1].field == "spec.unschedulable");
  CHECK(plan.changes[2].field == "spec.taints[nvidia.com/gpu:NoSchedule]");
  // "team" is unchanged and not taken over; "new" is left alone.
  CHECK(plan.apply == json::parse(R"({"apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
    "spec": {"unschedulable": true}})"));
  // Taints are an atomic list: the one there now stays, the missing one is added, under the
  // resourceVersion that was read.
  CHECK(plan.guarded_patch == json::parse(R"({"metadata": {"resourceVersion": "9"},
    "spec": {"taints": [{"key": "quarantine", "effect": "NoSchedule"},
             {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})"));
}

TEST_CASE("restore_plan: a NoExecute taint or another value of a taint is left as it is, and said", "[restore_plan]") {
  auto archived = archived_node();
  archived.object["spec"]["taints"].push_back({{"key", "maint"}, {"value", "x"}, {"effect", "NoExecute"}});
  json live = json::parse(R"({"metadata": {"name": "gpu-1", "resourceVersion": "9", "labels":
    {"nvidia.com/gpu.product": "NVIDIA-H100", "team": "a"}}, "spec": {"unschedulable": true, "taints":
    [{"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule"}]}})");
  auto plan = ops::plan_restore(archived, live);
  CHECK(plan.action == ops::RestoreAction::unchanged);
  CHECK(plan.guarded_patch.is_null());
  CHECK(plan.reason ==
        "taint nvidia.com/gpu:NoSchedule is there with value \"shared\" (archived \"present\"); left as "
        "it is; NoExecute taint maint=x not added back: it would evict the pods that do not tolerate it "
        "(gpuctl taint NODE maint=x:NoExecute --yes)");
}

TEST_CASE("restore_plan: a node already as archived is unchanged, a cordon there now is kept", "[restore_plan]") {
  json live = json::parse(R"({"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100",
    "team": "a"}}, "spec": {"unschedulable": true, "taints": [{"key": "nvidia.com/gpu", "value": "present",
    "effect": "NoSchedule"}]}})");
  CHECK(ops::plan_restore(archived_node(), live).action == ops::RestoreAction::unchanged);
  auto uncordoned = archived_node();
  uncordoned.object["spec"].erase("unschedulable");
  auto plan = ops::plan_restore(uncordoned, live);
  CHECK(plan.action == ops::RestoreAction::unchanged);  // restore never uncordons
}

TEST_CASE("restore_plan: keys a previous restore applied stay in the apply, so they are not dropped",
          "[restore_plan]") {
  json live = json::parse(R"({"metadata": {"name": "gpu-1", "labels": {"team": "a", "restored-before": "y"},
    "managedFields": [{"manager": "gpuctl", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:labels":
      {"f:restored-before": {}}}, "f:spec": {"f:unschedulable": {}}}}]},
    "spec": {"unschedulable": true, "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})");
  auto plan = ops::plan_restore(archived_node(), live);
  REQUIRE(plan.action == ops::RestoreAction::update);
  CHECK(plan.apply["metadata"]["labels"] ==
        json({{"nvidia.com/gpu.product", "NVIDIA-H100"}, {"restored-before", "y"}}));
  CHECK(plan.apply["spec"]["unschedulable"] == true);
  CHECK_FALSE(plan.apply["spec"].contains("taints"));
  CHECK(plan.guarded_patch.is_null());
}

TEST_CASE("restore_plan: a missing node is skipped, a missing object created, a controller's left to it",
          "[restore_plan]") {
  auto node = ops::plan_restore(archived_node(), std::nullopt);
  CHECK(node.action == ops::RestoreAction::skip);
  CHECK(node.reason == "the node no longer exists");
  ops::BackupObject quota{&kind("quota"), "a", "gpu", json::parse(R"({"apiVersion": "v1", "kind": "ResourceQuota",
    "metadata": {"name": "gpu", "namespace": "a"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})")};
  auto created = ops::plan_restore(quota, std::nullopt);
  CHECK(created.action == ops::RestoreAction::create);
  CHECK(created.apply == quota.object);
  ops::BackupObject owned{&kind("jobs"), "a", "nightly-1", json::parse(R"({"apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "nightly-1", "namespace": "a", "ownerReferences": [{"kind": "CronJob", "name": "nightly",
    "controller": true}]}})")};
  auto skipped = ops::plan_restore(owned, std::nullopt);
  CHECK(skipped.action == ops::RestoreAction::skip);
  CHECK(skipped.reason == "owned by CronJob nightly: its controller recreates it");
}

TEST_CASE("restore_plan: an object differs only where the archive says something else", "[restore_plan]") {
  json archived = json::parse(R"({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu",
    "namespace": "a", "labels": {"team": "a"}}, "spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": "10"}}})");
  json live = json::parse(R"({"metadata": {"name": "gpu", "namespace": "a", "uid": "q", "labels": {"team": "a",
    "extra": "x"}}, "spec": {"hard": {"requests.nvidia.com/gpu": "4", "pods": "10"}}, "status": {}})");
  auto changes = ops::changed_fields(archived, live);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].field == "spec.hard[requests.nvidia.com/gpu]");
  CHECK(changes[0].from == "4");
  CHECK(changes[0].to == "8");
  // Lists compare as wholes, each element a subset of the live one (defaults added by the server).
  json want = {{"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
  json have = {{"spec", {{"containers", {{{"name", "c"}, {"image", "x"}, {"imagePullPolicy", "Always"}}}}}}};
  CHECK(ops::changed_fields(want, have).empty());
  have["spec"]["containers"][0]["image"] = "y";
  REQUIRE(ops::changed_fields(want, have).size() == 1);
  CHECK(ops::changed_fields(want, have)[0].field == "spec.containers");
}

TEST_CASE("restore_plan: a volume Released by its deleted claim is freed when the claim comes back", "[restore_plan]") {
  ops::BackupObject pv{&kind("pv"), "", "data", json::parse(R"({"apiVersion": "v1", "kind": "PersistentVolume",
    "metadata": {"name": "data"}, "spec": {"claimRef": {"namespace": "a", "name": "data"}}})")};
  json live = json::parse(R"({"metadata": {"name": "data", "resourceVersion": "41"},
    "spec": {"claimRef": {"namespace": "a", "name": "data", "uid": "old"}}, "status": {"phase": "Released"}})");
  ops::PlanContext context;
  context.restores_claim = [](const std::string& ns, const std::string& name) { return ns == "a" && name == "data"; };
  context.live_claim_uid = [](const std::string&, const std::string&) { return std::optional<std::string>(); };
  auto plan = ops::plan_restore(pv, live, context);
  CHECK(plan.action == ops::RestoreAction::update);
  CHECK(plan.apply.is_null());  // the definition is in place: only the release is sent
  CHECK(plan.guarded_patch == json::parse(R"({"metadata": {"resourceVersion": "41"},
    "spec": {"claimRef": {"uid": null, "resourceVersion": null}}})"));
  // Not restoring that claim: the volume is left as it is.
  context.restores_claim = [](const std::string&, const std::string&) { return false; };
  CHECK(ops::plan_restore(pv, live, context).action == ops::RestoreAction::unchanged);
}

TEST_CASE("restore_plan: scope by --nodes, --only, -n and -l", "[restore_plan]") {
  ops::BackupObject quota{&kind("quota"), "a", "gpu", json::parse(R"({"metadata": {"name": "gpu", "namespace": "a",
    "labels": {"team": "a"}}})")};
  ops::BackupObject ns{&kind("namespaces"), "", "a", json::parse(R"({"metadata": {"name": "a"}})")};
  ops::RestoreScope scope;
  CHECK(ops::in_scope(quota, scope));
  scope.nodes_only = true;
  CHECK_FALSE(ops::in_scope(quota, scope));
  CHECK(ops::in_scope(archived_node(), scope));
  scope = {};
  scope.namespace_name = "a";
  CHECK(ops::in_scope(quota, scope));
  CHECK(ops::in_scope(ns, scope));
  CHECK_FALSE(ops::in_scope(archived_node(), scope));
  scope = {};
  scope.only = {&kind("nodes")};
  CHECK_FALSE(ops::in_scope(quota, scope));
  scope = {};
  scope.label_selector = {{"matchLabels", {{"team", "b"}}}};
  CHECK_FALSE(ops::in_scope(quota, scope));
  scope.label_selector = {{"matchLabels", {{"team", "a"}}}};
  CHECK(ops::in_scope(quota, scope));
}

TEST_CASE("restore_plan: a kubectl export is read as a backup would have kept it", "[restore_plan]") {
  const std::string list = R"(apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: gpu-1
    uid: abc
    labels: {nvidia.com/gpu.product: NVIDIA-H100}
  status: {capacity: {nvidia.com/gpu: "8"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: default}
)";
  auto source = ops::read_restore_source(list, "nodes-backup.yaml");
  REQUIRE(source);
  REQUIRE(source->objects.size() == 1);
  CHECK(source->objects[0].kind == &kind("nodes"));
  CHECK(source->objects[0].object == json::parse(R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1",
    "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}}})"));
  CHECK(source->manifest.is_null());
  REQUIRE(source->ignored.size() == 1);
  CHECK(source->ignored[0] == "Pod default/p: gpuctl does not restore this kind");

  auto nothing = ops::read_restore_source("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "x.yaml");
  REQUIRE_FALSE(nothing);
  CHECK(nothing.error().code == gpuctl::Errc::invalid_argument);
}

TEST_CASE("restore_plan: an archive of another cluster is refused unless asked for", "[restore_plan]") {
  json manifest = {{"cluster", {{"server", "https://a:6443"}}}};
  CHECK(ops::check_target_cluster(manifest, "https://a:6443", false));
  auto other = ops::check_target_cluster(manifest, "https://b:6443", false);
  REQUIRE_FALSE(other);
  CHECK(other.error().message.find("pass --to-other-cluster") != std::string::npos);
  CHECK(ops::check_target_cluster(manifest, "https://b:6443", true));
  CHECK(ops::check_target_cluster(json(), "https://b:6443", false));  // a kubectl export names no cluster
}
