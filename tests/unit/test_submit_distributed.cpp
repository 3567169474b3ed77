// gpuctl submit for jobs of several pods: --nodes/--gpus-per-node (an Indexed Job, one pod per
// node, the rendezvous Service and torchrun's environment), --completions/--parallelism, --queue
// (Kueue), the pre-flight checks that count nodes rather than GPUs, and sending the Service.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "test_submit_preflight_support.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using gpuctl::testing::status_body;
using namespace gpuctl::testing::preflight;

namespace {

ops::SubmitFlags ddp_flags() {
  ops::SubmitFlags f;
  f.name = "llama";
  f.image = "nvcr.io/nvidia/pytorch:24.05-py3";
  f.nodes = "3";
  f.gpus_per_node = "8";
  f.command = {"torchrun", "train.py"};
  return f;
}

ops::BuiltJob built_from(const ops::SubmitFlags& flags, const std::string& ns = "team-a") {
  auto spec = ops::parse_submit_flags(flags);
  REQUIRE(spec);
  auto built = ops::build_job(*spec, ops::GpuPlacement{}, ns);
  REQUIRE(built);
  return *built;
}

// The value (or valueFrom) of a variable of the job's container, null when it has none.
json env_of(const json& job, const std::string& name) {
  for (const auto& e : job["spec"]["template"]["spec"]["containers"][0]["env"]) {
    if (e["name"] == name) return e.contains("value") ? e["value"] : e["valueFrom"];
  }
  return nullptr;
}

std::string usage_error(ops::SubmitFlags flags) {
  auto spec = ops::parse_submit_flags(flags);
  REQUIRE_FALSE(spec);
  CHECK(spec.error().code == Errc::invalid_argument);
  return spec.error().message;
}

// Discovery of Kueue as the API server answers it when Kueue's CRDs are installed.
void serve_kueue(testing::FakeTransport& fake, const std::vector<std::string>& queues) {
  fake.on("GET", "/apis/kueue.x-k8s.io", json_answer(200, R"({"kind":"APIGroup","name":"kueue.x-k8s.io",
    "versions":[{"groupVersion":"kueue.x-k8s.io/v1beta1","version":"v1beta1"}],
    "preferredVersion":{"groupVersion":"kueue.x-k8s.io/v1beta1","version":"v1beta1"}})"));
  fake.on("GET", "/apis/kueue.x-k8s.io/v1beta1", json_answer(200, R"({"kind":"APIResourceList",
    "groupVersion":"kueue.x-k8s.io/v1beta1","resources":[{"name":"localqueues","namespaced":true,"kind":"LocalQueue"},
    {"name":"clusterqueues","namespaced":false,"kind":"ClusterQueue"}]})"));
  json list = {{"kind", "LocalQueueList"}, {"apiVersion", "kueue.x-k8s.io/v1beta1"}, {"metadata", json::object()}};
  list["items"] = json::array();
  for (const auto& q : queues) list["items"].push_back({{"metadata", {{"name", q}, {"namespace", "team-a"}}}});
  fake.on("GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues", json_answer(200, list.dump()));
}

}  // namespace

TEST_CASE("submit distributed: --nodes makes an Indexed Job of one pod per node", "[submit][distributed]") {
  ops::BuiltJob built = built_from(ddp_flags());
  const json& spec = built.job["spec"];
  CHECK(spec["completionMode"] == "Indexed");
  CHECK(spec["completions"] == 3);
  CHECK(spec["parallelism"] == 3);
  const json& pod = spec["template"]["spec"];
  CHECK(pod["subdomain"] == "llama");
  CHECK(pod["affinity"]["podAntiAffinity"] == json::parse(R"({"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "llama"}},
     "topologyKey": "kubernetes.io/hostname"}]})"));
  CHECK(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8");
  CHECK(pod["containers"][0]["ports"][0]["containerPort"] == 29500);
}

