// The pre-flight checks of a job whose pods claim DRA devices: device-capacity (one node must
// hold the claim's devices), device-free-now, the DRA quota keys, and "cannot count" instead of a
// false refusal when a selector is outside the CEL subset. The devices come from ResourceSlice,
// ResourceClaim and DeviceClass objects as the API serves them (build_dra_inventory).
#include <catch2/catch.hpp>

#include "fakes/dra_objects.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "test_submit_preflight_support.hpp"

using namespace gpuctl;
using namespace gpuctl::testing::preflight;
using ops::FindingSeverity;
namespace dra = gpuctl::testing::dra;

namespace {

const std::string kA100Dra = "NVIDIA A100-SXM4-80GB";  // as the DRA driver names it

json gpu_device(const std::string& name, const std::string& product, json taints = json::array()) {
  return dra::gpu_device(name, "GPU-" + name, product, std::move(taints));
}

json allocated_claim(const std::string& name, const std::string& node, const std::string& device) {
  return dra::claim("other", name, node, json::array({device}), name + "-pod");
}

json device_class(const std::string& selector = "") {
  json c = dra::device_class("gpu.nvidia.com", "gpu");
  if (!selector.empty()) c["spec"]["selectors"][0]["cel"]["expression"] = selector;
  return c;
}

// Two nodes with two A100s each.
std::vector<json> two_by_two() {
  return {dra::slice("dra-a", json::array({gpu_device("gpu-0", kA100Dra), gpu_device("gpu-1", kA100Dra)})),
          dra::slice("dra-b", json::array({gpu_device("gpu-0", kA100Dra), gpu_device("gpu-1", kA100Dra)}))};
}

struct Setup {
  std::vector<json> slices = two_by_two();
  std::vector<json> claims;
  std::vector<json> classes = {device_class()};
  std::vector<json> nodes = {gpu_node("dra-a", "", 0), gpu_node("dra-b", "", 0)};
  int gpus = 2;
  std::string gpu_type;
  int parallelism = 1;
  std::vector<json> quotas;
};

ops::PreflightInput input_for(const Setup& s) {
  ops::SubmitFlags f;
  f.name = "train";
  f.image = "trainer:1";
  f.gpus = std::to_string(s.gpus);
  f.gpu_type = s.gpu_type;
  f.device_class = "gpu.nvidia.com";
  auto spec = ops::parse_submit_flags(f);
  REQUIRE(spec);
  auto built = ops::build_job(*spec, ops::GpuPlacement{}, "team-a");
  REQUIRE(built);
  ops::PreflightInput in;
  in.job = built->job;
  if (s.parallelism > 1) in.job["spec"]["parallelism"] = s.parallelism;
  in.claim_template = built->claim_template;
  in.nodes = s.nodes;
  in.quotas = s.quotas;
  ops::DraInventory dra = ops::build_dra_inventory(s.slices, s.claims, s.classes, {});
  dra.served = true;
  in.dra = std::move(dra);
  return in;
}

json quota(json hard, json used, json scopes = nullptr) {
  json q = {{"metadata", {{"name", "dra"}, {"namespace", "team-a"}}},
            {"spec", {{"hard", std::move(hard)}}},
            {"status", {{"used", std::move(used)}}}};
  if (!scopes.is_null()) q["spec"]["scopes"] = std::move(scopes);
  return q;
}

}  // namespace

TEST_CASE("submit_preflight_dra: a claim fits when one node holds its devices", "[preflight]") {
  Setup s;
  auto in = input_for(s);
  CHECK(ops::check_device_capacity(in).empty());
  CHECK(ops::check_device_free_now(in).empty());
  // Devices are never added across nodes: 2 + 2 is no 3.
  s.gpus = 3;
  auto three = ops::check_device_capacity(input_for(s));
  REQUIRE(three.size() == 1);
  CHECK(three[0].check == "device-capacity");
  CHECK(three[0].severity == FindingSeverity::refusal);
  CHECK(three[0].message ==
        "no schedulable node has 3 devices of DeviceClass gpu.nvidia.com: the most on one node is 2 (2 nodes hold "
        "such devices, 2 schedulable)");
  // The check runs in the table, and a job without a claim template is not judged by it.
  CHECK(ops::has_refusal(ops::run_preflight(input_for(s))));
  ops::PreflightInput extended = input_for(s);
  extended.claim_template = nullptr;
  CHECK(ops::check_device_capacity(extended).empty());
}

