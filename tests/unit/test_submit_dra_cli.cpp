// gpuctl submit with GPUs as DRA devices, in-process over a fake API: the usage errors, the
// device class gpuctl picks on a DRA-only cluster (said on stderr), --dry-run=client's v1 List of
// the template and the Job, a missing class, and the real send.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/dra_objects.hpp"

using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using json = nlohmann::json;
namespace dra = gpuctl::testing::dra;

namespace {

json list(std::vector<json> items) {
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", json::object()}, {"items", std::move(items)}};
}

json node(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", json::object()},
          {"status",
           {{"allocatable", {{"cpu", "64"}}},
            {"capacity", {{"cpu", "64"}}},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

json gpu_slice(const std::string& node_name, const std::string& product, int gpus) {
  json devices = json::array();
  for (int i = 0; i < gpus; ++i) {
    std::string name = "gpu-" + std::to_string(i);
    devices.push_back(dra::gpu_device(name, "GPU-" + node_name + "-" + name, product));
  }
  return dra::slice(node_name, devices);
}

// A cluster serving `nodes`, DRA `slices` and one DeviceClass, with no pods, quotas or limits.
void serve_cluster(CliHarness& h, const std::vector<json>& nodes, const std::vector<json>& slices,
                   const json& device_class) {
  h.fake()
      .on("GET", "/api/v1/nodes", json_answer(200, list(nodes).dump()))
      .on("GET", "/apis/resource.k8s.io/v1",
          json_answer(200, json{{"kind", "APIResourceList"},
                                {"groupVersion", "resource.k8s.io/v1"},
                                {"resources", json::array({{{"name", "resourceslices"}},
                                                           {{"name", "resourceclaims"}},
                                                           {{"name", "deviceclasses"}},
                                                           {{"name", "devicetaintrules"}}})}}
                               .dump()))
      .on("GET", "/apis/resource.k8s.io/v1/resourceslices", json_answer(200, list(slices).dump()))
      .on("GET", "/apis/resource.k8s.io/v1/resourceclaims", json_answer(200, list({}).dump()))
      .on("GET", "/apis/resource.k8s.io/v1/deviceclasses", json_answer(200, list({device_class}).dump()))
      .on("GET", "/apis/resource.k8s.io/v1/devicetaintrules", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/pods", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/resourcequotas", json_answer(200, list({}).dump()))
      .on("GET", "/api/v1/namespaces/team-a/limitranges", json_answer(200, list({}).dump()));
}

// A cluster whose GPUs are DRA devices only: two nodes with two A100s each, no nvidia.com/gpu.
void serve_dra_cluster(CliHarness& h) {
  serve_cluster(h, {node("dra-a"), node("dra-b")},
                {gpu_slice("dra-a", "NVIDIA A100-SXM4-80GB", 2), gpu_slice("dra-b", "NVIDIA A100-SXM4-80GB", 2)},
                dra::device_class("gpu.nvidia.com", "gpu"));
}

}  // namespace

TEST_CASE("cli: submit --device-class with --gpu-resource is one usage line and no request", "[submit][cli]") {
  CliHarness h;
  auto r = h.run({"submit", "train", "--image", "x", "--gpus", "2", "--device-class", "gpu.nvidia.com",
                  "--gpu-resource", "nvidia.com/gpu", "--", "true"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--device-class and --gpu-resource both say how the GPUs are asked for") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(h.fake().requests().empty());
}

TEST_CASE("cli: submit on a DRA-only cluster claims gpu.nvidia.com devices and says so", "[submit][cli]") {
  CliHarness h;
  serve_dra_cluster(h);
  auto r = h.run({"submit", "train", "-n", "team-a", "--image", "trainer:1", "--gpus", "2", "--gpu-type", "A100",
                  "--dry-run=client", "-o", "json", "--", "python", "train.py"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  CHECK(h.fake().count("GET") == h.fake().requests().size());  // a client dry run writes nothing
  CHECK(r.err.find("no node offers nvidia.com/gpu as an extended resource, and the cluster has 4 GPUs of NVIDIA's "
                   "DRA driver: claiming them through DeviceClass gpu.nvidia.com") != std::string::npos);
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "List");
  REQUIRE(doc["items"].size() == 2);
  CHECK(doc["items"][0]["kind"] == "ResourceClaimTemplate");
  CHECK(doc["items"][0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2);
  CHECK(doc["items"][1]["kind"] == "Job");
  CHECK(doc["items"][1]["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "train-gpus");

  CliHarness yaml;
  serve_dra_cluster(yaml);
  auto y = yaml.run({"submit", "train", "-n", "team-a", "--image", "trainer:1", "--gpus", "2", "--device-class",
                     "gpu.nvidia.com", "--dry-run=client", "-o", "yaml"});
  REQUIRE(y.exit_code == 0);
  CHECK(y.out.starts_with("apiVersion: v1\nitems:\n"));
  CHECK(y.out.find("kind: ResourceClaimTemplate") != std::string::npos);
  CHECK(y.err.find("claiming them through") == std::string::npos);  // asked for: nothing to explain
}

TEST_CASE("cli: submit --device-class names the classes when the one asked for is missing", "[submit][cli]") {
  CliHarness h;
  serve_dra_cluster(h);
  auto r =
      h.run({"submit", "train", "-n", "team-a", "--image", "x", "--gpus", "1", "--device-class", "gpu.example.com"});
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "error: DeviceClass \"gpu.example.com\" does not exist; the cluster has: gpu.nvidia.com (gpuctl submit "
        "--device-class NAME)\n");
  CHECK(h.fake().count("POST") == 0);
}

TEST_CASE("cli: submit refuses a claim no node can hold, before anything exists", "[submit][cli]") {
  CliHarness h;
  serve_dra_cluster(h);
  auto r =
      h.run({"submit", "train", "-n", "team-a", "--image", "x", "--gpus", "3", "--device-class", "gpu.nvidia.com"});
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("refused (device-capacity): no schedulable node has 3 devices of DeviceClass gpu.nvidia.com: the "
                   "most on one node is 2") != std::string::npos);
  CHECK(h.fake().count("POST") == 0);
}

TEST_CASE("cli: submit sends the template, the Job and the owner reference", "[submit][cli]") {
  CliHarness h;
  serve_dra_cluster(h);
  h.fake()
      .on("POST", "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates",
          json_answer(201, R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",
                               "metadata":{"name":"train-gpus","namespace":"team-a","uid":"t-1"}})"))
      .on("POST", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(201, R"({"apiVersion":"batch/v1","kind":"Job",
                               "metadata":{"name":"train","namespace":"team-a","uid":"j-1"}})"))
      .on("PATCH", "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates/train-gpus",
          json_answer(200, R"({"metadata":{"name":"train-gpus","namespace":"team-a","uid":"t-1"}})"));
  auto r = h.run({"submit", "train", "-n", "team-a", "--image", "x", "--gpus", "2", "--device-class", "gpu.nvidia.com",
                  "-o", "name"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(h.fake().unexpected().empty());
  CHECK(r.out == "resourceclaimtemplate.resource.k8s.io/train-gpus\njob.batch/train\n");
  CHECK(h.fake().count("POST") == 2);
  CHECK(h.fake().count("PATCH") == 1);

  CliHarness human;
  serve_dra_cluster(human);
  auto text = human.run({"submit", "train", "-n", "team-a", "--image", "x", "--gpus", "2", "--device-class",
                         "gpu.nvidia.com", "--dry-run=client"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.starts_with(
      "job team-a/train would be submitted (dry run): 2 devices of DeviceClass gpu.nvidia.com per pod\n"
      "  claims 2 devices of DeviceClass gpu.nvidia.com per pod through ResourceClaimTemplate train-gpus (deleted "
      "with the job)\n"));
}

TEST_CASE("cli: a plain --gpus on a mixed cluster counts the DRA nodes a DeviceClass serves it on", "[submit][cli]") {
  // plug-a's device plugin advertises 2 nvidia.com/gpu; dra-a's 4 GPUs are DRA devices of a class
  // that maps nvidia.com/gpu (extendedResourceName), so the scheduler can give a 4-GPU pod dra-a.
  auto serve = [](CliHarness& h, bool mapped) {
    json plug = node("plug-a");
    plug["status"]["allocatable"]["nvidia.com/gpu"] = "2";
    plug["status"]["capacity"]["nvidia.com/gpu"] = "2";
    serve_cluster(h, {plug, node("dra-a")}, {gpu_slice("dra-a", "NVIDIA A100-SXM4-80GB", 4)},
                  dra::device_class("gpu.nvidia.com", "gpu", mapped ? "nvidia.com/gpu" : ""));
  };
  auto submit = [](CliHarness& h, const std::string& gpus) {
    return h.run({"submit", "train", "-n", "team-a", "--image", "x", "--gpus", gpus, "--dry-run=client", "-o", "json"});
  };
  CliHarness fits;
  serve(fits, true);
  auto r = submit(fits, "4");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fits.fake().unexpected().empty());
  json job = json::parse(r.out);
  CHECK(job["kind"] == "Job");  // the plain request is kept: the scheduler serves it through the class
  CHECK(job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4");

  CliHarness too_big;
  serve(too_big, true);
  auto big = submit(too_big, "5");
  CHECK(big.exit_code == 3);
  CHECK(big.err.find("refused (gpu-capacity): no schedulable node has 5 GPUs: the largest has 4") != std::string::npos);

  // A class that does not map nvidia.com/gpu serves no plain request: plug-a's 2 are the most.
  CliHarness unmapped;
  serve(unmapped, false);
  auto refused = submit(unmapped, "4");
  CHECK(refused.exit_code == 3);
  CHECK(refused.err.find("the largest has 2") != std::string::npos);
}
