// A failed pod's GPU cause from its termination message, else from the last lines of its log:
// real PyTorch, CUDA and NCCL endings (tests/fixtures/k8s-errors/joblog__*), the failed
// container and instance, the bounded log reads over recorded answers, and the causes that
// fetch_job_summary and collect_jobs give each failed attempt.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/jobs/jobs.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeAnswer;
using gpuctl::testing::FakeClient;
using gpuctl::testing::fixture;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

FakeAnswer text_answer(std::string body) { return FakeAnswer{200, std::move(body), {{"content-type", "text/plain"}}}; }

FakeAnswer not_found(const std::string& what) {
  return json_answer(
      404,
      json{{"kind", "Status"}, {"status", "Failure"}, {"reason", "NotFound"}, {"code", 404}, {"message", what}}.dump());
}

json terminated(int code, const std::string& message = "", const std::string& finished = "2026-12-02T10:05:00Z") {
  json t = {{"exitCode", code}, {"reason", code == 0 ? "Completed" : "Error"}, {"finishedAt", finished}};
  if (!message.empty()) t["message"] = message;
  return t;
}

// A failed pod of job `job` (restartPolicy Never): container main terminated with `code`.
json failed_pod(const std::string& name, const std::string& node, const std::string& created, int code = 1,
                const std::string& message = "") {
  return {{"metadata",
           {{"name", name},
            {"namespace", "ml"},
            {"uid", "pod-" + name},
            {"creationTimestamp", created},
            {"labels", {{"batch.kubernetes.io/controller-uid", "uid-train"}}},
            {"ownerReferences",
             json::array({{{"kind", "Job"}, {"name", "train"}, {"controller", true}, {"uid", "uid-train"}}})}}},
          {"spec", {{"nodeName", node}, {"containers", json::array({{{"name", "main"}}})}}},
          {"status",
           {{"phase", "Failed"},
            {"containerStatuses",
             json::array({{{"name", "main"}, {"state", {{"terminated", terminated(code, message, created)}}}}})}}}};
}

json failed_gpu_job(const std::string& name = "train") {
  return {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata",
       {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"creationTimestamp", "2026-12-02T10:00:00Z"}}},
      {"spec",
       {{"backoffLimit", 2},
        {"selector", {{"matchLabels", {{"batch.kubernetes.io/controller-uid", "uid-" + name}}}}},
        {"template",
         {{"spec",
           {{"restartPolicy", "Never"},
            {"containers",
             json::array({{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}})}}}}}}},
      {"status",
       {{"failed", 3},
        {"startTime", "2026-12-02T10:00:01Z"},
        {"conditions", json::array({{{"type", "Failed"},
                                     {"status", "True"},
                                     {"reason", "BackoffLimitExceeded"},
                                     {"message", "Job has reached the specified backoff limit"},
                                     {"lastTransitionTime", "2026-12-02T10:30:00Z"}}})}}}};
}