TEST_CASE("submit_preflight_dra: tainted devices and unschedulable nodes do not count", "[preflight]") {
  Setup s;
  json taint = json::array({dra::device_taint("gpu.nvidia.com/xid", "48", "NoSchedule")});
  json none_taint = json::array({dra::device_taint("gpu.nvidia.com/unmonitored", "", "None")});
  s.slices = {
      dra::slice("dra-a", json::array({gpu_device("gpu-0", kA100Dra, taint), gpu_device("gpu-1", kA100Dra)})),
      dra::slice("dra-b", json::array({gpu_device("gpu-0", kA100Dra, none_taint), gpu_device("gpu-1", kA100Dra)}))};
  s.nodes = {gpu_node("dra-a", "", 0), cordoned(gpu_node("dra-b", "", 0))};
  auto found = ops::check_device_capacity(input_for(s));
  REQUIRE(found.size() == 1);
  CHECK(found[0].message ==
        "no schedulable node has 2 devices of DeviceClass gpu.nvidia.com: the most on one node is 1 (2 nodes hold "
        "such devices, 1 schedulable, 1 tainted NoSchedule/NoExecute)");
  // A None taint is a warning only: uncordoned, dra-b's two devices fit.
  s.nodes = {gpu_node("dra-a", "", 0), gpu_node("dra-b", "", 0)};
  CHECK(ops::check_device_capacity(input_for(s)).empty());
}

TEST_CASE("submit_preflight_dra: a product no device of the class is, named with what the class has", "[preflight]") {
  Setup s;
  s.gpu_type = "H100";
  auto found = ops::check_device_capacity(input_for(s));
  REQUIRE(found.size() == 1);
  CHECK(found[0].severity == FindingSeverity::refusal);
  CHECK(found[0].message ==
        "no device of DeviceClass gpu.nvidia.com matches the claim's selectors (the class has: NVIDIA "
        "A100-SXM4-80GB (4))");
  s.gpu_type = "a100-sxm4";
  CHECK(ops::check_device_capacity(input_for(s)).empty());
  // A class with no devices at all.
  s.slices.clear();
  s.gpu_type.clear();
  auto empty = ops::check_device_capacity(input_for(s));
  REQUIRE(empty.size() == 1);
  CHECK(empty[0].message == "DeviceClass gpu.nvidia.com has no devices in the cluster's ResourceSlices");
}

TEST_CASE("submit_preflight_dra: allocated devices exist but are busy now", "[preflight]") {
  Setup s;
  s.claims = {allocated_claim("c1", "dra-a", "gpu-0")};
  s.parallelism = 2;
  auto in = input_for(s);
  CHECK(ops::check_device_capacity(in).empty());  // allocated devices come free
  auto busy = ops::check_device_free_now(in);
  REQUIRE(busy.size() == 1);
  CHECK(busy[0].check == "device-free-now");
  CHECK(busy[0].severity == FindingSeverity::warning);
  CHECK(busy[0].message ==
        "only 1 of the job's 2 pods (2 devices of DeviceClass gpu.nvidia.com each) find their devices free now (3 "
        "free across 2 nodes); the rest will wait in Pending");
  s.claims.push_back(allocated_claim("c2", "dra-b", "gpu-1"));
  s.parallelism = 1;
  auto none = ops::check_device_free_now(input_for(s));
  REQUIRE(none.size() == 1);
  CHECK(none[0].message.starts_with("the 2 devices of DeviceClass gpu.nvidia.com per pod exist but are allocated"));
  // Claims that could not be listed: nothing is said about free devices.
  auto unreadable = input_for(s);
  unreadable.dra->warnings = {"resourceclaims: forbidden"};
  CHECK(ops::check_device_free_now(unreadable).empty());
}

TEST_CASE("submit_preflight_dra: a selector outside the subset makes it cannot-count, never a refusal", "[preflight]") {
  Setup s;
  s.gpus = 3;
  s.classes = {device_class("cel.bind(d, device.attributes['gpu.nvidia.com'], d.type == 'gpu')")};
  auto in = input_for(s);
  auto found = ops::check_device_capacity(in);
  REQUIRE(found.size() == 1);
  CHECK(found[0].severity == FindingSeverity::warning);
  CHECK(found[0].message.starts_with("cannot count the devices of DeviceClass gpu.nvidia.com the claim may get: "));
  CHECK(ops::check_device_free_now(in).empty());
  CHECK_FALSE(ops::has_refusal(ops::run_preflight(in)));
}

