// --avoid-failed-nodes: the per-job label key, which GPU causes blame the node, the pods' node
// affinity, and the labels written while `submit --wait` watches and removed at the end.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/submit/avoid_failed_nodes.hpp"
#include "gpuctl/ops/submit/submit.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeAnswer;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

json failed_pod(const std::string& name, const std::string& node, const std::string& created,
                const std::string& message, int exit_code = 1, bool disrupted = false) {
  json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"creationTimestamp", created}}},
              {"spec", {{"nodeName", node}}},
              {"status",
               {{"phase", "Failed"},
                {"containerStatuses",
                 json::array({{{"name", "main"},
                               {"state", {{"terminated", {{"exitCode", exit_code}, {"message", message}}}}}}})}}}};
  if (disrupted) {
    pod["status"]["conditions"] = json::array({{{"type", "DisruptionTarget"}, {"status", "True"}}});
  }
  return pod;
}

const std::string kNvml = "Failed to initialize NVML: Unknown Error";

}  // namespace

TEST_CASE("avoid failed nodes: one label key per job and namespace", "[avoid]") {
  const std::string key = ops::avoid_label_key("ml", "bert");
  CHECK(key.starts_with("avoid.gpuctl.io/bert-"));
  CHECK(key.size() == std::string("avoid.gpuctl.io/bert-").size() + 6);
  CHECK(key != ops::avoid_label_key("research", "bert"));
  CHECK(key == ops::avoid_label_key("ml", "bert"));
  // A 63-character job name still makes a name part of at most 63 characters.
  const std::string longest = ops::avoid_label_key("ml", std::string(63, 'a'));
  CHECK(longest.size() - std::string("avoid.gpuctl.io/").size() <= 63);
}

TEST_CASE("avoid failed nodes: only causes that blame the node count", "[avoid]") {
  for (const char* text : {"Failed to initialize NVML: Unknown Error", "nvml error: driver/library version mismatch",
                           "RuntimeError: No CUDA GPUs are available: no CUDA-capable device is detected",
                           "CUDA driver version is insufficient for CUDA runtime version",
                           "Unable to determine the "
                           "device handle for GPU 0000:3B:00.0: GPU is lost"}) {
    auto cause = ops::classify_gpu_failure(text);
    REQUIRE(cause);
    CHECK(ops::blames_node(*cause));
  }
  for (const char* text : {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                           "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)"}) {
    auto cause = ops::classify_gpu_failure(text);
    REQUIRE(cause);
    CHECK_FALSE(ops::blames_node(*cause));
  }
}

TEST_CASE("avoid failed nodes: the failed pods to examine, oldest first", "[avoid]") {
  std::vector<json> pods = {
      failed_pod("bert-c", "gpu-2", "2026-12-07T10:02:00Z", kNvml),
      failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", kNvml),
      failed_pod("bert-b", "gpu-1", "2026-12-07T10:01:00Z", kNvml),
      failed_pod("bert-e", "gpu-4", "2026-12-07T10:04:00Z", kNvml, 1, true),  // evicted: not the program's
      failed_pod("bert-f", "", "2026-12-07T10:05:00Z", kNvml),                // never scheduled
  };
  pods.push_back(failed_pod("bert-g", "gpu-6", "2026-12-07T10:06:00Z", kNvml));
  pods.back()["status"]["phase"] = "Running";
  auto names = [](const std::vector<const json*>& found) {
    std::vector<std::string> out;
    for (const json* p : found) out.push_back((*p)["metadata"]["name"]);
    return out;
  };
  CHECK(names(ops::failed_pods_to_examine(pods, {}, {})) == std::vector<std::string>{"bert-a", "bert-b", "bert-c"});
  CHECK(names(ops::failed_pods_to_examine(pods, {"gpu-1"}, {})) == std::vector<std::string>{"bert-c"});
  CHECK(names(ops::failed_pods_to_examine(pods, {}, {"bert-a", "bert-c"})) == std::vector<std::string>{"bert-b"});
}

