// The drain library: filters (kubectl's policies as data), PDB budgets, the plan, and the
// eviction loop against scripted API answers (429 retries, replacements by UID, 500s, timeouts).
#include <thread>

#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "test_drain_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::nodeadmin;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;

namespace {

ops::PodFacts facts() { return {true, std::chrono::system_clock::now()}; }

json pdb(const std::string& ns, const std::string& name, json match_labels, int allowed, int desired, int current) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"generation", 1}}},
          {"spec", {{"selector", {{"matchLabels", match_labels}}}}},
          {"status",
           {{"observedGeneration", 1},
            {"disruptionsAllowed", allowed},
            {"desiredHealthy", desired},
            {"currentHealthy", current},
            {"expectedPods", current}}}};
}

std::string watch_line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

const std::string kOnN1 = "fieldSelector=spec.nodeName%3Dn1";
const std::string kWatchN1 = "watch=1&fieldSelector=spec.nodeName%3Dn1";

// Routes for cordoning n1 and discovering pods/eviction.
void cordon_routes(testing::FakeTransport& fake) {
  fake.on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()));
  fake.on("GET", "/api/v1", json_answer(200, discovery_with_eviction()));
}

}  // namespace

TEST_CASE("drain filters: kubectl's rules, first verdict wins", "[drain]") {
  ops::DrainPolicy none;
  json ds = PodBuilder("kube-system", "dcgm").owned_by("DaemonSet", "dcgm");
  CHECK(ops::classify_pod(ds, none, facts()).action == ops::PodAction::refuse);
  CHECK(ops::classify_pod(ds, none, facts()).reason == "daemonset");
  ops::DrainPolicy ignore;
  ignore.ignore_daemonsets = true;
  CHECK(ops::classify_pod(ds, ignore, facts()).action == ops::PodAction::skip);
  // An orphaned DaemonSet pod needs --force, and then goes.
  ops::PodFacts orphan = facts();
  orphan.daemonset_exists = false;
  CHECK(ops::classify_pod(ds, ignore, orphan).action == ops::PodAction::refuse);
  ops::DrainPolicy force;
  force.force = true;
  CHECK(ops::classify_pod(ds, force, orphan).action == ops::PodAction::evict);

  json mirror = PodBuilder("kube-system", "etcd").mirror();
  CHECK(ops::classify_pod(mirror, force, facts()).action == ops::PodAction::skip);
  CHECK(ops::classify_pod(mirror, force, facts()).reason == "mirror");

  json scratch = PodBuilder("ml", "s").owned_by("ReplicaSet", "rs").empty_dir();
  CHECK(ops::classify_pod(scratch, none, facts()).reason == "local-storage");
  ops::DrainPolicy emptydir;
  emptydir.delete_emptydir_data = true;
  CHECK(ops::classify_pod(scratch, emptydir, facts()).action == ops::PodAction::evict);

  json bare = PodBuilder("ml", "bare");
  auto v = ops::classify_pod(bare, none, facts());
  CHECK(v.action == ops::PodAction::refuse);
  CHECK(v.reason == "unmanaged");
  CHECK(v.message.find("--force") != std::string::npos);
  CHECK(ops::classify_pod(bare, force, facts()).action == ops::PodAction::evict);

  // Finished pods pass the DaemonSet, local-storage and unmanaged filters.
  json done = PodBuilder("ml", "done").empty_dir().phase("Succeeded");
  CHECK(ops::classify_pod(done, none, facts()).action == ops::PodAction::evict);
  CHECK(ops::classify_pod(done, none, facts()).reason == "finished");

  ops::DrainPolicy gpu_only;
  gpu_only.gpu_pods_only = true;
  json cpu = PodBuilder("ml", "cpu").owned_by("ReplicaSet", "rs");
  json gpu = PodBuilder("ml", "gpu").owned_by("ReplicaSet", "rs").gpus(2);
  json mig = PodBuilder("ml", "mig").owned_by("ReplicaSet", "rs").gpus(1, "nvidia.com/mig-1g.10gb");
  CHECK(ops::classify_pod(cpu, gpu_only, facts()).reason == "not-gpu");
  CHECK(ops::classify_pod(gpu, gpu_only, facts()).action == ops::PodAction::evict);
  CHECK(ops::classify_pod(mig, gpu_only, facts()).action == ops::PodAction::evict);
  CHECK(ops::gpu_request(gpu) == 2);

  // --skip-wait-for-delete-timeout skips pods deleted long ago.
  ops::DrainPolicy skip_old;
  skip_old.skip_wait_for_delete_timeout_seconds = 60;
  json old = PodBuilder("ml", "old").owned_by("ReplicaSet", "rs").deleting("2020-01-01T00:00:00Z");
  CHECK(ops::classify_pod(old, skip_old, facts()).reason == "deleting");
}

