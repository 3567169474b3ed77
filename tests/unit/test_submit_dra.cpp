// gpuctl submit with GPUs as DRA devices: the flags, the Job and its ResourceClaimTemplate, which
// device class is chosen (and when gpuctl chooses one on its own), the placement from devices,
// and the sending order with its rollback, through a fake transport.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/submit/submit.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using gpuctl::testing::status_body;
using json = nlohmann::json;

namespace {

const std::string kTemplates = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates";
const std::string kJobs = "/apis/batch/v1/namespaces/team-a/jobs";

ops::SubmitFlags dra_flags() {
  ops::SubmitFlags f;
  f.name = "train";
  f.image = "trainer:1";
  f.gpus = "2";
  f.gpu_type = "A100";
  f.device_class = "gpu.nvidia.com";
  f.command = {"python", "train.py"};
  return f;
}

ops::SubmitSpec dra_spec() {
  auto spec = ops::parse_submit_flags(dra_flags());
  REQUIRE(spec);
  return *spec;
}

ops::BuiltJob built_dra_job() {
  auto built = ops::build_job(dra_spec(), ops::GpuPlacement{}, "team-a");
  REQUIRE(built);
  return *built;
}

json node(const std::string& name, json allocatable = json::object(), json taints = json::array()) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
            {"spec", json::object()},
            {"status",
             {{"allocatable", allocatable},
              {"capacity", allocatable},
              {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (!taints.empty()) n["spec"]["taints"] = taints;
  return n;
}

ops::DraDevice device(const std::string& node_name, const std::string& name, const std::string& product,
                      ops::DraDeviceType type = ops::DraDeviceType::gpu) {
  ops::DraDevice d;
  d.driver = "gpu.nvidia.com";
  d.pool = d.node = node_name;
  d.name = name;
  d.type = type;
  d.product = product;
  d.attributes = {{"type", {{"string", type == ops::DraDeviceType::gpu ? "gpu" : "mig"}}},
                  {"productName", {{"string", product}}}};
  return d;
}

ops::DraDeviceClass gpu_class(std::string extended_resource = "") {
  return {"gpu.nvidia.com",
          {"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"},
          std::move(extended_resource)};
}

ops::DraInventory dra_cluster() {
  ops::DraInventory inv;
  inv.served = true;
  inv.classes = {gpu_class(), {"mig.nvidia.com", {"device.attributes['gpu.nvidia.com'].type == 'mig'"}, ""}};
  inv.devices = {device("dra-a", "gpu-0", "NVIDIA A100-SXM4-80GB"), device("dra-a", "gpu-1", "NVIDIA A100-SXM4-80GB"),
                 device("dra-b", "gpu-0", "NVIDIA H100 80GB HBM3")};
  return inv;
}

}  // namespace

TEST_CASE("submit dra: --device-class is checked with the flags it cannot go with", "[submit][dra]") {
  auto f = dra_flags();
  f.gpu_resource = "nvidia.com/gpu";
  auto both = ops::parse_submit_flags(f);
  REQUIRE_FALSE(both);
  CHECK(both.error().code == Errc::invalid_argument);
  CHECK(both.error().message ==
        "--device-class and --gpu-resource both say how the GPUs are asked for; give one (--device-class claims "
        "DRA devices, --gpu-resource names an extended resource)");
  f = dra_flags();
  f.gpus = "0";
  f.gpu_type.clear();
  auto none = ops::parse_submit_flags(f);
  REQUIRE_FALSE(none);
  CHECK(none.error().message == "--device-class needs --gpus of 1 or more: the devices each pod claims");
  f = dra_flags();
  f.device_class = "GPU class";
  auto bad = ops::parse_submit_flags(f);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.starts_with("--device-class \"GPU class\" is not a DeviceClass name"));
  ops::SubmitFlags manifest;
  manifest.from_manifest = true;
  manifest.device_class = "gpu.nvidia.com";
  auto with_file = ops::parse_submit_flags(manifest);
  REQUIRE_FALSE(with_file);
  CHECK(with_file.error().message == "--device-class cannot be combined with -f: set it in the manifest's container");
}

TEST_CASE("submit dra: the pods claim the devices through a template instead of an extended resource",
          "[submit][dra]") {
  ops::BuiltJob built = built_dra_job();
  const json& pod = built.job["spec"]["template"]["spec"];
  CHECK(pod["resourceClaims"] == json::parse(R"([{"name": "gpus", "resourceClaimTemplateName": "train-gpus"}])"));
  const json& container = pod["containers"][0];
  CHECK(container["resources"] == json::parse(R"({"claims": [{"name": "gpus"}]})"));
  CHECK_FALSE(pod.contains("nodeSelector"));  // the claim's selector picks the product
  CHECK(built.warnings.empty());              // not "requests no GPUs"
  CHECK(built.claim_template == json::parse(R"json({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "train-gpus", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpuctl"}},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
      "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2,
      "selectors": [{"cel": {"expression": "has(device.attributes['gpu.nvidia.com'].productName) && device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('a100')"}}]}}]}}}})json"));
  REQUIRE_FALSE(built.notes.empty());
  CHECK(built.notes[0] ==
        "claims 2 devices of DeviceClass gpu.nvidia.com per pod through ResourceClaimTemplate train-gpus (deleted "
        "with the job)");
  CHECK(ops::describe_claim_template(built.claim_template) == "2 devices of DeviceClass gpu.nvidia.com");
  // No --gpu-type: no selector at all.
  auto f = dra_flags();
  f.gpu_type.clear();
  auto spec = ops::parse_submit_flags(f);
  REQUIRE(spec);
  auto plain = ops::build_job(*spec, ops::GpuPlacement{}, "team-a");
  REQUIRE(plain);
  CHECK_FALSE(plain->claim_template["spec"]["spec"]["devices"]["requests"][0]["exactly"].contains("selectors"));
  // Without a device class nothing changes.
  f.device_class.clear();
  spec = ops::parse_submit_flags(f);
  REQUIRE(spec);
  auto extended = ops::build_job(*spec, ops::GpuPlacement{}, "team-a");
  REQUIRE(extended);
  CHECK(extended->claim_template.is_null());
  CHECK(extended->job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2");
}

