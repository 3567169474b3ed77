// gpuctl submit -f with a JobSet or a PyTorchJob: the kinds as data, the completion of upstream
// example manifests (tests/fixtures/workloads, see SOURCES.md), the pre-flight checks over the sum
// of the pods, and the command in-process over a fake API (served or not, dry runs, the create).
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/fixtures.hpp"
#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"

using gpuctl::Errc;
using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using json = nlohmann::json;
namespace ops = gpuctl::ops;

namespace {

json manifest(const std::string& file) {
  auto parsed = gpuctl::kube::parse_manifest(gpuctl::testing::fixture("workloads/" + file), file);
  REQUIRE(parsed);
  return *parsed;
}

json gpu_node(const std::string& name, int gpus) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
          {"spec",
           {{"taints", json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

ops::SubmitSpec manifest_spec(const std::string& gpu_type = "") {
  ops::SubmitFlags flags;
  flags.from_manifest = true;
  flags.gpu_type = gpu_type;
  auto spec = ops::parse_submit_flags(flags);
  REQUIRE(spec);
  return *spec;
}

ops::BuiltWorkload complete(const json& m, const ops::SubmitSpec& spec, const std::vector<json>& nodes,
                            const std::string& ns = "team-a") {
  auto placement = ops::derive_gpu_placement(nodes, spec.gpu_type, "nvidia.com/gpu");
  auto built = ops::complete_workload(m, spec, placement, ns, false, "w.yaml");
  INFO((built ? std::string() : built.error().message));
  REQUIRE(built);
  return *built;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const auto& l) { return l.find(text) != std::string::npos; });
}

// The nccl example's Worker with more replicas: the shape of a real distributed run.
json pytorch_with_workers(int workers) {
  json m = manifest("pytorchjob-mnist-nccl.yaml");
  m["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers;
  return m;
}

json list(std::vector<json> items) {
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", json::object()}, {"items", std::move(items)}};
}

json api_resources(const std::string& group_version, const std::string& plural) {
  return {{"kind", "APIResourceList"},
          {"groupVersion", group_version},
          {"resources", json::array({{{"name", plural}, {"namespaced", true}}})}};
}

// A cluster serving JobSets, two H100 nodes with 8 GPUs each, no pods, quotas or limits in team-a.
void serve_jobsets(CliHarness& h) {
  h.fake()
      .on("GET", "/apis/jobset.x-k8s.io/v1alpha2",
          json_answer(200, api_resources("jobset.x-k8s.io/v1alpha2", "jobsets").dump()))
      .on("GET", "/api/v1/nodes", json_answer(200, list({gpu_node("h100-0", 8), gpu_node("h100-1", 8)}).dump()))
      .on("GET", "/api/v1/pods", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/limitranges", json_answer(200, list({}).dump()));
}

}  // namespace

TEST_CASE("submit workloads: the upstream examples are found by apiVersion and kind", "[submit][workloads]") {
  CHECK(ops::find_workload_kind(manifest("jobset-paralleljobs.yaml"))->kind == "JobSet");
  CHECK(ops::find_workload_kind(manifest("jobset-success-policy.yaml"))->resource == "jobsets");
  CHECK(ops::find_workload_kind(manifest("pytorchjob-simple.yaml"))->api_version() == "kubeflow.org/v1");
  json other_version = manifest("jobset-paralleljobs.yaml");
  other_version["apiVersion"] = "jobset.x-k8s.io/v1alpha1";
  CHECK(ops::find_workload_kind(other_version) == nullptr);
  CHECK(ops::find_workload_kind(json{{"apiVersion", "batch/v1"}, {"kind", "Job"}}) == nullptr);

  // Any other kind keeps the Job's error, which now lists every kind taken.
  auto deploy = ops::check_manifest(json{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}}, "d.yaml");
  REQUIRE_FALSE(deploy);
  CHECK(deploy.error().code == Errc::invalid_argument);
  CHECK(deploy.error().message ==
        "d.yaml: is apps/v1 Deployment; gpuctl submit takes a batch/v1 Job, a jobset.x-k8s.io/v1alpha2 JobSet or a "
        "kubeflow.org/v1 PyTorchJob");
}

TEST_CASE("submit workloads: a JobSet's Jobs get the Job defaults and the JobSet its ttl", "[submit][workloads]") {
  auto built = complete(manifest("jobset-paralleljobs.yaml"), manifest_spec(), {gpu_node("h100-0", 8)});
  const json& jobs = built.object["spec"]["replicatedJobs"];
  REQUIRE(built.groups.size() == 2);
  CHECK(built.groups[0].name == "workers");
  CHECK(built.groups[0].pods == 4);  // one Job of parallelism 4
  CHECK(built.groups[1].pods == 1);
  for (const auto& rj : jobs) {
    const json& job_spec = rj["template"]["spec"];
    CHECK(job_spec["backoffLimit"] == 0);  // the manifest's, kept
    CHECK(job_spec["template"]["spec"]["restartPolicy"] == "Never");
    CHECK(job_spec["podFailurePolicy"]["rules"][0]["action"] == "Ignore");
    CHECK_FALSE(job_spec.contains("ttlSecondsAfterFinished"));  // the JobSet's own field holds it
  }
  CHECK(built.object["spec"]["ttlSecondsAfterFinished"] == ops::kDefaultTtlAfterFinishedSeconds);
  CHECK(built.object["metadata"]["namespace"] == "team-a");
  CHECK(built.object["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuctl");
  // Said once for the JobSet, not once per replicated job.
  REQUIRE(built.warnings.size() == 1);
  CHECK(built.warnings[0].starts_with("the JobSet requests no GPUs"));
  CHECK(has(built.notes, "ttlSecondsAfterFinished 604800: the JobSet and its pods are deleted"));
  CHECK(ops::describe_workload_pods(built) == "5 pods: workers 4 x no GPUs, driver 1 x no GPUs");

  // replicas multiply the Job's pods; the group's Job for the checks says how many at once.
  json m = manifest("jobset-success-policy.yaml");
  m["spec"]["replicatedJobs"][1]["replicas"] = 3;
  auto scaled = complete(m, manifest_spec(), {});
  CHECK(scaled.groups[1].pods == 6);
  CHECK(scaled.groups[1].job["spec"]["parallelism"] == 6);
  CHECK(scaled.groups[1].job["metadata"]["name"] == "success-policy-workers");
}

TEST_CASE("submit workloads: a PyTorchJob's templates get GPU placement and its runPolicy the Job-level defaults",
          "[submit][workloads]") {
  auto built = complete(pytorch_with_workers(3), manifest_spec("H100"), {gpu_node("h100-0", 8)});
  const json& replicas = built.object["spec"]["pytorchReplicaSpecs"];
  for (const char* type : {"Master", "Worker"}) {
    CAPTURE(type);
    const json& pod = replicas[type]["template"]["spec"];
    const json& resources = pod["containers"][0]["resources"];
    CHECK(resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"]);
    CHECK(pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3");
    CHECK(pod["tolerations"][0]["key"] == "nvidia.com/gpu");
    CHECK_FALSE(pod.contains("restartPolicy"));             // the operator sets the pod's from the replica spec
    CHECK(replicas[type]["restartPolicy"] == "OnFailure");  // the manifest's, kept
  }
  const json& run_policy = built.object["spec"]["runPolicy"];
  CHECK(run_policy["backoffLimit"] == ops::kDefaultBackoffLimit);
  CHECK(run_policy["ttlSecondsAfterFinished"] == ops::kDefaultTtlAfterFinishedSeconds);
  CHECK_FALSE(built.object["spec"].contains("backoffLimit"));
  // Notes both templates got are said once, unprefixed.
  CHECK(has(built.notes, "runs on H100 nodes only (nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)"));
  CHECK_FALSE(has(built.notes, "Master: runs on"));
  CHECK(has(built.notes, "no podFailurePolicy: a PyTorchJob has no such field"));
  CHECK(built.warnings.empty());
  CHECK(ops::describe_workload_pods(built) == "4 pods: Master 1 x 1 nvidia.com/gpu, Worker 3 x 1 nvidia.com/gpu");

  // Without a restartPolicy the replicas get Never, as a Job's pods do; flags win over the manifest.
  json m = manifest("pytorchjob-mnist-nccl.yaml");
  m["spec"]["pytorchReplicaSpecs"]["Worker"].erase("restartPolicy");
  auto spec = manifest_spec();
  spec.backoff_limit = 5;
  spec.ttl_disabled = true;
  auto defaulted = complete(m, spec, {});
  CHECK(defaulted.object["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "Never");
  CHECK(defaulted.object["spec"]["runPolicy"]["backoffLimit"] == 5);
  CHECK_FALSE(defaulted.object["spec"]["runPolicy"].contains("ttlSecondsAfterFinished"));
  CHECK(has(defaulted.notes, "Worker: restartPolicy Never"));
}

TEST_CASE("submit workloads: manifest mistakes name the field", "[submit][workloads]") {
  auto spec = manifest_spec();
  ops::GpuPlacement placement;
  auto error_of = [&](const json& m, bool explicit_namespace = false) {
    auto built = ops::complete_workload(m, spec, placement, "team-a", explicit_namespace, "w.yaml");
    REQUIRE_FALSE(built);
    CHECK(built.error().code == Errc::invalid_argument);
    return built.error().message;
  };
  json m = manifest("jobset-paralleljobs.yaml");
  m["spec"]["replicatedJobs"] = json::array();
  CHECK(error_of(m) == "w.yaml: spec.replicatedJobs is missing or empty; a JobSet needs at least one");
  m = manifest("jobset-paralleljobs.yaml");
  m["spec"]["replicatedJobs"][1]["replicas"] = -1;
  CHECK(error_of(m) == "w.yaml: spec.replicatedJobs[1].replicas -1: expected a whole number from 0 to 10000");
  m = manifest("pytorchjob-simple.yaml");
  m["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes";
  CHECK(error_of(m) ==
        "w.yaml: spec.pytorchReplicaSpecs.Worker.restartPolicy \"Sometimes\": expected one of Always, OnFailure, "
        "Never, ExitCode");
  // A template's own mistakes are named as a Job's are, with where the template is.
  m = manifest("pytorchjob-simple.yaml");
  m["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"] = {
      {"requests", {{"nvidia.com/gpu", "2"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}};
  CHECK(error_of(m).starts_with("w.yaml (PyTorchJob spec.pytorchReplicaSpecs.Master): container \"pytorch\" requests"));
  // The upstream example names namespace kubeflow: -n another is a contradiction.
  CHECK(error_of(manifest("pytorchjob-simple.yaml"), true) ==
        "w.yaml (PyTorchJob spec.pytorchReplicaSpecs.Master): the manifest's namespace \"kubeflow\" does not match "
        "-n \"team-a\"; drop one of them");
}

TEST_CASE("submit workloads: quota and free GPUs are judged on the sum of the pods", "[submit][workloads]") {
  auto built = complete(pytorch_with_workers(3), manifest_spec(), {gpu_node("h100-0", 3)});
  ops::PreflightInput input;
  input.nodes = {gpu_node("h100-0", 3)};
  input.quotas = {
      {{"metadata", {{"name", "gpus"}, {"namespace", "team-a"}}},
       {"spec", {{"hard", {{"requests.nvidia.com/gpu", "3"}}}}},
       {"status", {{"hard", {{"requests.nvidia.com/gpu", "3"}}}, {"used", {{"requests.nvidia.com/gpu", "0"}}}}}}};
  auto findings = ops::run_workload_preflight(input, built);
  std::vector<std::string> lines;
  for (const auto& f : findings)
    lines.push_back(f.check + " " + std::string(ops::to_string(f.severity)) + ": " + f.message);
  INFO(lines.size());
  // Master (1) and Worker (3) each fit under the quota and on the node; the 4 together do not.
  CHECK(has(lines,
            "quota refusal: quota team-a/gpus allows 3 requests.nvidia.com/gpu, 0 in use, the PyTorchJob's "
            "pods ask for 4 together (Master 1, Worker 3)"));
  CHECK(has(lines, "gpu-free-now warning: only 3 of the job's 4 pods"));
  CHECK_FALSE(has(lines, "gpu-capacity"));
  CHECK(ops::has_refusal(findings));

  // One pod too big for any node is said for the group that asks for it.
  json m = pytorch_with_workers(1);
  m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
   ["nvidia.com/gpu"] = 4;
  auto big = complete(m, manifest_spec(), {gpu_node("h100-0", 3)});
  ops::PreflightInput small;
  small.nodes = {gpu_node("h100-0", 3)};
  auto refused = ops::run_workload_preflight(small, big);
  for (const auto& f : refused) UNSCOPED_INFO(f.check + ": " + f.message);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].check == "gpu-capacity");
  CHECK(refused[0].message.starts_with("Worker: no schedulable node has 4 GPUs"));
}

TEST_CASE("cli: submit -f jobset.yaml where JobSets are not served is one line and exit 6",
          "[submit][workloads][cli]") {
  CliHarness h;
  h.fake().on("GET", "/apis/jobset.x-k8s.io/v1alpha2", json_answer(404, R"({"kind":"Status","code":404})"));
  auto r = h.run({"submit", "-f", gpuctl::testing::fixture_path("workloads/jobset-paralleljobs.yaml"), "-n", "team-a"});
  CHECK(r.exit_code == 6);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "error: the cluster does not serve jobset.x-k8s.io/v1alpha2 JobSets (jobsets): install the JobSet controller "
        "and its CRD (https://jobset.sigs.k8s.io/docs/installation/) to submit one, or submit a batch/v1 Job\n");
  CHECK(h.fake().count("POST") == 0);
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: submit -f jobset.yaml --wait is refused before any request", "[submit][workloads][cli]") {
  CliHarness h;
  auto r = h.run({"submit", "-f", gpuctl::testing::fixture_path("workloads/jobset-paralleljobs.yaml"), "--wait"});
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "error: --wait and --follow follow a batch/v1 Job, not a JobSet: submit without them and watch it with "
        "kubectl get jobsets NAME -w\n");
  CHECK(h.fake().requests().empty());
}

TEST_CASE("cli: submit -f jobset.yaml prints what a client dry run would send and creates it strictly",
          "[submit][workloads][cli]") {
  const std::string file = gpuctl::testing::fixture_path("workloads/jobset-success-policy.yaml");
  CliHarness dry;
  serve_jobsets(dry);
  auto d = dry.run({"submit", "-f", file, "-n", "team-a", "--dry-run=client", "-o", "json"});
  INFO(d.err);
  REQUIRE(d.exit_code == 0);
  CHECK(dry.fake().count("POST") == 0);
  json printed = json::parse(d.out);
  CHECK(printed["kind"] == "JobSet");
  CHECK(printed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never");

  CliHarness h;
  serve_jobsets(h);
  json answer = printed;
  answer["metadata"]["uid"] = "js-1";
  h.fake().on("POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets", json_answer(201, answer.dump()));
  auto r = h.run({"submit", "-f", file, "-n", "team-a"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.starts_with("JobSet team-a/success-policy submitted: 3 pods: leader 1 x no GPUs, workers 2 x no GPUs\n"));
  const auto& post = h.fake().requests().back();
  CHECK(post.method == "POST");
  CHECK(post.url.find("fieldValidation=Strict") != std::string::npos);
  CHECK(post.url.find("dryRun") == std::string::npos);
  CHECK(json::parse(post.body) == printed);  // exactly what the client dry run printed
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: submit -f pytorchjob.yaml --dry-run=server dry-runs the object and a pod of each template",
          "[submit][workloads][cli]") {
  CliHarness h;
  const json answer = manifest("pytorchjob-mnist-nccl.yaml");
  h.fake()
      .on("GET", "/apis/kubeflow.org/v1", json_answer(200, api_resources("kubeflow.org/v1", "pytorchjobs").dump()))
      .on("GET", "/api/v1/nodes", json_answer(200, list({gpu_node("h100-0", 8)}).dump()))
      .on("GET", "/api/v1/pods", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/limitranges", json_answer(200, list({}).dump()))
      .on("POST", "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs", json_answer(201, answer.dump()))
      .on("POST", "/api/v1/namespaces/team-a/pods", json_answer(201, R"({"kind":"Pod"})"))
      .on("POST", "/api/v1/namespaces/team-a/pods", json_answer(201, R"({"kind":"Pod"})"));
  auto r = h.run({"submit", "-f", gpuctl::testing::fixture_path("workloads/pytorchjob-mnist-nccl.yaml"), "-n", "team-a",
                  "--dry-run=server", "-o", "name"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "pytorchjob.kubeflow.org/pytorch-dist-mnist-nccl\n");
  CHECK(h.fake().count("POST") == 3);
  for (const auto& req : h.fake().requests()) {
    if (req.method == "POST") CHECK(req.url.find("dryRun=All") != std::string::npos);
  }
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("submit workloads: --queue suspends the object itself, never the Jobs it makes", "[submit][workloads]") {
  ops::SubmitSpec spec = manifest_spec();
  spec.queue = "team-a-queue";
  const std::vector<json> nodes = {gpu_node("h1", 8)};
  ops::BuiltWorkload jobset = complete(manifest("jobset-paralleljobs.yaml"), spec, nodes);
  CHECK(jobset.object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-queue");
  CHECK(jobset.object["spec"]["suspend"] == true);
  for (const auto& rj : jobset.object["spec"]["replicatedJobs"]) {
    CHECK_FALSE(rj["template"]["spec"].contains("suspend"));
    const bool labelled = rj["template"].contains("metadata") && rj["template"]["metadata"].contains("labels") &&
                          rj["template"]["metadata"]["labels"].contains("kueue.x-k8s.io/queue-name");
    CHECK_FALSE(labelled);
  }
  CHECK(has(jobset.notes, "queued: created suspended with label kueue.x-k8s.io/queue-name=team-a-queue"));

  ops::BuiltWorkload pytorch = complete(manifest("pytorchjob-simple.yaml"), spec, nodes);
  CHECK(pytorch.object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-queue");
  CHECK(pytorch.object["spec"]["runPolicy"]["suspend"] == true);

  ops::PreflightInput in;  // a queue Kueue cannot admit is refused for them too
  in.kueue = ops::KueueView{};
  in.nodes = nodes;
  bool refused = false;
  for (const auto& f : ops::run_workload_preflight(in, jobset)) refused = refused || f.check == "queue";
  CHECK(refused);

  spec.queue.clear();
  spec.avoid_failed_nodes = true;
  auto avoid =
      ops::complete_workload(manifest("pytorchjob-simple.yaml"), spec, ops::GpuPlacement{}, "team-a", false, "w.yaml");
  REQUIRE_FALSE(avoid);
  CHECK(avoid.error().message ==
        "w.yaml: --avoid-failed-nodes takes a batch/v1 Job (it works while --wait watches the Job)");
}
