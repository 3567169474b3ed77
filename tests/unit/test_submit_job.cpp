// gpuctl submit's pure parts: flag validation, GPU placement from nodes, the Job builder (golden
// manifests in tests/data/submit) and the completion of user manifests.
#include <catch2/catch.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/kube/label_selector.hpp"
#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/ops/submit/submit.hpp"

using gpuctl::Errc;
using gpuctl::ops::SubmitFlags;
using json = nlohmann::json;

namespace {

json gpu_node(const std::string& name, const std::string& product, int gpus, json taints = json::array(),
              const std::string& label_key = "nvidia.com/gpu.product", bool unschedulable = false) {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"labels", {{label_key, product}}}}},
               {"spec", json::object()},
               {"status",
                {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                 {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                 {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (!taints.empty()) node["spec"]["taints"] = taints;
  if (unschedulable) node["spec"]["unschedulable"] = true;
  return node;
}

json taint(const std::string& key, const std::string& value, const std::string& effect) {
  return {{"key", key}, {"value", value}, {"effect", effect}};
}

std::vector<json> fleet() {
  auto pool = json::array({taint("nvidia.com/gpu", "present", "NoSchedule")});
  auto sick = pool;
  sick.push_back(taint("example.com/ecc-errors", "", "NoExecute"));  // one node's trouble, not the pool's
  return {gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB", 8, pool), gpu_node("a100-1", "NVIDIA-A100-SXM4-80GB", 8, sick),
          gpu_node("a100-2", "NVIDIA-A100-SXM4-40GB", 8, pool), gpu_node("t4-0", "Tesla-T4", 4),
          gpu_node("gke-t4", "nvidia-tesla-t4", 1, json::array(), "cloud.google.com/gke-accelerator")};
}

SubmitFlags train_flags() {
  SubmitFlags f;
  f.name = "bert";
  f.image = "nvcr.io/nvidia/pytorch:24.05-py3";
  f.gpus = "8";
  f.gpu_type = "NVIDIA-A100-SXM4-80GB";
  f.cpu = "16";
  f.memory = "128Gi";
  f.env = {"EPOCHS=3", "NCCL_DEBUG=INFO"};
  f.volumes = {"datasets:/data:ro", "checkpoints:/ckpt"};
  f.command = {"python", "train.py", "--lr=1e-4"};
  return f;
}

}  // namespace

TEST_CASE("submit flags: a full set of flags validates", "[submit]") {
  auto spec = gpuctl::ops::parse_submit_flags(train_flags());
  REQUIRE(spec);
  CHECK(*spec->gpus == 8);
  CHECK(spec->volumes.size() == 2);
  CHECK(spec->volumes[0] == gpuctl::ops::VolumeSpec{"datasets", "/data", true});
  CHECK(spec->env[1] == std::pair<std::string, std::string>{"NCCL_DEBUG", "INFO"});
}

TEST_CASE("submit flags: each mistake is a usage error naming the flag", "[submit]") {
  struct Case {
    void (*mutate)(SubmitFlags&);
    const char* needle;
  };
  const Case cases[] = {
      {[](SubmitFlags& f) { f.name.clear(); }, "NAME is required"},
      {[](SubmitFlags& f) { f.name = "Bert_Large"; }, "job name \"Bert_Large\" is not valid"},
      {[](SubmitFlags& f) { f.image.clear(); }, "--image is required"},
      {[](SubmitFlags& f) { f.gpus.clear(); }, "--gpus is required"},
      {[](SubmitFlags& f) { f.gpus = "two"; }, "--gpus \"two\""},
      {[](SubmitFlags& f) { f.gpus = "-1"; }, "--gpus"},
      {[](SubmitFlags& f) { f.cpu = "lots"; }, "--cpu \"lots\""},
      {[](SubmitFlags& f) { f.memory_limit = "64Gi"; }, "--memory-limit 64Gi is below --memory 128Gi"},
      {[](SubmitFlags& f) { f.env = {"NOVALUE"}; }, "--env \"NOVALUE\": expected KEY=VALUE"},
      {[](SubmitFlags& f) { f.env = {"1X=2"}; }, "not a valid variable name"},
      {[](SubmitFlags& f) { f.volumes = {"data"}; }, "--volume \"data\": no mount path"},
      {[](SubmitFlags& f) { f.volumes = {"data:relative"}; }, "must be absolute"},
      {[](SubmitFlags& f) { f.volumes = {"a:/x", "b:/x"}; }, "two volumes are mounted at /x"},
      {[](SubmitFlags& f) { f.backoff_limit = "many"; }, "--backoff-limit"},
      {[](SubmitFlags& f) { f.ttl_after_finished = "soon"; }, "--ttl-after-finished"},
      {[](SubmitFlags& f) { f.active_deadline = "0s"; }, "--active-deadline 0s: must be longer than 0s"},
      {[](SubmitFlags& f) { f.active_deadline = "1500ms"; }, "whole seconds"},
      {[](SubmitFlags& f) { f.labels = {"team"}; }, "--label"},
      {[](SubmitFlags& f) { f.colocate_with = "app in (a"; }, "--colocate-with"},
      {[](SubmitFlags& f) { f.colocate_topology = "zone"; }, "--colocate-topology needs --colocate-with"},
      {[](SubmitFlags& f) { f.gpu_resource = "requests.nvidia.com/gpu"; },
       "name the resource itself, e.g. nvidia.com/gpu"},
      {[](SubmitFlags& f) { f.gpus = "0"; }, "--gpu-type needs --gpus of 1 or more"},
  };
  for (const auto& c : cases) {
    SubmitFlags f = train_flags();
    c.mutate(f);
    auto spec = gpuctl::ops::parse_submit_flags(f);
    INFO(c.needle);
    REQUIRE_FALSE(spec);
    CHECK(spec.error().code == Errc::invalid_argument);
    CHECK_THAT(spec.error().message, Catch::Contains(c.needle));
    CHECK(spec.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("submit flags: with -f the container flags are refused", "[submit]") {
  SubmitFlags f;
  f.from_manifest = true;
  f.gpu_type = "A100";
  f.backoff_limit = "1";
  CHECK(gpuctl::ops::parse_submit_flags(f));
  f.gpus = "2";
  auto spec = gpuctl::ops::parse_submit_flags(f);
  REQUIRE_FALSE(spec);
  CHECK_THAT(spec.error().message, Catch::Contains("--gpus cannot be combined with -f"));
}

TEST_CASE("gpu placement: an exact product, with the pool's taint and not one node's trouble", "[submit]") {
  auto p = gpuctl::ops::derive_gpu_placement(fleet(), "NVIDIA-A100-SXM4-80GB");
  CHECK(p.type_found);
  CHECK(p.products == std::vector<std::string>{"NVIDIA-A100-SXM4-80GB"});
  CHECK(p.selector ==
        std::map<std::string, std::vector<std::string>>{{"nvidia.com/gpu.product", {"NVIDIA-A100-SXM4-80GB"}}});
  REQUIRE(p.tolerations.size() == 1);
  CHECK(p.tolerations[0] ==
        json{{"key", "nvidia.com/gpu"}, {"operator", "Equal"}, {"value", "present"}, {"effect", "NoSchedule"}});
}

TEST_CASE("gpu placement: a partial type matches every product of it, across label schemes", "[submit]") {
  auto a100 = gpuctl::ops::derive_gpu_placement(fleet(), "a100");
  CHECK(a100.products == std::vector<std::string>{"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB"});
  CHECK(a100.selector.size() == 1);
  auto t4 = gpuctl::ops::derive_gpu_placement(fleet(), "T4");
  CHECK(t4.selector ==
        std::map<std::string, std::vector<std::string>>{{"cloud.google.com/gke-accelerator", {"nvidia-tesla-t4"}},
                                                        {"nvidia.com/gpu.product", {"Tesla-T4"}}});
  CHECK(t4.tolerations.empty());  // the T4 nodes are not tainted
  auto none = gpuctl::ops::derive_gpu_placement(fleet(), "H100");
  CHECK_FALSE(none.type_found);
  CHECK(none.known_products.size() == 4);
}

TEST_CASE("gpu placement: cordoned nodes do not decide the pool's taints", "[submit]") {
  std::vector<json> nodes = {
      gpu_node("h-0", "H100", 8, json::array({taint("pool", "h100", "NoSchedule")})),
      gpu_node("h-1", "H100", 8,
               json::array(
                   {taint("pool", "h100", "NoSchedule"), taint("node.kubernetes.io/unschedulable", "", "NoSchedule")}),
               "nvidia.com/gpu.product", true),
  };
  auto p = gpuctl::ops::derive_gpu_placement(nodes, "H100");
  REQUIRE(p.pool_taints.size() == 1);
  CHECK(p.pool_taints[0].key == "pool");
}

TEST_CASE("submit: the Job built from flags (golden)", "[submit]") {
  auto spec = gpuctl::ops::parse_submit_flags(train_flags());
  REQUIRE(spec);
  auto placement = gpuctl::ops::derive_gpu_placement(fleet(), spec->gpu_type);
  auto built = gpuctl::ops::build_job(*spec, placement, "ml");
  REQUIRE(built);
  CHECK(built->job == json::parse(gpuctl::testing::test_data("submit/train-flags.json")));
  CHECK(built->warnings.empty());
  CHECK_THAT(built->notes.back(), Catch::Contains("tolerates nvidia.com/gpu=present:NoSchedule"));
}

TEST_CASE("submit: overrides replace every default", "[submit]") {
  SubmitFlags f = train_flags();
  f.backoff_limit = "0";
  f.ttl_after_finished = "none";
  f.active_deadline = "12h";
  f.count_disruptions = true;
  f.priority_class = "research-high";
  f.labels = {"team=nlp"};
  f.colocate_with = "app=param-server";
  f.gpu_type = "a100";  // two products: an affinity, not a selector
  auto spec = gpuctl::ops::parse_submit_flags(f);
  REQUIRE(spec);
  auto built = gpuctl::ops::build_job(*spec, gpuctl::ops::derive_gpu_placement(fleet(), spec->gpu_type), "ml");
  REQUIRE(built);
  const json& job = built->job;
  CHECK(job["spec"]["backoffLimit"] == 0);
  CHECK_FALSE(job["spec"].contains("ttlSecondsAfterFinished"));
  CHECK(job["spec"]["activeDeadlineSeconds"] == 43200);
  CHECK_FALSE(job["spec"].contains("podFailurePolicy"));
  const json& pod = job["spec"]["template"]["spec"];
  CHECK(pod["priorityClassName"] == "research-high");
  CHECK(job["spec"]["template"]["metadata"]["labels"]["team"] == "nlp");
  CHECK(job["metadata"]["labels"]["team"] == "nlp");
  CHECK_FALSE(pod.contains("nodeSelector"));
  CHECK(pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] ==
        json::parse(R"([{"matchExpressions":[{"key":"nvidia.com/gpu.product","operator":"In",
                        "values":["NVIDIA-A100-SXM4-40GB","NVIDIA-A100-SXM4-80GB"]}]}])"));
  CHECK(pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0] ==
        json::parse(
            R"({"labelSelector":{"matchLabels":{"app":"param-server"}},"topologyKey":"kubernetes.io/hostname"})"));
}