std::string list_body(std::vector<json> items) {
  return json{{"kind", "List"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", std::move(items)}}.dump();
}

std::string id_of(const std::optional<ops::GpuCauseFinding>& f) { return f ? std::string(f->cause.id) : "-"; }

std::vector<std::string> log_requests(testing::FakeTransport& fake) {
  std::vector<std::string> out;
  for (const auto& r : fake.requests()) {
    if (r.url.find("/log?") != std::string::npos) out.push_back(r.url.substr(r.url.find("/api/")));
  }
  return out;
}

}  // namespace

TEST_CASE("job cause: the last line of a real PyTorch or NCCL ending that names a GPU cause", "[job-cause]") {
  auto oom = ops::classify_log_tail(fixture("k8s-errors/joblog__pytorch-cuda-error-out-of-memory.log"));
  REQUIRE(oom);
  CHECK(oom->cause.id == "cuda-oom");
  CHECK(oom->source == ops::GpuCauseSource::log);
  // CUDA's advice after it names nothing; the error line is quoted.
  CHECK(oom->evidence == "RuntimeError: CUDA error: out of memory");

  auto nccl = ops::classify_log_tail(fixture("k8s-errors/joblog__torchrun-nccl-unhandled-system-error-no-route.log"));
  REQUIRE(nccl);
  CHECK(nccl->cause.id == "nccl-system-error");
  CHECK(nccl->evidence ==
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.6");

  // The watchdog's what() line, trimmed; the closing "Some NCCL operations have failed or timed
  // out" and "taking the entire process down" name nothing on their own.
  auto timeout = ops::classify_log_tail(fixture("k8s-errors/joblog__pytorch-nccl-watchdog-timeout-terminate.log"));
  REQUIRE(timeout);
  CHECK(timeout->cause.id == "nccl-timeout");
  CHECK(timeout->evidence.starts_with("what():  [Rank 2] NCCL watchdog thread terminated with exception"));

  // PyTorch 2's OutOfMemoryError is one ~500-character line: cut, at most the bound.
  auto big = ops::classify_log_tail(fixture("k8s-errors/joblog__pytorch-outofmemoryerror-tried-to-allocate.log"));
  REQUIRE(big);
  CHECK(big->cause.id == "cuda-oom");
  CHECK(big->evidence.size() <= ops::kGpuCauseEvidenceMaxChars);
  CHECK(big->evidence.starts_with("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB."));
  CHECK(big->evidence.ends_with("..."));
}

TEST_CASE("job cause: the last naming line wins, carriage returns end lines, nothing named is nullopt", "[job-cause]") {
  // An early OOM that was retried, then the NCCL error that ended the run.
  auto last = ops::classify_log_tail(
      "RuntimeError: CUDA error: out of memory\nretrying with batch 16\n"
      "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system error\n"
      "[ERROR] failed\n");
  CHECK(id_of(last) == "nccl-system-error");
  // A progress bar redrawn with \r ahead of the error, no newline at the end.
  auto bar = ops::classify_log_tail("epoch 1:  10%\repoch 1:  20%\rRuntimeError: CUDA error: out of memory");
  REQUIRE(bar);
  CHECK(bar->evidence == "RuntimeError: CUDA error: out of memory");
  // The kubelet's timestamps (timestamps=true) stay on the line.
  auto stamped = ops::classify_log_tail("2026-12-02T10:05:00.123456789Z RuntimeError: CUDA error: out of memory\n");
  REQUIRE(stamped);
  CHECK(stamped->evidence == "2026-12-02T10:05:00.123456789Z RuntimeError: CUDA error: out of memory");
  CHECK(id_of(ops::classify_log_tail("Traceback (most recent call last):\nKeyError: 'learning_rate'\n")) == "-");
  CHECK(id_of(ops::classify_log_tail("")) == "-");
  CHECK(id_of(ops::classify_log_tail("\n\n\r\n")) == "-");
}

TEST_CASE("job cause: a termination message's cause quotes its line, the whole message decides", "[job-cause]") {
  auto f = ops::classify_termination_message("loading model\nFailed to initialize NVML: Unknown Error\n");
  REQUIRE(f);
  CHECK(f->cause.id == "nvml-error");
  CHECK(f->source == ops::GpuCauseSource::termination_message);
  CHECK(f->evidence == "Failed to initialize NVML: Unknown Error");
  // NVML on one line and Unknown Error on the next: the message names it, no one line does.
  auto split = ops::classify_termination_message("NVML init failed\nUnknown Error\n");
  REQUIRE(split);
  CHECK(split->cause.id == "nvml-error");
  CHECK(split->evidence == "Unknown Error");
  CHECK_FALSE(ops::classify_termination_message("exit status 3"));
}

TEST_CASE("job cause: the failed container and which instance of it has the log", "[job-cause]") {
  json never = failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z", 1);
  auto a = ops::failed_attempt_of(never);
  REQUIRE(a);
  CHECK(a->pod == "train-a");
  CHECK(a->node == "gpu-1");
  CHECK(a->container == "main");
  CHECK(a->exit_code == 1);
  CHECK_FALSE(a->previous_instance);
  CHECK_FALSE(a->gpu_cause);

  // restartPolicy OnFailure: running again, the failure is the previous instance's.
  json restarted = never;
  restarted["status"]["phase"] = "Running";
  restarted["status"]["containerStatuses"][0] = {{"name", "main"},
                                                 {"state", {{"running", {{"startedAt", "2026-12-02T10:02:00Z"}}}}},
                                                 {"lastState", {{"terminated", terminated(137)}}}};
  auto r = ops::failed_attempt_of(restarted);
  REQUIRE(r);
  CHECK(r->exit_code == 137);
  CHECK(r->previous_instance);

  // An init container that failed last is the one read; a clean exit is no failure.
  json init = never;
  init["status"]["containerStatuses"][0]["state"]["terminated"] = terminated(0);
  init["status"]["initContainerStatuses"] =
      json::array({{{"name", "fetch"}, {"state", {{"terminated", terminated(2, "CUDA error: out of memory")}}}}});
  auto i = ops::failed_attempt_of(init);
  REQUIRE(i);
  CHECK(i->container == "fetch");
  CHECK(id_of(i->gpu_cause) == "cuda-oom");
  init.erase("status");
  CHECK_FALSE(ops::failed_attempt_of(init));
}

TEST_CASE("job cause: read_pod_gpu_cause reads the failed container's log tail, bounded", "[job-cause]") {
  FakeClient fc;
  auto& fake = *fc.fake;
  const std::string log_path = "/api/v1/namespaces/ml/pods/train-a/log";

  SECTION("the termination message first: no log read") {
    auto r = ops::read_pod_gpu_cause(
        *fc.client, failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z", 1, "GPU is lost. Reboot the system"));
    REQUIRE(r);
    CHECK(id_of(*r) == "gpu-lost");
    CHECK(fake.requests().empty());
  }
  SECTION("then the last 50 lines of the container that failed, within limitBytes") {
    fake.on("GET", log_path, text_answer(fixture("k8s-errors/joblog__pytorch-cuda-error-out-of-memory.log")));
    auto r = ops::read_pod_gpu_cause(*fc.client, failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"));
    REQUIRE(r);
    REQUIRE(*r);
    CHECK((*r)->source == ops::GpuCauseSource::log);
    CHECK((*r)->evidence == "RuntimeError: CUDA error: out of memory");
    CHECK(log_requests(fake) == std::vector<std::string>{log_path + "?container=main&tailLines=50&limitBytes=262144"});
  }
  SECTION("a restarted container's previous instance") {
    json pod = failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z");
    pod["status"]["containerStatuses"][0] = {{"name", "main"},
                                             {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
                                             {"lastState", {{"terminated", terminated(1)}}}};
    fake.on("GET", log_path, text_answer("RuntimeError: CUDA error: out of memory\n"), "previous=true");
    auto r = ops::read_pod_gpu_cause(*fc.client, pod);
    REQUIRE(r);
    CHECK(id_of(*r) == "cuda-oom");
    CHECK(fake.unexpected().empty());
  }
  SECTION("a log that cannot be read leaves the cause unknown, not an error") {
    fake.on("GET", log_path, not_found("nodes \"gpu-1\" not found"));
    auto gone = ops::read_pod_gpu_cause(*fc.client, failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"));
    REQUIRE(gone);
    CHECK_FALSE(*gone);
    fake.on("GET", log_path, json_answer(403, R"({"kind":"Status","code":403,"reason":"Forbidden"})"));
    auto refused = ops::read_pod_gpu_cause(*fc.client, failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"));
    REQUIRE(refused);
    CHECK_FALSE(*refused);
  }
  SECTION("bytes that ran out before the tail's end: its last 8 lines read again") {
    std::string bar(static_cast<std::size_t>(ops::kGpuCauseLogLimitBytes), '#');
    fake.on("GET", log_path, text_answer(bar), "tailLines=50");
    fake.on("GET", log_path, text_answer("Failed to initialize NVML: Driver/library version mismatch\n"),
            "tailLines=8");
    auto r = ops::read_pod_gpu_cause(*fc.client, failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"));
    REQUIRE(r);
    CHECK(id_of(*r) == "driver-library-mismatch");
    CHECK(log_requests(fake).size() == 2);
  }
  SECTION("a pod that never ran on a node has no log to read") {
    auto r = ops::read_pod_gpu_cause(*fc.client, failed_pod("train-a", "", "2026-12-02T10:01:00Z"));
    REQUIRE(r);
    CHECK_FALSE(*r);
    CHECK(fake.requests().empty());
  }
}

TEST_CASE("job cause: fetch_job_summary gives each of the newest failed attempts its cause and where it was found",
          "[job-cause]") {
  FakeClient fc;
  auto& fake = *fc.fake;
  std::vector<json> pods = {failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"),
                            failed_pod("train-b", "gpu-2", "2026-12-02T10:10:00Z", 1, "Xid 79 reported by the driver"),
                            failed_pod("train-c", "gpu-3", "2026-12-02T10:20:00Z"),
                            failed_pod("train-d", "gpu-4", "2026-12-02T10:29:00Z")};
  fake.on("GET", "/apis/batch/v1/namespaces/ml/jobs/train", json_answer(200, failed_gpu_job().dump()));
  fake.on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, list_body(pods)));
  fake.on("GET", "/api/v1/namespaces/ml/events", json_answer(200, list_body({})));
  fake.on("GET", "/api/v1/namespaces/ml/pods/train-a/log",
          text_answer(fixture("k8s-errors/joblog__torchrun-nccl-unhandled-system-error-no-route.log")));
  fake.on("GET", "/api/v1/namespaces/ml/pods/train-c/log", not_found("the node is gone"));
  fake.on("GET", "/api/v1/namespaces/ml/pods/train-d/log",
          text_answer(fixture("k8s-errors/joblog__pytorch-cuda-error-out-of-memory.log")));
  auto s = ops::fetch_job_summary(*fc.client, "ml", "train", *util::parse_rfc3339("2026-12-02T11:00:00Z"));
  REQUIRE(s);
  CHECK(fake.unexpected().empty());
  // train-b's termination message named its cause: its log is never read.
  CHECK(log_requests(fake).size() == 3);

  REQUIRE(s->failed_attempts.size() == 4);
  CHECK(s->failed_nodes == std::vector<std::string>{"gpu-1", "gpu-2", "gpu-3", "gpu-4"});
  CHECK(id_of(s->failed_attempts[0].gpu_cause) == "nccl-system-error");
  CHECK(id_of(s->failed_attempts[1].gpu_cause) == "xid");
  CHECK(s->failed_attempts[1].gpu_cause->source == ops::GpuCauseSource::termination_message);
  CHECK(id_of(s->failed_attempts[2].gpu_cause) == "-");
  CHECK(id_of(s->failed_attempts[3].gpu_cause) == "cuda-oom");

  REQUIRE(s->failure);
  CHECK(s->failure->pod == "train-d");
  REQUIRE(s->failure->gpu_cause);
  CHECK(s->failure->gpu_cause_source == ops::GpuCauseSource::log);
  CHECK(s->failure->gpu_cause_evidence == "RuntimeError: CUDA error: out of memory");
  CHECK(s->reason ==
        "Job has reached the specified backoff limit: container main of pod train-d exited with code 1 (Error); "
        "GPU cause: the job ran out of GPU memory on node gpu-4 (lower the batch size or use a GPU with more "
        "memory); its log says: RuntimeError: CUDA error: out of memory");

  json doc = ops::to_json(*s);
  CHECK(doc["failedNodes"] == json::array({"gpu-1", "gpu-2", "gpu-3", "gpu-4"}));
  CHECK(doc["failure"]["gpuCause"]["source"] == "log");
  CHECK(doc["failure"]["gpuCause"]["evidence"] == "RuntimeError: CUDA error: out of memory");
  REQUIRE(doc["failedAttempts"].size() == 4);
  CHECK(doc["failedAttempts"][0] == json{{"pod", "train-a"},
                                         {"node", "gpu-1"},
                                         {"container", "main"},
                                         {"exitCode", 1},
                                         {"terminationReason", "Error"},
                                         {"finishedAt", "2026-12-02T10:01:00Z"},
                                         {"gpuCause", ops::to_json(*s->failed_attempts[0].gpu_cause)}});
  CHECK(doc["failedAttempts"][1]["gpuCause"]["source"] == "termination message");
  CHECK(doc["failedAttempts"][2]["gpuCause"].is_null());
}

TEST_CASE("job cause: gpuctl jobs reads one log per failed GPU job, the latest failed pod's only", "[job-cause]") {
  FakeClient fc;
  auto& fake = *fc.fake;
  json other = failed_gpu_job("eval");
  json eval_pod = failed_pod("eval-a", "gpu-9", "2026-12-02T10:20:00Z");
  eval_pod["metadata"]["ownerReferences"][0]["uid"] = "uid-eval";
  eval_pod["metadata"]["ownerReferences"][0]["name"] = "eval";
  json cpu_job = failed_gpu_job("etl");
  cpu_job["spec"]["template"]["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "1"}}}};
  json etl_pod = failed_pod("etl-a", "cpu-1", "2026-12-02T10:20:00Z");
  etl_pod["metadata"]["ownerReferences"][0]["uid"] = "uid-etl";
  fake.on("GET", "/apis/batch/v1/namespaces/ml/jobs", json_answer(200, list_body({failed_gpu_job(), other, cpu_job})));
  fake.on("GET", "/api/v1/namespaces/ml/pods",
          json_answer(200, list_body({failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"),
                                      failed_pod("train-b", "gpu-2", "2026-12-02T10:10:00Z"), eval_pod, etl_pod})));
  fake.on("GET", "/api/v1/namespaces/ml/events", json_answer(200, list_body({})));
  fake.on("GET", "/api/v1/namespaces/ml/pods/train-b/log",
          text_answer(fixture("k8s-errors/joblog__pytorch-nccl-watchdog-timeout-terminate.log")));
  fake.on("GET", "/api/v1/namespaces/ml/pods/eval-a/log", text_answer("Traceback (most recent call last):\nOSError\n"));
  ops::JobListOptions options;
  options.namespace_name = "ml";
  options.include_non_gpu_jobs = true;
  auto list = ops::collect_jobs(*fc.client, options, *util::parse_rfc3339("2026-12-02T11:00:00Z"));
  REQUIRE(list);
  CHECK(fake.unexpected().empty());
  auto reads = log_requests(fake);
  std::sort(reads.begin(), reads.end());
  // Not train-a (an older attempt), not etl-a (no GPU).
  REQUIRE(reads.size() == 2);
  CHECK(reads[0].starts_with("/api/v1/namespaces/ml/pods/eval-a/log?"));
  CHECK(reads[1].starts_with("/api/v1/namespaces/ml/pods/train-b/log?"));
  REQUIRE(list->jobs.size() == 3);
  const auto& train = list->jobs[2];
  CHECK(train.name == "train");
  CHECK(train.failure->gpu_cause->id == "nccl-timeout");
  CHECK(id_of(train.failed_attempts[0].gpu_cause) == "-");
  CHECK(id_of(train.failed_attempts[1].gpu_cause) == "nccl-timeout");
  CHECK_FALSE(list->jobs[1].failure->gpu_cause);  // eval: its log names no GPU cause
}

TEST_CASE("job cause: gpuctl jobs NAME reads the named job's newest failed attempts too", "[job-cause]") {
  FakeClient fc;
  auto& fake = *fc.fake;
  fake.on("GET", "/apis/batch/v1/namespaces/ml/jobs", json_answer(200, list_body({failed_gpu_job()})),
          "fieldSelector=metadata.name%3Dtrain");
  fake.on("GET", "/api/v1/namespaces/ml/pods",
          json_answer(200, list_body({failed_pod("train-a", "gpu-1", "2026-12-02T10:01:00Z"),
                                      failed_pod("train-b", "gpu-2", "2026-12-02T10:10:00Z")})));
  fake.on("GET", "/api/v1/namespaces/ml/events", json_answer(200, list_body({})));
  fake.on("GET", "/api/v1/namespaces/ml/pods/train-a/log", text_answer("RuntimeError: CUDA error: out of memory\n"));
  fake.on("GET", "/api/v1/namespaces/ml/pods/train-b/log",
          text_answer("Failed to initialize NVML: Driver/library version mismatch\n"));
  ops::JobListOptions options;
  options.namespace_name = "ml";
  options.names = {"train"};
  auto list = ops::collect_jobs(*fc.client, options, *util::parse_rfc3339("2026-12-02T11:00:00Z"));
  REQUIRE(list);
  CHECK(fake.unexpected().empty());
  REQUIRE(list->jobs.size() == 1);
  const auto& attempts = list->jobs[0].failed_attempts;
  REQUIRE(attempts.size() == 2);
  CHECK(id_of(attempts[0].gpu_cause) == "cuda-oom");
  CHECK(id_of(attempts[1].gpu_cause) == "driver-library-mismatch");
  CHECK(list->jobs[0].failure->gpu_cause->id == "driver-library-mismatch");
}