TEST_CASE("submit dra: --device-class must name a class the cluster has", "[submit][dra]") {
  const std::vector<json> nodes = {node("dra-a")};
  auto chosen = ops::choose_device_class(dra_spec(), nodes, dra_cluster());
  REQUIRE(chosen);
  CHECK(chosen->device_class == "gpu.nvidia.com");
  CHECK(chosen->notice.empty());

  auto f = dra_flags();
  f.device_class = "gpu.example.com";
  auto spec = ops::parse_submit_flags(f);
  REQUIRE(spec);
  auto missing = ops::choose_device_class(*spec, nodes, dra_cluster());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Errc::invalid_argument);
  CHECK(missing.error().message ==
        "DeviceClass \"gpu.example.com\" does not exist; the cluster has: gpu.nvidia.com, mig.nvidia.com (gpuctl "
        "submit --device-class NAME)");

  ops::DraInventory no_dra;
  auto unserved = ops::choose_device_class(dra_spec(), nodes, no_dra);
  REQUIRE_FALSE(unserved);
  CHECK(unserved.error().message.find("does not serve resource.k8s.io/v1") != std::string::npos);

  // Classes that could not be read: not judged here.
  ops::DraInventory unreadable = dra_cluster();
  unreadable.classes.clear();
  unreadable.warnings = {"deviceclasses: forbidden"};
  auto unchecked = ops::choose_device_class(dra_spec(), nodes, unreadable);
  REQUIRE(unchecked);
  CHECK(unchecked->device_class == "gpu.nvidia.com");
  CHECK(unchecked->notice.find("could not check") != std::string::npos);
}

TEST_CASE("submit dra: a cluster that serves GPUs only through DRA gets gpu.nvidia.com on its own", "[submit][dra]") {
  auto f = dra_flags();
  f.device_class.clear();
  auto parsed = ops::parse_submit_flags(f);
  REQUIRE(parsed);
  const ops::SubmitSpec spec = *parsed;
  const std::vector<json> dra_only = {node("dra-a", {{"cpu", "64"}}), node("dra-b")};
  CHECK(ops::wants_dra(spec, dra_only));
  auto chosen = ops::choose_device_class(spec, dra_only, dra_cluster());
  REQUIRE(chosen);
  CHECK(chosen->device_class == "gpu.nvidia.com");
  CHECK(chosen->notice ==
        "no node offers nvidia.com/gpu as an extended resource, and the cluster has 3 GPUs of NVIDIA's DRA driver: "
        "claiming them through DeviceClass gpu.nvidia.com (--gpu-resource nvidia.com/gpu keeps the extended "
        "resource)");

  // A node with the device plugin: the extended resource stays.
  const std::vector<json> mixed = {node("dp-a", {{"nvidia.com/gpu", "8"}}), node("dra-a")};
  CHECK_FALSE(ops::wants_dra(spec, mixed));
  CHECK(ops::choose_device_class(spec, mixed, dra_cluster())->device_class.empty());
  // The scheduler serves nvidia.com/gpu through DRA itself (DRAExtendedResource).
  ops::DraInventory mapped = dra_cluster();
  mapped.classes[0].extended_resource_name = "nvidia.com/gpu";
  CHECK(ops::choose_device_class(spec, dra_only, mapped)->device_class.empty());
  // No GPUs of NVIDIA's driver, or no class of that name: nothing to claim from.
  ops::DraInventory empty = dra_cluster();
  empty.devices.clear();
  CHECK(ops::choose_device_class(spec, dra_only, empty)->device_class.empty());
  ops::DraInventory classless = dra_cluster();
  classless.classes.erase(classless.classes.begin());
  CHECK(ops::choose_device_class(spec, dra_only, classless)->device_class.empty());
  // --gpu-resource typed, a manifest, or no GPUs: never.
  ops::SubmitSpec typed = spec;
  typed.gpu_resource_given = true;
  CHECK_FALSE(ops::wants_dra(typed, dra_only));
  CHECK(ops::choose_device_class(typed, dra_only, dra_cluster())->device_class.empty());
  ops::SubmitSpec cpu_only = spec;
  cpu_only.gpus = 0;
  CHECK_FALSE(ops::wants_dra(cpu_only, dra_only));
  ops::SubmitSpec manifest = spec;
  manifest.from_manifest = true;
  CHECK_FALSE(ops::wants_dra(manifest, dra_only));
}