TEST_CASE("avoid failed nodes: the pods require nodes without the job's key", "[avoid]") {
  ops::SubmitFlags f;
  f.name = "bert";
  f.image = "trainer:1";
  f.gpus = "1";
  f.gpu_type = "A100";
  f.avoid_failed_nodes = true;
  auto spec = ops::parse_submit_flags(f);
  REQUIRE(spec);
  ops::GpuPlacement placement;
  placement.gpu_type = "A100";
  placement.selector = {{"nvidia.com/gpu.product", {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB"}}};
  auto built = ops::build_job(*spec, placement, "ml");
  REQUIRE(built);
  const json& terms = built->job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  // The product term and ours, ANDed in one term.
  REQUIRE(terms.size() == 1);
  CHECK(terms[0]["matchExpressions"] == json::parse(R"([{"key": "nvidia.com/gpu.product", "operator": "In",
                         "values": ["NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB"]},
                        {"key": ")" + ops::avoid_label_key("ml", "bert") +
                                                    R"(", "operator": "DoesNotExist"}])"));

  ops::SubmitFlags m;  // beside -f, a manifest without a name cannot have a key
  m.from_manifest = true;
  m.avoid_failed_nodes = true;
  auto mspec = ops::parse_submit_flags(m);
  REQUIRE(mspec);
  json manifest = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", {{"generateName", "bert-"}}},
      {"spec", {{"template", {{"spec", {{"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}}}}}};
  auto refused = ops::complete_job(manifest, *mspec, ops::GpuPlacement{}, "ml", false, "job.yaml");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.starts_with("--avoid-failed-nodes needs the job's name"));
}

TEST_CASE("avoid failed nodes: poll labels the node, release removes the label", "[avoid]") {
  const std::string key = ops::avoid_label_key("ml", "bert");
  FakeClient c;
  json pods = {{"kind", "PodList"},
               {"metadata", json::object()},
               {"items", json::array({failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", kNvml)})}};
  c.fake->on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, pods.dump()));
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1", json_answer(200, R"({"metadata":{"name":"gpu-1"}})"));  // label
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1", json_answer(200, R"({"metadata":{"name":"gpu-1"}})"));  // unlabel
  json labelled = {{"kind", "NodeList"},
                   {"metadata", json::object()},
                   {"items", json::array({{{"metadata", {{"name", "gpu-1"}}}}})}};
  c.fake->on("GET", "/api/v1/nodes", json_answer(200, labelled.dump()));
  std::vector<std::string> notices;
  ops::FailedNodeAvoider avoider(*c.client, "ml", "bert", [&](const std::string& t) { notices.push_back(t); });

  ops::JobSummary summary;
  avoider.poll(summary);  // nothing failed yet: nothing read
  CHECK(c.fake->requests().empty());
  summary.failed = 1;
  avoider.poll(summary);
  avoider.poll(summary);  // the same count again: not read again
  REQUIRE(c.fake->count("GET") == 1);
  CHECK(c.fake->requests()[0].url.find("labelSelector=batch.kubernetes.io%2Fjob-name%3Dbert") != std::string::npos);
  REQUIRE(c.fake->count("PATCH") == 1);
  CHECK(json::parse(c.fake->requests()[1].body) == json{{"metadata", {{"labels", {{key, "nvml-error"}}}}}});
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].starts_with("pod bert-a failed on node gpu-1: NVML answered Unknown Error"));
  CHECK(avoider.avoided() == std::set<std::string>{"gpu-1"});

  avoider.release();
  CHECK(c.fake->requests()[2].url.find("labelSelector=avoid.gpuctl.io") != std::string::npos);
  CHECK(json::parse(c.fake->requests().back().body) == json{{"metadata", {{"labels", {{key, nullptr}}}}}});
  CHECK(notices.back() == "node gpu-1: label " + key + " removed (the job has finished)");
  CHECK(c.fake->unexpected().empty());
}

TEST_CASE("avoid failed nodes: a node that may not be labelled is a warning", "[avoid]") {
  FakeClient c;
  json pods = {{"kind", "PodList"},
               {"metadata", json::object()},
               {"items", json::array({failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", kNvml)})}};
  c.fake->on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, pods.dump()));
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1",
             json_answer(403, R"({"kind":"Status","status":"Failure","code":403,"reason":"Forbidden",
               "message":"nodes \"gpu-1\" is forbidden: User \"alice\" cannot patch resource \"nodes\""})"));
  std::vector<std::string> notices;
  ops::FailedNodeAvoider avoider(*c.client, "ml", "bert", [&](const std::string& t) { notices.push_back(t); });
  ops::JobSummary summary;
  summary.failed = 1;
  avoider.poll(summary);
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].starts_with("warning: pod bert-a failed on node gpu-1"));
  CHECK(notices[0].find("the next attempt may land there again; cordon it (gpuctl cordon gpu-1)") != std::string::npos);
  avoider.leave();
  CHECK(notices.back().find("gpuctl label gpu-1 " + ops::avoid_label_key("ml", "bert") + "-") != std::string::npos);
}

TEST_CASE("avoid failed nodes: a cause only the log names counts, a program's fault does not", "[avoid]") {
  FakeClient c;
  json pods = {{"kind", "PodList"},
               {"metadata", json::object()},
               {"items", json::array({failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", ""),
                                      failed_pod("bert-b", "gpu-2", "2026-12-07T10:01:00Z", "")})}};
  c.fake->on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, pods.dump()));
  const kube::Headers text = {{"content-type", "text/plain"}};
  c.fake->on("GET", "/api/v1/namespaces/ml/pods/bert-a/log",
             FakeAnswer{200, "step 12\nRuntimeError: Failed to initialize NVML: Unknown Error\n", text});
  c.fake->on("GET", "/api/v1/namespaces/ml/pods/bert-b/log",
             FakeAnswer{200, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", text});
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1", json_answer(200, R"({"metadata":{"name":"gpu-1"}})"));
  std::vector<std::string> notices;
  ops::FailedNodeAvoider avoider(*c.client, "ml", "bert", [&](const std::string& t) { notices.push_back(t); });
  ops::JobSummary summary;
  summary.failed = 2;
  avoider.poll(summary);
  CHECK(c.fake->unexpected().empty());
  CHECK(avoider.avoided() == std::set<std::string>{"gpu-1"});  // CUDA OOM is the program's, gpu-2 stays usable
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].starts_with("pod bert-a failed on node gpu-1: NVML answered Unknown Error"));
  summary.failed = 3;  // a later poll reads neither log again
  c.fake->on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, pods.dump()));
  avoider.poll(summary);
  CHECK(c.fake->count("GET") == 4);
}