TEST_CASE("drain: PDB budgets are described and matched by selector", "[drain]") {
  json p = pdb("train", "ddp-pdb", {{"app", "ddp"}}, 0, 4, 4);
  CHECK(ops::describe_budget(ops::pdb_budget(p)) == "pdb train/ddp-pdb allows 0 disruptions, needs 4 healthy, has 4");
  CHECK(ops::describe_budget(ops::pdb_budget(pdb("a", "b", {{"x", "y"}}, 1, 2, 3))) ==
        "pdb a/b allows 1 disruption, needs 2 healthy, has 3");

  CHECK(ops::selector_matches({{"matchLabels", {{"app", "ddp"}}}}, {{"app", "ddp"}, {"x", "1"}}));
  CHECK_FALSE(ops::selector_matches({{"matchLabels", {{"app", "ddp"}}}}, {{"app", "web"}}));
  CHECK_FALSE(ops::selector_matches(json::object(), {{"app", "ddp"}}));  // empty selects nothing
  json expr = {{"matchExpressions", json::array({{{"key", "tier"}, {"operator", "In"}, {"values", {"a", "b"}}},
                                                 {{"key", "canary"}, {"operator", "DoesNotExist"}}})}};
  CHECK(ops::selector_matches(expr, {{"tier", "b"}}));
  CHECK_FALSE(ops::selector_matches(expr, {{"tier", "b"}, {"canary", "1"}}));

  json pod = PodBuilder("train", "w0").labels({{"app", "ddp"}});
  std::vector<json> pdbs = {p, pdb("other", "ddp-pdb", {{"app", "ddp"}}, 1, 1, 1)};
  auto matching = ops::pdbs_for_pod(pod, pdbs);
  REQUIRE(matching.size() == 1);
  CHECK((*matching[0])["metadata"]["namespace"] == "train");
}

TEST_CASE("drain plan: every pod's fate, its budget, and room for GPU pods elsewhere", "[drain]") {
  ops::PlanInputs in;
  in.nodes = {node("n1")};
  json n2 = node("n2");
  in.pods = {{PodBuilder("train", "w0").owned_by("StatefulSet", "ddp").labels({{"app", "ddp"}}).gpus(4),
              PodBuilder("train", "w1").owned_by("StatefulSet", "ddp").labels({{"app", "ddp"}}).gpus(4),
              PodBuilder("web", "api").owned_by("ReplicaSet", "api").labels({{"app", "api"}}),
              PodBuilder("kube-system", "dcgm").owned_by("DaemonSet", "dcgm"),
              PodBuilder("web", "two").owned_by("ReplicaSet", "x").labels({{"app", "api"}, {"b", "1"}})}};
  in.pdbs = {pdb("train", "ddp-pdb", {{"app", "ddp"}}, 0, 4, 4), pdb("web", "api-pdb", {{"app", "api"}}, 1, 1, 2),
             pdb("web", "b-pdb", {{"b", "1"}}, 1, 1, 2)};
  // n2 has 8 GPUs, 2 used: room for one of the two 4-GPU pods.
  json used = PodBuilder("other", "busy").on_node("n2").gpus(2);
  in.inventory = ops::build_node_inventory({node("n1"), n2}, {in.pods[0][0], in.pods[0][1], used}, true,
                                           std::chrono::system_clock::now());
  ops::DrainPolicy policy;
  policy.ignore_daemonsets = true;
  auto plan = ops::build_drain_plan(in, policy, std::chrono::system_clock::now());
  REQUIRE(plan.nodes.size() == 1);
  const auto& pods = plan.nodes[0].pods;
  REQUIRE(pods.size() == 5);
  CHECK(pods[0].action == ops::PodAction::blocked);
  CHECK(pods[0].message == "pdb train/ddp-pdb allows 0 disruptions, needs 4 healthy, has 4");
  CHECK(pods[0].fits_elsewhere);
  CHECK(pods[0].free_gpus_elsewhere == 6);
  CHECK(pods[0].product == "NVIDIA-A100-SXM4-80GB");
  CHECK_FALSE(pods[1].fits_elsewhere);  // the first took 4 of the 6
  CHECK(pods[2].action == ops::PodAction::evict);
  REQUIRE(pods[2].pdbs.size() == 1);
  CHECK(pods[2].pdbs[0].disruptions_allowed == 1);
  CHECK(pods[3].action == ops::PodAction::skip);
  CHECK(pods[4].action == ops::PodAction::blocked);
  CHECK(pods[4].reason == "several-pdbs");
  CHECK_FALSE(plan.nodes[0].completes);
  json j = ops::to_json(plan);
  CHECK(j["kind"] == "DrainPlan");
  CHECK(j["items"][0]["pods"][0]["pdbs"][0]["name"] == "ddp-pdb");
  CHECK(j["items"][0]["pods"][0]["moveTo"]["fits"] == true);
}