TEST_CASE("submit dra: placement from the devices, with the taints of the nodes holding them", "[submit][dra]") {
  json pool_taint = {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}};
  const std::vector<json> nodes = {node("dra-a", json::object(), json::array({pool_taint})),
                                   node("dra-b", json::object(), json::array({pool_taint})), node("cpu-0")};
  auto placement = ops::derive_dra_placement(nodes, dra_cluster(), dra_spec());
  CHECK(placement.type_found);
  CHECK(placement.products == std::vector<std::string>{"NVIDIA A100-SXM4-80GB"});
  CHECK(placement.selector.empty());
  REQUIRE(placement.tolerations.size() == 1);
  CHECK(placement.tolerations[0] ==
        json::parse(R"({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"})"));
  auto built = ops::build_job(dra_spec(), placement, "team-a");
  REQUIRE(built);
  CHECK(built->job["spec"]["template"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu");

  ops::SubmitSpec t4 = dra_spec();
  t4.gpu_type = "T4";
  auto absent = ops::derive_dra_placement(nodes, dra_cluster(), t4);
  CHECK_FALSE(absent.type_found);
  CHECK(absent.known_products == std::vector<std::string>{"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"});
  // A class selector gpuctl cannot evaluate: an A100 may be in the class, so it is not declared
  // absent; a T4 is no device at all, whatever the class says.
  ops::DraInventory unknown = dra_cluster();
  unknown.classes[0].selectors = {"cel.bind(d, device.attributes['gpu.nvidia.com'], d.type == 'gpu')"};
  auto unsure = ops::derive_dra_placement(nodes, unknown, dra_spec());
  CHECK(unsure.type_found);
  CHECK(unsure.products.empty());  // none known to match
  auto no_t4 = ops::derive_dra_placement(nodes, unknown, t4);
  CHECK_FALSE(no_t4.type_found);
  CHECK(no_t4.known_products == std::vector<std::string>{"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"});
}

TEST_CASE("submit dra: the template goes first, then the Job, which then owns the template", "[submit][dra]") {
  ops::BuiltJob built = built_dra_job();
  FakeClient c;
  json created_template = built.claim_template;
  created_template["metadata"]["uid"] = "tmpl-uid";
  json created_job = built.job;
  created_job["metadata"]["uid"] = "job-uid";
  c.fake->on("POST", kTemplates, json_answer(201, created_template.dump()));
  c.fake->on("POST", kJobs, json_answer(201, created_job.dump()));
  json owned = created_template;
  owned["metadata"]["ownerReferences"] = json::array({{{"kind", "Job"}}});
  c.fake->on("PATCH", kTemplates + "/train-gpus", json_answer(200, owned.dump()));
  auto sent = ops::send_submission(*c.client, built, false);
  REQUIRE(sent);
  CHECK(c.fake->unexpected().empty());
  const auto& requests = c.fake->requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].method == "POST");
  CHECK(requests[0].url.find(kTemplates + "?") != std::string::npos);
  CHECK(requests[0].url.find("fieldValidation=Strict") != std::string::npos);
  CHECK(json::parse(requests[0].body) == built.claim_template);
  CHECK(requests[1].url.find(kJobs) != std::string::npos);
  CHECK(requests[2].method == "PATCH");
  CHECK(json::parse(requests[2].body) == json::parse(R"({"metadata": {"uid": "tmpl-uid", "ownerReferences": [
    {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": false,
     "blockOwnerDeletion": false}]}})"));
  CHECK(sent->job["metadata"]["uid"] == "job-uid");
  CHECK(sent->claim_template["metadata"]["ownerReferences"][0]["kind"] == "Job");
  CHECK(sent->warnings.empty());
}

