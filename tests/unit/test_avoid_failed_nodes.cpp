// --avoid-failed-nodes: the per-job label key, which GPU causes blame the node, the pods' node
// affinity, and the labels written while `submit --wait` watches and removed at the end.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/submit/avoid_failed_nodes.hpp"
#include "gpuctl/ops/submit/submit.hpp"

using namespace gpuctl;
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

// The summary wait_for_job hands to poll(): its failed attempts, with their termination messages'
// causes, as summarize_job reads them from the pods.
ops::JobSummary summary_of(const std::vector<json>& pods) {
  const json job = {{"metadata", {{"name", "bert"}, {"namespace", "ml"}}},
                    {"spec", {{"template", {{"spec", {{"containers", json::array({{{"name", "main"}}})}}}}}}}};
  return ops::summarize_job(job, pods, {}, std::chrono::system_clock::now());
}

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

TEST_CASE("avoid failed nodes: the attempts that blame their node, once per node, oldest first", "[avoid]") {
  std::vector<json> pods = {
      failed_pod("bert-c", "gpu-2", "2026-12-07T10:02:00Z", kNvml),
      failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", kNvml),
      failed_pod("bert-b", "gpu-1", "2026-12-07T10:01:00Z", kNvml),
      failed_pod("bert-d", "gpu-3", "2026-12-07T10:03:00Z", "CUDA out of memory"),  // the program's fault
      failed_pod("bert-e", "gpu-4", "2026-12-07T10:04:00Z", kNvml, 1, true),        // evicted: not the program's
      failed_pod("bert-f", "", "2026-12-07T10:05:00Z", kNvml),                      // never scheduled
  };
  pods.push_back(failed_pod("bert-g", "gpu-6", "2026-12-07T10:06:00Z", kNvml));
  pods.back()["status"]["phase"] = "Running";
  const ops::JobSummary summary = summary_of(pods);
  auto pods_of = [](const std::vector<const ops::FailedAttempt*>& found) {
    std::vector<std::string> out;
    for (const auto* a : found) out.push_back(a->pod);
    return out;
  };
  CHECK(pods_of(ops::attempts_to_avoid(summary.failed_attempts, {})) == std::vector<std::string>{"bert-a", "bert-c"});
  CHECK(pods_of(ops::attempts_to_avoid(summary.failed_attempts, {"gpu-1"})) == std::vector<std::string>{"bert-c"});
  CHECK(ops::attempts_to_avoid(summary.failed_attempts, {"gpu-1", "gpu-2"}).empty());
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
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1", json_answer(200, R"({"metadata":{"name":"gpu-1"}})"));  // label
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1", json_answer(200, R"({"metadata":{"name":"gpu-1"}})"));  // unlabel
  json labelled = {{"kind", "NodeList"},
                   {"metadata", json::object()},
                   {"items", json::array({{{"metadata", {{"name", "gpu-1"}}}}})}};
  c.fake->on("GET", "/api/v1/nodes", json_answer(200, labelled.dump()));
  std::vector<std::string> notices;
  ops::FailedNodeAvoider avoider(*c.client, "ml", "bert", [&](const std::string& t) { notices.push_back(t); });

  avoider.poll(summary_of({}));  // nothing failed yet: nothing written
  CHECK(c.fake->requests().empty());
  const ops::JobSummary summary = summary_of({failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", kNvml)});
  avoider.poll(summary);
  avoider.poll(summary);             // the same failure again: labelled once
  CHECK(c.fake->count("GET") == 0);  // the summary holds the causes: no reads of its own
  REQUIRE(c.fake->count("PATCH") == 1);
  CHECK(json::parse(c.fake->requests()[0].body) == json{{"metadata", {{"labels", {{key, "nvml-error"}}}}}});
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].starts_with("pod bert-a failed on node gpu-1: NVML answered Unknown Error"));
  CHECK(avoider.avoided() == std::set<std::string>{"gpu-1"});

  avoider.release();
  CHECK(c.fake->requests()[1].url.find("labelSelector=avoid.gpuctl.io") != std::string::npos);
  CHECK(json::parse(c.fake->requests().back().body) == json{{"metadata", {{"labels", {{key, nullptr}}}}}});
  CHECK(notices.back() == "node gpu-1: label " + key + " removed (the job has finished)");
  CHECK(c.fake->unexpected().empty());
}

TEST_CASE("avoid failed nodes: a node that may not be labelled is a warning", "[avoid]") {
  FakeClient c;
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1",
             json_answer(403, R"({"kind":"Status","status":"Failure","code":403,"reason":"Forbidden",
               "message":"nodes \"gpu-1\" is forbidden: User \"alice\" cannot patch resource \"nodes\""})"));
  std::vector<std::string> notices;
  ops::FailedNodeAvoider avoider(*c.client, "ml", "bert", [&](const std::string& t) { notices.push_back(t); });
  avoider.poll(summary_of({failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", kNvml)}));
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].starts_with("warning: pod bert-a failed on node gpu-1"));
  CHECK(notices[0].find("the next attempt may land there again; cordon it (gpuctl cordon gpu-1)") != std::string::npos);
  avoider.leave();
  CHECK(notices.back().find("gpuctl label gpu-1 " + ops::avoid_label_key("ml", "bert") + "-") != std::string::npos);
}

TEST_CASE("avoid failed nodes: a cause only the log names counts, a program's fault does not", "[avoid]") {
  FakeClient c;
  c.fake->on("PATCH", "/api/v1/nodes/gpu-1", json_answer(200, R"({"metadata":{"name":"gpu-1"}})"));
  std::vector<std::string> notices;
  ops::FailedNodeAvoider avoider(*c.client, "ml", "bert", [&](const std::string& t) { notices.push_back(t); });
  // No termination message: the causes are what wait_for_job read from the logs' last lines.
  ops::JobSummary summary = summary_of({failed_pod("bert-a", "gpu-1", "2026-12-07T10:00:00Z", ""),
                                        failed_pod("bert-b", "gpu-2", "2026-12-07T10:01:00Z", "")});
  REQUIRE(summary.failed_attempts.size() == 2);
  summary.failed_attempts[0].gpu_cause =
      ops::classify_log_tail("step 12\nRuntimeError: Failed to initialize NVML: Unknown Error\n");
  summary.failed_attempts[1].gpu_cause =
      ops::classify_log_tail("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
  avoider.poll(summary);
  CHECK(c.fake->unexpected().empty());
  CHECK(avoider.avoided() == std::set<std::string>{"gpu-1"});  // CUDA OOM is the program's, gpu-2 stays usable
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].starts_with("pod bert-a failed on node gpu-1: NVML answered Unknown Error"));
}