TEST_CASE("drain: a 429 from a PDB is retried naming the budget, then the pod is watched away", "[drain]") {
  FakeClient c;
  auto& fake = *c.fake;
  cordon_routes(fake);
  json w0 = PodBuilder("train", "w0").owned_by("StatefulSet", "ddp").labels({{"app", "ddp"}});
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({w0}, "10")), kOnN1);
  std::string refused = status(
      429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
      {{"causes",
        json::array({{{"reason", "DisruptionBudget"},
                      {"message", "The disruption budget ddp-pdb needs 4 healthy pods and has 4 currently"}}})}});
  fake.on("POST", "/api/v1/namespaces/train/pods/w0/eviction", json_answer(429, refused))
      .on("POST", "/api/v1/namespaces/train/pods/w0/eviction",
          json_answer(201, R"({"kind":"Status","status":"Success","code":201})"));
  fake.on("GET", "/api/v1/namespaces/train/pods/w0", json_answer(200, json(w0).dump()));
  fake.on("GET", "/apis/policy/v1/namespaces/train/poddisruptionbudgets",
          json_answer(200, list_of({pdb("train", "ddp-pdb", {{"app", "ddp"}}, 0, 4, 4)})));
  // After the eviction: still there on the list, then DELETED on the watch.
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({w0}, "11")), kOnN1);
  fake.on("GET", "/api/v1/pods", json_answer(200, watch_line("DELETED", w0)), kWatchN1);

  ops::DrainOptions o;
  std::vector<std::string> lines;
  std::vector<std::chrono::milliseconds> sleeps;
  o.on_progress = [&](const ops::DrainProgress& p) { lines.push_back(p.message); };
  o.sleep = [&](std::chrono::milliseconds d) { sleeps.push_back(d); };
  o.cordon.reason = "ECC";
  auto r = ops::drain_node(*c.client, node("n1"), o);
  CHECK(r.outcome == ops::DrainOutcome::drained);
  CHECK(r.cordon == "cordoned");
  CHECK(r.evicted == 1);
  CHECK(r.remaining.empty());
  CHECK(std::find(lines.begin(), lines.end(),
                  "train/w0: eviction refused, will retry after 5s: pdb train/ddp-pdb allows 0 disruptions, needs 4 "
                  "healthy, has 4") != lines.end());
  CHECK(sleeps == std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(5000)});
  CHECK(fake.count("POST") == 2);
  CHECK(fake.unexpected().empty());
  // The eviction body is policy/v1 and names the pod.
  for (const auto& req : fake.requests()) {
    if (req.method != "POST") continue;
    json body = json::parse(req.body);
    CHECK(body["apiVersion"] == "policy/v1");
    CHECK(body["kind"] == "Eviction");
    CHECK(body["metadata"]["name"] == "w0");
  }
}