TEST_CASE("submit_preflight_dra: quota counts the claim's devices and the claim itself", "[preflight]") {
  Setup s;
  s.quotas = {quota({{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "4"}},
                    {{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "3"}})};
  auto found = ops::check_quota(input_for(s));
  REQUIRE(found.size() == 1);
  CHECK(found[0].check == "quota");
  CHECK(found[0].severity == FindingSeverity::refusal);
  CHECK(found[0].message ==
        "quota team-a/dra allows 4 gpu.nvidia.com.deviceclass.resource.k8s.io/devices, 3 in use, each pod of this "
        "job asks for 2; the API server would refuse the ResourceClaims of its pods, which then wait in Pending");
  s.quotas = {quota({{"count/resourceclaims.resource.k8s.io", "3"}}, {{"count/resourceclaims.resource.k8s.io", "2"}})};
  s.parallelism = 2;
  auto claims = ops::check_quota(input_for(s));
  REQUIRE(claims.size() == 1);
  CHECK(claims[0].message.find("the job's 2 pods ask for 1 each (2): only 1 of them would be admitted") !=
        std::string::npos);
  // A scoped quota selects pods, never claims.
  s.quotas = {quota({{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "0"}},
                    {{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "0"}}, json::array({"NotTerminating"}))};
  CHECK(ops::check_quota(input_for(s)).empty());
  // A class that serves nvidia.com/gpu has its claims counted under requests.nvidia.com/gpu too
  // (measured on the local control plane: "exceeded quota ... requested: requests.nvidia.com/gpu=2").
  s.parallelism = 1;
  s.classes = {dra::device_class("gpu.nvidia.com", "gpu", "nvidia.com/gpu")};
  s.quotas = {quota({{"requests.nvidia.com/gpu", "3"}}, {{"requests.nvidia.com/gpu", "2"}})};
  auto mapped = ops::check_quota(input_for(s));
  REQUIRE(mapped.size() == 1);
  CHECK(mapped[0].message ==
        "quota team-a/dra allows 3 requests.nvidia.com/gpu, 2 in use, each pod of this job asks for 2; the API "
        "server would refuse the ResourceClaims of its pods, which then wait in Pending");
  s.classes = {device_class()};
  CHECK(ops::check_quota(input_for(s)).empty());  // an unmapped class: the claim is not counted there
  // Room enough: nothing.
  s.quotas = {quota({{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "8"}},
                    {{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "2"}})};
  CHECK(ops::check_quota(input_for(s)).empty());
}

TEST_CASE("submit_preflight_dra: a plain nvidia.com/gpu request on DRA-only nodes counts the mapped class's devices",
          "[preflight]") {
  // No node advertises nvidia.com/gpu; DeviceClass gpu.nvidia.com maps it (extendedResourceName),
  // so the scheduler serves `--gpus N` with N of its devices on one node (DRAExtendedResource).
  Setup s;
  s.classes = {dra::device_class("gpu.nvidia.com", "gpu", "nvidia.com/gpu")};
  s.claims = {allocated_claim("c1", "dra-a", "gpu-0")};
  auto plain = [&](int gpus, int parallelism = 1) {
    ops::PreflightInput in = input_for(s);
    in.claim_template = nullptr;
    auto& pod = in.job["spec"]["template"]["spec"];
    pod.erase("resourceClaims");
    for (auto& c : pod["containers"]) c["resources"] = {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}};
    in.job["spec"]["parallelism"] = parallelism;
    return in;
  };
  CHECK(ops::check_gpu_capacity(plain(2)).empty());  // no longer "the cluster has no node with 2 nvidia.com/gpu"
  CHECK(ops::check_gpu_free_now(plain(1)).empty());
  auto three = ops::check_gpu_capacity(plain(3));
  REQUIRE(three.size() == 1);
  CHECK(three[0].message ==
        "no schedulable node has 3 GPUs: the largest has 2 (2 nodes in the cluster, 2 schedulable)");
  // dra-a's gpu-0 is held by a claim: one more 2-GPU pod fits (on dra-b), a second waits.
  auto busy = ops::check_gpu_free_now(plain(2, 2));
  REQUIRE(busy.size() == 1);
  CHECK(busy[0].message ==
        "only 1 of the job's 2 pods (2 GPUs each) fit on the GPUs free now (3 free across 2 "
        "nodes); the rest will wait in Pending");
  // Without the mapping, DRA devices serve no plain request: nothing offers nvidia.com/gpu.
  s.classes = {device_class()};
  REQUIRE(ops::check_gpu_capacity(plain(2)).size() == 1);
}