TEST_CASE("submit distributed: every pod gets torchrun's environment with its index as rank", "[submit][distributed]") {
  ops::BuiltJob built = built_from(ddp_flags());
  const json index =
      json::parse(R"({"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}})");
  CHECK(env_of(built.job, "MASTER_ADDR") == "llama-0.llama");
  CHECK(env_of(built.job, "MASTER_PORT") == "29500");
  CHECK(env_of(built.job, "WORLD_SIZE") == "3");
  CHECK(env_of(built.job, "RANK") == index);
  CHECK(env_of(built.job, "NODE_RANK") == index);
  CHECK(env_of(built.job, "PET_NNODES") == "3");
  CHECK(env_of(built.job, "PET_NPROC_PER_NODE") == "8");
  CHECK(env_of(built.job, "PET_NODE_RANK") == index);
  CHECK(env_of(built.job, "PET_MASTER_ADDR") == "llama-0.llama");
  CHECK(env_of(built.job, "PET_MASTER_PORT") == "29500");

  // An --env of the same name wins; MASTER_PORT moves the whole rendezvous, Service included.
  ops::SubmitFlags f = ddp_flags();
  f.env = {"MASTER_PORT=23456", "WORLD_SIZE=24"};
  ops::BuiltJob own = built_from(f);
  CHECK(env_of(own.job, "MASTER_PORT") == "23456");
  CHECK(env_of(own.job, "PET_MASTER_PORT") == "23456");
  CHECK(env_of(own.job, "WORLD_SIZE") == "24");
  int world_sizes = 0;
  for (const auto& e : own.job["spec"]["template"]["spec"]["containers"][0]["env"])
    world_sizes += e["name"] == "WORLD_SIZE";
  CHECK(world_sizes == 1);
  CHECK(own.service["spec"]["ports"][0]["port"] == 23456);
  CHECK(own.job["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 23456);
}

TEST_CASE("submit distributed: the rendezvous Service is headless and selects the job's pods",
          "[submit][distributed]") {
  ops::SubmitFlags f = ddp_flags();
  f.labels = {"team=nlp"};
  ops::BuiltJob built = built_from(f);
  CHECK(built.service == json::parse(R"({"apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "llama", "namespace": "team-a",
                 "labels": {"app.kubernetes.io/managed-by": "gpuctl", "team": "nlp"}},
    "spec": {"clusterIP": "None", "selector": {"batch.kubernetes.io/job-name": "llama"},
             "publishNotReadyAddresses": true,
             "ports": [{"name": "rendezvous", "port": 29500, "targetPort": 29500, "protocol": "TCP"}]}})"));
  bool says_rejoin = false;
  for (const auto& n : built.notes)
    says_rejoin = says_rejoin || n.find("replaced alone, under its index") != std::string::npos;
  CHECK(says_rejoin);
}

TEST_CASE("submit distributed: --completions and --parallelism make a plain parallel job", "[submit][distributed]") {
  ops::SubmitFlags f;
  f.name = "sweep";
  f.image = "busybox";
  f.gpus = "1";
  f.completions = "20";
  f.parallelism = "4";
  ops::BuiltJob built = built_from(f);
  CHECK(built.job["spec"]["completions"] == 20);
  CHECK(built.job["spec"]["parallelism"] == 4);
  CHECK_FALSE(built.job["spec"].contains("completionMode"));
  CHECK(built.service.is_null());
  CHECK_FALSE(built.job["spec"]["template"]["spec"].contains("affinity"));
}

TEST_CASE("submit distributed: the flags' mistakes are named", "[submit][distributed]") {
  ops::SubmitFlags f = ddp_flags();
  f.gpus = "8";
  CHECK(usage_error(f).starts_with("--gpus and --gpus-per-node both say the GPUs of each pod"));
  f = ddp_flags();
  f.gpus_per_node.clear();
  f.gpus = "8";
  CHECK(usage_error(f).starts_with("--nodes 3 with --gpus is ambiguous"));
  f = ddp_flags();
  f.completions = "3";
  CHECK(usage_error(f) == "--nodes 3 runs 3 pods at once, one per node: leave out --completions and --parallelism");
  f = ddp_flags();
  f.nodes = "0";
  CHECK(usage_error(f) == "--nodes \"0\": expected a whole number from 1 to 10000");
  f = ddp_flags();
  f.name = "7b-run";
  CHECK(usage_error(f).find("must start with a letter") != std::string::npos);
  f = ddp_flags();
  f.parallelism = "x";
  f.nodes.clear();
  CHECK(usage_error(f) == "--parallelism \"x\": expected a whole number from 1 to 100000");
  f = ddp_flags();
  f.queue = "Team_A";
  CHECK(usage_error(f).starts_with("--queue \"Team_A\" is not a LocalQueue name"));
  ops::SubmitFlags m;
  m.from_manifest = true;
  m.nodes = "2";
  CHECK(usage_error(m) == "--nodes cannot be combined with -f: set it in the manifest's Job spec");
  f = ddp_flags();
  f.gpus_per_node.clear();
  CHECK(usage_error(f).starts_with("--gpus is required"));
}