TEST_CASE("drain: a replacement with the same name and a new UID counts as gone", "[drain]") {
  FakeClient c;
  auto& fake = *c.fake;
  cordon_routes(fake);
  json old_pod = PodBuilder("train", "w0").owned_by("StatefulSet", "ddp");
  json replacement = old_pod;
  replacement["metadata"]["uid"] = "uid-new";
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({old_pod}, "10")), kOnN1)
      .on("GET", "/api/v1/pods", json_answer(200, list_of({old_pod}, "11")), kOnN1)
      .on("GET", "/api/v1/pods", json_answer(200, watch_line("ADDED", replacement)), kWatchN1);
  fake.on("POST", "/api/v1/namespaces/train/pods/w0/eviction",
          json_answer(201, R"({"kind":"Status","status":"Success"})"));
  ops::DrainOptions o;
  o.sleep = [](std::chrono::milliseconds) {};
  ops::EvictionSlots slots(1);
  o.slots = &slots;
  auto r = ops::drain_node(*c.client, node("n1"), o);
  CHECK(r.outcome == ops::DrainOutcome::drained);
  CHECK(r.evicted == 1);
  CHECK(slots.try_acquire());  // the slot was given back
  CHECK(fake.unexpected().empty());
}

TEST_CASE("drain: several PDBs (500) fail the pod and name the cause, refused pods stop the node", "[drain]") {
  FakeClient c;
  auto& fake = *c.fake;
  cordon_routes(fake);
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({PodBuilder("web", "a").owned_by("ReplicaSet", "rs")})),
          kOnN1);
  fake.on(
      "POST", "/api/v1/namespaces/web/pods/a/eviction",
      json_answer(
          500,
          status(500, "",
                 "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")));
  ops::DrainOptions o;
  o.sleep = [](std::chrono::milliseconds) {};
  auto r = ops::drain_node(*c.client, node("n1"), o);
  CHECK(r.outcome == ops::DrainOutcome::failed);
  CHECK(r.message.find("more than one PodDisruptionBudget matches") != std::string::npos);
  CHECK(r.remaining == std::vector<std::string>{"web/a"});

  FakeClient d;
  d.fake->on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()));
  d.fake->on("GET", "/api/v1/pods",
             json_answer(200, list_of({PodBuilder("web", "ok").owned_by("ReplicaSet", "rs"),
                                       PodBuilder("web", "s").owned_by("ReplicaSet", "rs").empty_dir()})),
             kOnN1);
  auto refused = ops::drain_node(*d.client, node("n1"), o);
  CHECK(refused.outcome == ops::DrainOutcome::failed);
  CHECK(refused.message.find("use --delete-emptydir-data") != std::string::npos);
  CHECK(d.fake->count("POST") == 0);  // nothing evicted on a refused node
}

TEST_CASE("drain: --timeout ends a drain a PDB keeps blocking, naming the budget", "[drain]") {
  FakeClient c;
  auto& fake = *c.fake;
  fake.on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()));
  fake.on("GET", "/api/v1", json_answer(200, discovery_with_eviction()));
  json w0 = PodBuilder("train", "w0").owned_by("StatefulSet", "ddp").labels({{"app", "ddp"}});
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({w0})), kOnN1);
  for (int i = 0; i < 50; ++i) {
    fake.on("POST", "/api/v1/namespaces/train/pods/w0/eviction",
            json_answer(429, status(429, "TooManyRequests", "Cannot evict pod")));
    fake.on("GET", "/api/v1/namespaces/train/pods/w0", json_answer(200, json(w0).dump()));
    fake.on("GET", "/apis/policy/v1/namespaces/train/poddisruptionbudgets",
            json_answer(200, list_of({pdb("train", "ddp-pdb", {{"app", "ddp"}}, 0, 4, 4)})));
  }
  ops::DrainOptions o;
  o.timeout = std::chrono::milliseconds(20);
  o.sleep = [](std::chrono::milliseconds) { std::this_thread::sleep_for(std::chrono::milliseconds(15)); };
  auto r = ops::drain_node(*c.client, node("n1"), o);
  CHECK(r.outcome == ops::DrainOutcome::timed_out);
  CHECK(r.message.find("pdb train/ddp-pdb allows 0 disruptions") != std::string::npos);
  CHECK(r.remaining == std::vector<std::string>{"train/w0"});
  CHECK(fake.unexpected().empty());
}