TEST_CASE("submit: a manifest is completed, and what it says stays", "[submit]") {
  auto manifest = gpuctl::kube::parse_manifest(R"(
apiVersion: batch/v1
kind: Job
metadata:
  name: finetune
spec:
  backoffLimit: 5
  template:
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]
      tolerations: [{operator: Exists}]
      containers:
      - name: trainer
        image: pytorch
        resources:
          limits: {nvidia.com/gpu: 4}
)",
                                               "job.yaml");
  REQUIRE(manifest);
  gpuctl::ops::SubmitFlags f;
  f.from_manifest = true;
  f.gpu_type = "A100-SXM4-80GB";
  auto spec = gpuctl::ops::parse_submit_flags(f);
  REQUIRE(spec);
  auto built = gpuctl::ops::complete_job(*manifest, *spec, gpuctl::ops::derive_gpu_placement(fleet(), spec->gpu_type),
                                         "ml", false, "job.yaml");
  REQUIRE(built);
  const json& job = built->job;
  CHECK(job["metadata"]["namespace"] == "ml");
  CHECK(job["spec"]["backoffLimit"] == 5);  // the manifest's, not the default
  const json& pod = job["spec"]["template"]["spec"];
  CHECK(pod["restartPolicy"] == "Never");
  CHECK(pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == 4);
  CHECK(pod["tolerations"].size() == 1);  // "Exists" already tolerates the pool taint
  // The zone term ANDed with the GPU type.
  CHECK(pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
           ["matchExpressions"]
               .size() == 2);
}