TEST_CASE("submit dra: a refused Job takes its template back out", "[submit][dra]") {
  ops::BuiltJob built = built_dra_job();
  json created_template = built.claim_template;
  created_template["metadata"]["uid"] = "tmpl-uid";
  {
    FakeClient c;
    c.fake->on("POST", kTemplates, json_answer(201, created_template.dump()));
    c.fake->on("POST", kJobs, json_answer(422, status_body(422, "Invalid", "Job.batch \"train\" is invalid").dump()));
    c.fake->on("DELETE", kTemplates + "/train-gpus", json_answer(200, created_template.dump()));
    auto sent = ops::send_submission(*c.client, built, false);
    REQUIRE_FALSE(sent);
    CHECK(c.fake->unexpected().empty());
    CHECK(sent.error().message.find("the API server refused job team-a/train") != std::string::npos);
    CHECK(sent.error().message.find("(resourceclaimtemplate team-a/train-gpus, created for it, was deleted again)") !=
          std::string::npos);
    const auto& last = c.fake->requests().back();
    CHECK(last.method == "DELETE");
    CHECK(json::parse(last.body)["preconditions"]["uid"] == "tmpl-uid");
  }
  {
    FakeClient c;  // the clean-up fails too: the error says what is left and how to remove it
    c.fake->on("POST", kTemplates, json_answer(201, created_template.dump()));
    c.fake->on("POST", kJobs, json_answer(403, status_body(403, "Forbidden", "jobs.batch is forbidden").dump()));
    c.fake->on("DELETE", kTemplates + "/train-gpus",
               json_answer(403, status_body(403, "Forbidden", "delete is forbidden").dump()));
    auto sent = ops::send_submission(*c.client, built, false);
    REQUIRE_FALSE(sent);
    CHECK(sent.error().message.find("could not be deleted") != std::string::npos);
    CHECK(sent.error().message.find("kubectl delete resourceclaimtemplate train-gpus -n team-a") != std::string::npos);
  }
  {
    FakeClient c;  // the template exists already: never overwritten, no Job sent
    c.fake->on(
        "POST", kTemplates,
        json_answer(409,
                    status_body(409, "AlreadyExists", "resourceclaimtemplates \"train-gpus\" already exists").dump()));
    auto sent = ops::send_submission(*c.client, built, false);
    REQUIRE_FALSE(sent);
    CHECK(sent.error().message.starts_with("resourceclaimtemplate team-a/train-gpus already exists"));
    CHECK(c.fake->requests().size() == 1);
  }
}

TEST_CASE("submit dra: a server dry run sends both with dryRun=All and ties nothing", "[submit][dra]") {
  ops::BuiltJob built = built_dra_job();
  FakeClient c;
  c.fake->on("POST", kTemplates, json_answer(201, built.claim_template.dump()), "dryRun=All");
  c.fake->on("POST", kJobs, json_answer(201, built.job.dump()), "dryRun=All");
  c.fake->on("POST", "/api/v1/namespaces/team-a/pods", json_answer(201, R"({"kind":"Pod"})"), "dryRun=All");
  auto sent = ops::send_submission(*c.client, built, true);
  REQUIRE(sent);
  CHECK(c.fake->unexpected().empty());
  CHECK(c.fake->requests().size() == 3);
  CHECK(c.fake->count("PATCH") == 0);
  // The dry-run pod carries the claim, as the Job's pods will.
  CHECK(json::parse(c.fake->requests()[2].body)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] ==
        "train-gpus");

  FakeClient refused;  // a refused dry-run Job: nothing was made, nothing to delete
  refused.fake->on("POST", kTemplates, json_answer(201, built.claim_template.dump()), "dryRun=All");
  refused.fake->on("POST", kJobs, json_answer(422, status_body(422, "Invalid", "bad").dump()), "dryRun=All");
  auto failed = ops::send_submission(*refused.client, built, true);
  REQUIRE_FALSE(failed);
  CHECK(refused.fake->count("DELETE") == 0);
}

TEST_CASE("submit dra: a template that cannot be tied to its Job is a warning, the Job stands", "[submit][dra]") {
  ops::BuiltJob built = built_dra_job();
  FakeClient c;
  c.fake->on("POST", kTemplates, json_answer(201, built.claim_template.dump()));
  c.fake->on("POST", kJobs, json_answer(201, built.job.dump()));
  c.fake->on("PATCH", kTemplates + "/train-gpus",
             json_answer(403, status_body(403, "Forbidden", "patch is forbidden").dump()));
  auto sent = ops::send_submission(*c.client, built, false);
  REQUIRE(sent);
  REQUIRE(sent->warnings.size() == 1);
  CHECK(sent->warnings[0].starts_with("resourceclaimtemplate team-a/train-gpus could not be tied to job team-a/train"));
  CHECK(c.fake->count("DELETE") == 0);
}