TEST_CASE("drain: an already cordoned node with its pods gone is drained again without writes", "[drain]") {
  FakeClient c;
  c.fake->on("GET", "/api/v1/pods", json_answer(200, list_of({PodBuilder("kube-system", "etcd").mirror()})), kOnN1);
  ops::DrainOptions o;
  auto r = ops::drain_node(*c.client, node("n1", "3", json::array(), true), o);
  CHECK(r.outcome == ops::DrainOutcome::drained);
  CHECK(r.cordon == "already cordoned");
  CHECK(r.skipped == 1);
  CHECK(mutating_requests(*c.fake) == 0);
  CHECK(c.fake->unexpected().empty());
}

TEST_CASE("rolling: drains, runs the command with the node as $1 and GPUCTL_NODE, uncordons, stops at a failure",
          "[drain]") {
  FakeClient c;
  auto& fake = *c.fake;
  fake.on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()))
      .on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "3").dump()));
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({})), kOnN1);
  fake.on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()))
      .on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()));
  fake.on("PATCH", "/api/v1/nodes/n2", json_answer(200, node("n2", "2", json::array(), true).dump()));
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({})), "fieldSelector=spec.nodeName%3Dn2");
  ops::RollingOptions o;
  o.drain.sleep = [](std::chrono::milliseconds) {};
  // The node is an argument, never spliced into the shell text; n2 fails.
  o.exec = "test \"$1\" = \"$GPUCTL_NODE\" && test \"$1\" = n1";
  o.uncordon = true;
  o.wait_ready = std::chrono::milliseconds(1000);
  auto results = ops::rolling_maintenance(*c.client, {node("n1"), node("n2"), node("n3")}, o);
  REQUIRE(results.size() == 3);
  CHECK(results[0].ok);
  CHECK(results[0].exec == "ok");
  CHECK(results[0].ready == "ready");
  CHECK(results[0].uncordon == "uncordoned");
  CHECK_FALSE(results[1].ok);
  CHECK(results[1].exec == "failed: exited with code 1");
  CHECK(results[1].uncordon.empty());  // a failed node stays cordoned
  CHECK(results[2].not_started);
  CHECK(fake.unexpected().empty());
  // The uncordon patch clears unschedulable.
  const auto& last = fake.requests();
  auto uncordon = std::find_if(last.begin(), last.end(), [](const kube::HttpRequest& r) {
    return r.method == "PATCH" && r.body.find("\"unschedulable\":null") != std::string::npos;
  });
  CHECK(uncordon != last.end());
}

TEST_CASE("drain and rolling results have one schema, built in lib", "[drain]") {
  gpuctl::ops::NodeDrainResult drained;
  drained.node = "gpu-1";
  drained.outcome = gpuctl::ops::DrainOutcome::drained;
  drained.cordon = "cordoned";
  drained.evicted = 3;
  drained.elapsed = std::chrono::milliseconds(1500);
  gpuctl::ops::NodeChange missing;
  missing.node = "gpu-9";
  auto list = gpuctl::ops::to_json(std::vector<gpuctl::ops::NodeDrainResult>{drained}, {missing});
  CHECK(list["apiVersion"] == "gpuctl.io/v1alpha1");
  CHECK(list["kind"] == "DrainResultList");
  REQUIRE(list["items"].size() == 2);
  CHECK(list["items"][0]["result"] == "drained");
  CHECK(list["items"][0]["evicted"] == 3);
  CHECK(list["items"][0]["seconds"] == 1.5);
  CHECK(list["items"][1] == nlohmann::json{{"node", "gpu-9"}, {"result", "failed"}, {"message", "not found"}});

  gpuctl::ops::RollingResult done{drained, "ok", "ready", "uncordoned", true, false, false};
  gpuctl::ops::RollingResult waiting;
  waiting.drain.node = "gpu-2";
  waiting.not_started = true;
  auto rolling = gpuctl::ops::to_json(std::vector<gpuctl::ops::RollingResult>{done, waiting});
  CHECK(rolling["kind"] == "RollingMaintenanceResult");
  CHECK(rolling["items"][0]["rollingResult"] == "done");
  CHECK(rolling["items"][0]["uncordon"] == "uncordoned");
  CHECK(rolling["items"][1]["rollingResult"] == "not_started");
  CHECK(gpuctl::ops::rolling_result(waiting) == "not_started");
}