TEST_CASE("submit distributed: --queue hands the job to Kueue, suspended, from flags and beside -f",
          "[submit][distributed]") {
  ops::SubmitFlags f = ddp_flags();
  f.queue = "team-a-queue";
  ops::BuiltJob built = built_from(f);
  CHECK(built.job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-queue");
  CHECK(built.job["spec"]["suspend"] == true);

  ops::SubmitFlags m;
  m.from_manifest = true;
  m.queue = "team-a-queue";
  auto spec = ops::parse_submit_flags(m);
  REQUIRE(spec);
  auto completed = ops::complete_job(job(1), *spec, ops::GpuPlacement{}, "team-a", false, "job.yaml");
  REQUIRE(completed);
  CHECK(completed->job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-queue");
  CHECK(completed->job["spec"]["suspend"] == true);
}

TEST_CASE("submit distributed: gpu-capacity counts nodes that each hold one pod", "[submit][distributed][preflight]") {
  ops::PreflightInput in;
  in.job = built_from(ddp_flags()).job;
  in.nodes = {gpu_node("h1", kH100, 8), gpu_node("h2", kH100, 8), gpu_node("h3", kH100, 4),
              cordoned(gpu_node("h4", kH100, 8))};
  auto f = ops::check_gpu_capacity(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == ops::FindingSeverity::refusal);
  CHECK(f[0].message == "the job runs 3 pods at once, one per node, but only 2 schedulable nodes have 8 GPUs (h1, h2)");
  // 24 GPUs exist on two nodes, but not on three: the sum is not what counts.
  in.nodes = {gpu_node("h1", kH100, 16), gpu_node("h2", kH100, 8)};
  REQUIRE(ops::check_gpu_capacity(in).size() == 1);
  in.nodes.push_back(gpu_node("h3", kH100, 8));
  CHECK(ops::check_gpu_capacity(in).empty());
  // Without the anti-affinity, one big node would do.
  json plain = in.job;
  plain["spec"]["template"]["spec"].erase("affinity");
  in.job = plain;
  in.nodes = {gpu_node("h1", kH100, 8)};
  CHECK(ops::check_gpu_capacity(in).empty());
}

TEST_CASE("submit distributed: gpu-free-now counts nodes with a pod's GPUs free", "[submit][distributed][preflight]") {
  ops::PreflightInput in;
  in.job = built_from(ddp_flags()).job;
  in.nodes = {gpu_node("h1", kH100, 16), gpu_node("h2", kH100, 8), gpu_node("h3", kH100, 8)};
  CHECK(ops::check_gpu_free_now(in).empty());
  in.pods = {running_pod("busy", "h3", 4)};
  auto f = ops::check_gpu_free_now(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == ops::FindingSeverity::warning);
  CHECK(f[0].message ==
        "the job needs 3 nodes with 8 GPUs free each (one pod per node), 2 have now (28 free across 3 nodes); the "
        "rest of its pods will wait in Pending");
  // Too few nodes at all: gpu-capacity refuses, and free-now says nothing more.
  in.nodes = {gpu_node("h1", kH100, 16), gpu_node("h2", kH100, 8)};
  in.pods.clear();
  CHECK(ops::check_gpu_free_now(in).empty());
}

TEST_CASE("submit distributed: queue refuses what Kueue would never admit", "[submit][distributed][preflight]") {
  ops::SubmitFlags flags = ddp_flags();
  flags.queue = "ml";
  ops::PreflightInput in;
  in.job = built_from(flags).job;
  CHECK(ops::check_queue(in).empty());  // not read: nothing said
  in.kueue = ops::KueueView{};
  auto f = ops::check_queue(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == ops::FindingSeverity::refusal);
  CHECK(f[0].message.find("this cluster does not serve Kueue (no kueue.x-k8s.io API): the job would stay suspended "
                          "for ever") != std::string::npos);
  in.kueue = ops::KueueView{true, true, {"research", "team-a-queue"}};
  f = ops::check_queue(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message ==
        "namespace team-a has no LocalQueue \"ml\", so Kueue would never admit the job; its LocalQueues: research, "
        "team-a-queue (kubectl get localqueues -n team-a)");
  in.kueue = ops::KueueView{true, true, {"ml"}};
  CHECK(ops::check_queue(in).empty());
  in.kueue = ops::KueueView{true, false, {}};  // the queues could not be read: no refusal on a guess
  CHECK(ops::check_queue(in).empty());
  CHECK(ops::check_gang(in).empty());  // queued: Kueue gangs it
}

TEST_CASE("submit distributed: gang warns that nothing starts the pods together", "[submit][distributed][preflight]") {
  ops::PreflightInput in;
  in.job = built_from(ddp_flags()).job;
  in.kueue = ops::KueueView{};
  auto f = ops::check_gang(in);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == ops::FindingSeverity::warning);
  CHECK(
      f[0].message.starts_with("no gang scheduler here (Kueue is not installed): the 3 pods are scheduled one at a "
                               "time, not as a gang"));
  in.kueue = ops::KueueView{true, true, {"team-a-queue"}};
  f = ops::check_gang(in);
  REQUIRE(f.size() == 1);
  CHECK(
      f[0].message.ends_with("pass --queue LOCALQUEUE and Kueue admits them together (LocalQueues in team-a: "
                             "team-a-queue)"));
  // Another scheduler (Volcano, KAI) may gang them itself; a one-pod job has nothing to gang.
  in.job["spec"]["template"]["spec"]["schedulerName"] = "volcano";
  CHECK(ops::check_gang(in).empty());
  in.job = job(8);
  CHECK(ops::check_gang(in).empty());
}

TEST_CASE("submit distributed: read_kueue reads discovery and the namespace's LocalQueues", "[submit][distributed]") {
  ops::SubmitFlags flags = ddp_flags();
  flags.queue = "ml";
  const json queued = built_from(flags).job;
  {
    FakeClient c;
    serve_kueue(*c.fake, {"ml", "batch"});
    auto view = ops::read_kueue(*c.client, queued);
    REQUIRE(view);
    CHECK(view->served);
    CHECK(view->queues_listed);
    CHECK(view->local_queues == std::vector<std::string>{"batch", "ml"});
    CHECK(c.fake->unexpected().empty());
  }
  {
    FakeClient c;  // no Kueue: the group is not served
    c.fake->on("GET", "/apis/kueue.x-k8s.io", json_answer(404, status_body(404, "NotFound", "not found").dump()));
    auto view = ops::read_kueue(*c.client, queued);
    REQUIRE(view);
    CHECK_FALSE(view->served);
  }
  {
    FakeClient c;  // a job that needs no Kueue reads nothing
    CHECK_FALSE(ops::read_kueue(*c.client, job(1)));
    CHECK(c.fake->requests().empty());
  }
}

TEST_CASE("submit distributed: the Service is sent after the Job, owned by it", "[submit][distributed]") {
  ops::BuiltJob built = built_from(ddp_flags());
  json created = built.job;
  created["metadata"]["uid"] = "job-uid";
  const std::string services = "/api/v1/namespaces/team-a/services";
  {
    FakeClient c;
    c.fake->on("POST", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(201, created.dump()));
    c.fake->on("POST", services, json_answer(201, built.service.dump()));
    auto sent = ops::send_submission(*c.client, built, false);
    REQUIRE(sent);
    CHECK(c.fake->unexpected().empty());
    const auto& requests = c.fake->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[1].url.find("fieldValidation=Strict") != std::string::npos);
    CHECK(json::parse(requests[1].body)["metadata"]["ownerReferences"] == json::parse(R"([{"apiVersion": "batch/v1",
      "kind": "Job", "name": "llama", "uid": "job-uid", "controller": false, "blockOwnerDeletion": false}])"));
    CHECK(sent->service["kind"] == "Service");
  }
  {
    FakeClient c;  // the Service is refused: the pods could never meet, so the Job goes again
    c.fake->on("POST", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(201, created.dump()));
    c.fake->on("POST", services,
               json_answer(409, status_body(409, "AlreadyExists", "services \"llama\" already exists").dump()));
    c.fake->on("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/llama", json_answer(200, created.dump()));
    auto sent = ops::send_submission(*c.client, built, false);
    REQUIRE_FALSE(sent);
    CHECK(sent.error().message.starts_with("service team-a/llama already exists"));
    CHECK(sent.error().message.ends_with("(job team-a/llama, created just before, was deleted again)"));
    const json options = json::parse(c.fake->requests().back().body);
    CHECK(options["preconditions"]["uid"] == "job-uid");
    CHECK(options["propagationPolicy"] == "Background");
  }
  {
    FakeClient c;  // a server dry run: both with dryRun=All, no owner (the Job has no uid)
    c.fake->on("POST", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(201, built.job.dump()), "dryRun=All");
    c.fake->on("POST", "/api/v1/namespaces/team-a/pods", json_answer(201, R"({"kind":"Pod"})"), "dryRun=All");
    c.fake->on("POST", services, json_answer(201, built.service.dump()), "dryRun=All");
    auto sent = ops::send_submission(*c.client, built, true);
    REQUIRE(sent);
    CHECK(c.fake->unexpected().empty());
    CHECK_FALSE(json::parse(c.fake->requests().back().body)["metadata"].contains("ownerReferences"));
  }
}