TEST_CASE("submit: manifests that cannot be a GPU Job are refused with the fix", "[submit]") {
  gpuctl::ops::SubmitFlags f;
  f.from_manifest = true;
  auto spec = *gpuctl::ops::parse_submit_flags(f);
  auto placement = gpuctl::ops::derive_gpu_placement(fleet(), "");
  auto complete = [&](const char* yaml, bool explicit_ns = false) {
    return gpuctl::ops::complete_job(*gpuctl::kube::parse_manifest(yaml, "job.yaml"), spec, placement, "ml",
                                     explicit_ns, "job.yaml");
  };
  auto deploy = complete("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n");
  REQUIRE_FALSE(deploy);
  CHECK_THAT(deploy.error().message, Catch::Contains("gpuctl submit takes a batch/v1 Job"));
  auto overcommit = complete(R"(apiVersion: batch/v1
kind: Job
metadata: {name: x}
spec: {template: {spec: {containers: [{name: c, image: i, resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}}]}}})");
  REQUIRE_FALSE(overcommit);
  CHECK_THAT(overcommit.error().message, Catch::Contains("make request and limit equal"));
  auto other_ns = complete(
      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x, namespace: prod}\nspec: {template: {spec: {containers: "
      "[{name: c, image: i}]}}}\n",
      true);
  REQUIRE_FALSE(other_ns);
  CHECK_THAT(other_ns.error().message, Catch::Contains("does not match -n"));
  auto no_gpu = complete(
      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: {template: {spec: {containers: [{name: c, image: "
      "i}]}}}\n");
  REQUIRE(no_gpu);
  REQUIRE(no_gpu->warnings.size() == 1);
  CHECK_THAT(no_gpu->warnings[0], Catch::Contains("requests no GPUs"));
}

TEST_CASE("manifest: YAML scalars are typed as the API server reads them", "[submit]") {
  auto m = gpuctl::kube::parse_manifest("---\na: 8\nb: \"8\"\nc: true\nd: 500m\ne: null\nf: 1.5\ng: yes\n", "m.yaml");
  REQUIRE(m);
  CHECK((*m)["a"] == 8);
  CHECK((*m)["b"] == "8");
  CHECK((*m)["c"] == true);
  CHECK((*m)["d"] == "500m");
  CHECK((*m)["e"].is_null());
  CHECK((*m)["f"] == 1.5);
  CHECK((*m)["g"] == true);
  CHECK(gpuctl::kube::parse_manifest(R"({"kind":"Job","n":[1,2]})", "m.json")->at("n") == json::array({1, 2}));
  auto two = gpuctl::kube::parse_manifest("a: 1\n---\nb: 2\n", "m.yaml");
  REQUIRE_FALSE(two);
  CHECK_THAT(two.error().message, Catch::Contains("holds 2 documents"));
  auto broken = gpuctl::kube::parse_manifest("a: [1,\n", "m.yaml");
  REQUIRE_FALSE(broken);
  CHECK_THAT(broken.error().message, Catch::StartsWith("m.yaml:"));
  auto dup = gpuctl::kube::parse_manifest("a: 1\na: 2\n", "m.yaml");
  REQUIRE_FALSE(dup);
  CHECK_THAT(dup.error().message, Catch::Contains("appears twice"));
}

TEST_CASE("label selector: kubectl's syntax becomes a LabelSelector", "[submit]") {
  auto s = gpuctl::kube::parse_label_selector("app=ps, tier!=web,zone in (a, b),!spot,gpu");
  REQUIRE(s);
  CHECK(*s == json::parse(R"({"matchLabels":{"app":"ps"},"matchExpressions":[
      {"key":"tier","operator":"NotIn","values":["web"]},
      {"key":"zone","operator":"In","values":["a","b"]},
      {"key":"spot","operator":"DoesNotExist"},
      {"key":"gpu","operator":"Exists"}]})"));
  CHECK_FALSE(gpuctl::kube::parse_label_selector(""));
  CHECK_FALSE(gpuctl::kube::parse_label_selector("a,,b"));
  CHECK_FALSE(gpuctl::kube::parse_label_selector("zone within (a)"));
}

TEST_CASE("submit: a manifest's wrongly typed fields and values the flags refuse are usage errors naming the field",
          "[submit]") {
  auto check = [](const std::string& spec_yaml) {
    std::string yaml = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: " + spec_yaml + "\n";
    return gpuctl::ops::check_manifest(*gpuctl::kube::parse_manifest(yaml, "job.yaml"), "job.yaml");
  };
  struct Case {
    std::string spec;
    std::string message;
  };
  std::vector<Case> cases = {
      {R"({template: {spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "-4"}}}]}}})",
       "job.yaml: spec.template.spec.containers[0].resources.limits.nvidia.com/gpu \"-4\": expected a whole number of "
       "GPUs from 0 to 1024 (as --gpus)"},
      {R"({template: {spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "1.5"}}}]}}})",
       "nvidia.com/gpu \"1.5\": expected a whole number of GPUs"},
      {R"({template: {spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "-1"}}}]}}})",
       "resources.requests.cpu \"-1\": must be more than zero (as --cpu and --memory)"},
      {R"({template: {spec: {containers: [{name: c, image: i, resources: {requests: {memory: 8Gi}, limits: {memory: 1Gi}}}]}}})",
       "the memory limit 1Gi is below the request 8Gi"},
      {R"({template: {spec: {containers: [{name: c, image: i, resources: []}]}}})",
       "job.yaml: spec.template.spec.containers[0].resources is a list, expected an object"},
      {R"({template: {spec: {containers: {name: c}}}})", "spec.template.spec.containers is an object, expected a list"},
      {R"({template: {spec: {containers: [{name: c, image: i, env: [{name: "1BAD", value: x}]}]}}})",
       "\"1BAD\" is not a valid variable name"},
      {R"({backoffLimit: -1, template: {spec: {containers: [{name: c, image: i}]}}})",
       "spec.backoffLimit -1: expected a whole number from 0"},
      {R"({backoffLimit: "2", template: {spec: {containers: [{name: c, image: i}]}}})", "spec.backoffLimit \"2\""},
      {R"({activeDeadlineSeconds: 0, template: {spec: {containers: [{name: c, image: i}]}}})",
       "spec.activeDeadlineSeconds 0"},
      {R"({template: {metadata: {labels: {"a b": x}}, spec: {containers: [{name: c, image: i}]}}})",
       "is not a valid label (as --label)"},
      {"5", "job.yaml: spec is an integer, expected an object"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.spec);
    auto r = check(c.spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == gpuctl::Errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::Contains(c.message));
  }
  CHECK(check(
      R"({template: {spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 8, cpu: 500m}}}]}}})"));
  CHECK(check(R"({template: {spec: {containers: [{name: c, image: i}]}}, status: null})"));
  auto bad_name = gpuctl::ops::check_manifest(
      *gpuctl::kube::parse_manifest("apiVersion: batch/v1\nkind: Job\nmetadata: {name: 5}\n", "job.yaml"), "job.yaml");
  REQUIRE_FALSE(bad_name);
  CHECK(bad_name.error().message == "job.yaml: metadata.name is an integer, expected a string");
}
