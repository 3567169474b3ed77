// Job status in plain words: the scheduler's verdicts (real messages from fixtures/k8s-errors),
// summarize_job over Job, pod and event objects, and wait_for_job over the fake transport.
#include <catch2/catch.hpp>

#include <filesystem>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"

using namespace gpuctl;
using gpuctl::testing::FakeClient;
using gpuctl::testing::fixture;
using gpuctl::testing::fixture_path;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

util::TimePoint at(const char* text) { return *util::parse_rfc3339(text); }

std::vector<std::pair<int, std::string>> reasons_of(const ops::SchedulingVerdict& v) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& r : v.reasons) out.emplace_back(r.nodes, r.reason);
  return out;
}

json gpu_job(const std::string& name, int gpus, int parallelism = 1) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "uid-" + name},
            {"creationTimestamp", "2026-12-02T10:00:00Z"}}},
          {"spec",
           {{"parallelism", parallelism},
            {"completions", parallelism},
            {"selector", {{"matchLabels", {{"batch.kubernetes.io/controller-uid", "uid-" + name}}}}},
            {"template",
             {{"spec",
               {{"restartPolicy", "Never"},
                {"containers",
                 json::array({{{"name", "main"},
                               {"image", "x"},
                               {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}}}}},
          {"status", json::object()}};
}

json job_pod(const std::string& name, const std::string& phase, const std::string& node = "") {
  json p = {{"metadata", {{"name", name}, {"namespace", "team-a"}, {"creationTimestamp", "2026-12-02T10:00:01Z"}}},
            {"spec", json::object()},
            {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

json condition(const std::string& type, const std::string& reason, const std::string& message,
               const std::string& time) {
  return {{"type", type}, {"status", "True"}, {"reason", reason}, {"message", message}, {"lastTransitionTime", time}};
}

}  // namespace

TEST_CASE("ops::parse_scheduling_message reads every real scheduler message in the fixtures", "[job-status]") {
  struct Case {
    const char* file;
    int available, total;
    std::vector<std::pair<int, std::string>> reasons;
  };
  std::vector<Case> cases = {
      {"sched__describe-event__exceeds-gpu-quota__gpu-admission.txt", 0, 2, {{2, "ExceedsGPUQuota"}}},
      {"sched__describe-event__insufficient-gpu-and-unschedulable.txt",
       0,
       2,
       {{1, "Insufficient nvidia.com/gpu"}, {1, "node(s) were unschedulable"}}},
      {"sched__describe-event__node-selector-and-insufficient-gpu__openshift-3.11.txt",
       0,
       6,
       {{3, "node(s) didn't match node selector"}, {6, "Insufficient nvidia.com/gpu"}}},
      {"sched__describe-event__taint-didnt-tolerate__pre-1.25.txt",
       0,
       1,
       {{1, "node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate"}}},
      {"sched__describe-events-table__insufficient-extended-resource-gpushare.txt",
       0,
       2,
       {{2, "Insufficient aliyun.com/gpu-mem"}}},
      {"sched__get-events__predicates-insufficient-cpu-memory__k8s-1.7.txt",
       0,
       0,
       {{9, "Insufficient cpu"}, {15, "Insufficient memory"}, {18, "MatchNodeSelector"}}},
      {"sched__get-events__untolerated-taint-unreachable.txt",
       0,
       1,
       {{1, "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}}},
      {"sched__insufficient-gpu-and-unschedulable__title.txt",
       0,
       2,
       {{1, "Insufficient nvidia.com/gpu"}, {1, "node(s) were unschedulable"}}},
      {"sched__insufficient-gpu__1-node__k8s-1.1x.txt", 0, 1, {{1, "Insufficient nvidia.com/gpu"}}},
  };
  // Every sched__ fixture is covered here: a new one must be added to this table.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_path("k8s-errors"))) {
    files += entry.path().filename().string().starts_with("sched__") ? 1 : 0;
  }
  CHECK(files == cases.size());
  for (const auto& c : cases) {
    CAPTURE(c.file);
    auto v = ops::parse_scheduling_message(fixture(std::string("k8s-errors/") + c.file));
    REQUIRE(v);
    CHECK(v->available == c.available);
    CHECK(v->total == c.total);
    CHECK(reasons_of(*v) == c.reasons);
  }
  auto unreachable =
      ops::parse_scheduling_message(fixture("k8s-errors/sched__get-events__untolerated-taint-unreachable.txt"));
  REQUIRE(unreachable);
  CHECK(unreachable->preemption == "0/1 nodes are available: 1 Preemption is not helpful for scheduling");
}

TEST_CASE("ops::parse_scheduling_message handles the formats of current and older servers", "[job-status]") {
  auto current = ops::parse_scheduling_message(
      "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 "
      "Insufficient "
      "nvidia.com/gpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No "
      "preemption "
      "victims found for incoming pod.");
  REQUIRE(current);
  CHECK(reasons_of(*current) == std::vector<std::pair<int, std::string>>{
                                    {1, "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"},
                                    {2, "Insufficient nvidia.com/gpu"}});
  CHECK(current->preemption ==
        "0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for "
        "incoming pod");

  auto old_dots = ops::parse_scheduling_message("0/3 nodes are available: 3 Insufficient nvidia.com/gpu..");
  REQUIRE(old_dots);
  CHECK(reasons_of(*old_dots) == std::vector<std::pair<int, std::string>>{{3, "Insufficient nvidia.com/gpu"}});

  auto predicates = ops::parse_scheduling_message(
      "No nodes are available that match all of the following predicates:: Insufficient nvidia.com/gpu (2).");
  REQUIRE(predicates);
  CHECK(reasons_of(*predicates) == std::vector<std::pair<int, std::string>>{{2, "Insufficient nvidia.com/gpu"}});

  auto no_count = ops::parse_scheduling_message(
      "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes are available: "
      "4 "
      "Preemption is not helpful for scheduling.");
  REQUIRE(no_count);
  CHECK(reasons_of(*no_count) ==
        std::vector<std::pair<int, std::string>>{{0, "pod has unbound immediate PersistentVolumeClaims"}});

  CHECK_FALSE(ops::parse_scheduling_message("Successfully assigned team-a/train-0 to gpu-1"));
  CHECK_FALSE(ops::parse_scheduling_message(""));
}

TEST_CASE("ops::explain_scheduling says the verdict in plain words", "[job-status]") {
  auto explain = [](const char* message) { return ops::explain_scheduling(*ops::parse_scheduling_message(message)); };
  CHECK(
      explain("0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 "
              "Insufficient nvidia.com/gpu.") ==
      "no node can take it now (3 nodes): 1 has a taint it does not tolerate (node-role.kubernetes.io/control-plane), "
      "2 have too few free nvidia.com/gpu");
  CHECK(explain("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.") ==
        "no node can take it now (2 nodes): 1 has too few free nvidia.com/gpu, 1 is cordoned (unschedulable)");
  CHECK(
      explain("0/6 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 3 node(s) had taints that "
              "the pod didn't tolerate.") ==
      "no node can take it now (6 nodes): 3 do not match its node selector or affinity, 3 have taints it does not "
      "tolerate");
  CHECK(explain("0/1 nodes are available: 1 node(s) had taint {dedicated: ml}, that the pod didn't tolerate.") ==
        "no node can take it now (1 node): 1 has a taint it does not tolerate (dedicated=ml)");
  CHECK(explain("0/2 nodes are available: 2 ExceedsGPUQuota.") ==
        "no node can take it now (2 nodes): 2 nodes: ExceedsGPUQuota");
  CHECK(
      explain("No nodes are available that match all of the following predicates:: Insufficient nvidia.com/gpu (2).") ==
      "no node can take it now: 2 have too few free nvidia.com/gpu");
  CHECK(explain("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No "
                "preemption victims found for incoming pod.") ==
        "no node can take it now (3 nodes): 3 have too few free nvidia.com/gpu; preempting lower-priority pods would "
        "not help");
}

TEST_CASE("ops::summarize_job for succeeded, failed and running jobs", "[job-status]") {
  const auto now = at("2026-12-02T11:00:00Z");
  SECTION("succeeded: nodes, GPUs, times") {
    json job = gpu_job("train", 4, 2);
    job["status"] = {
        {"startTime", "2026-12-02T10:00:05Z"},
        {"completionTime", "2026-12-02T10:30:05Z"},
        {"succeeded", 2},
        {"conditions", json::array({condition("SuccessCriteriaMet", "CompletionsReached", "", "2026-12-02T10:30:05Z"),
                                    condition("Complete", "CompletionsReached", "", "2026-12-02T10:30:05Z")})}};
    auto s = ops::summarize_job(
        job, {job_pod("train-b", "Succeeded", "gpu-2"), job_pod("train-a", "Succeeded", "gpu-1")}, {}, now);
    CHECK(s.phase == ops::JobPhase::succeeded);
    CHECK(s.finished);
    CHECK(s.gpu_job);
    CHECK(s.gpus_per_pod == 4);
    CHECK(s.gpus == 8);
    CHECK(s.nodes == std::vector<std::string>{"gpu-1", "gpu-2"});
    CHECK(s.age_seconds == 3600);
    CHECK(s.duration_seconds == 1800);
    CHECK(s.finished_at == "2026-12-02T10:30:05Z");
    CHECK(s.reason.empty());
    CHECK_FALSE(s.failure);
  }
  SECTION("failed: the condition and the latest failed container's exit code") {
    json job = gpu_job("train", 1);
    job["status"] = {{"startTime", "2026-12-02T10:00:05Z"},
                     {"failed", 2},
                     {"conditions",
                      json::array({condition("FailureTarget", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit", "2026-12-02T10:10:00Z"),
                                   condition("Failed", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit", "2026-12-02T10:10:01Z")})}};
    json first = job_pod("train-1", "Failed", "gpu-1");
    first["status"]["containerStatuses"] = json::array(
        {{{"name", "main"},
          {"state",
           {{"terminated", {{"exitCode", 1}, {"reason", "Error"}, {"finishedAt", "2026-12-02T10:05:00Z"}}}}}}});
    json second = job_pod("train-2", "Failed", "gpu-2");
    second["status"]["containerStatuses"] = json::array(
        {{{"name", "main"},
          {"state",
           {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}, {"finishedAt", "2026-12-02T10:09:59Z"}}}}}}});
    auto s = ops::summarize_job(job, {second, first}, {}, now);
    CHECK(s.phase == ops::JobPhase::failed);
    CHECK(s.finished);
    CHECK(s.finished_at == "2026-12-02T10:10:01Z");  // no completionTime for failed jobs: the condition's time
    CHECK(s.duration_seconds == 596);
    REQUIRE(s.failure);
    CHECK(s.failure->reason == "BackoffLimitExceeded");
    CHECK(s.failure->exit_code == 137);
    CHECK(s.failure->pod == "train-2");
    CHECK(s.failure->container == "main");
    CHECK(s.failure->termination_reason == "OOMKilled");
    CHECK(
        s.reason ==
        "Job has reached the specified backoff limit: container main of pod train-2 exited with code 137 (OOMKilled)");
  }
  SECTION("the failed container's termination message says why (issue 15: it was dropped)") {
    json job = gpu_job("train", 1);
    job["status"] = {{"conditions",
                      json::array({condition("Failed", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit", "2026-12-02T10:10:01Z")})}};
    json failed = job_pod("train-1", "Failed", "gpu-1");
    failed["status"]["containerStatuses"] =
        json::array({{{"name", "main"},
                      {"state",
                       {{"terminated",
                         {{"exitCode", 1},
                          {"reason", "Error"},
                          {"message", "loading model\nnvml error: driver/library version mismatch\n"},
                          {"finishedAt", "2026-12-02T10:09:59Z"}}}}}}});
    auto s = ops::summarize_job(job, {failed}, {}, now);
    REQUIRE(s.failure);
    CHECK(s.failure->termination_message == "loading model\nnvml error: driver/library version mismatch\n");
    // The message names a GPU cause (issue 20): said with the node the pod ran on.
    CHECK(s.reason ==
          "Job has reached the specified backoff limit: container main of pod train-1 exited with code 1 "
          "(Error): nvml error: driver/library version mismatch; GPU cause: the NVIDIA kernel module and user-space "
          "library differ (driver upgraded, node not rebooted) on node gpu-1 (drain and reboot the node)");
    CHECK(s.failed_nodes == std::vector<std::string>{"gpu-1"});
    json j = ops::to_json(s);
    CHECK(j["failure"]["terminationMessage"] == "loading model\nnvml error: driver/library version mismatch\n");
    CHECK(j["failure"]["node"] == "gpu-1");
    CHECK(j["failure"]["gpuCause"]["id"] == "driver-library-mismatch");
    CHECK(j["failedNodes"] == json::array({"gpu-1"}));
  }
  SECTION("every failed attempt's node, oldest first, and a program's own error is no GPU cause") {
    json job = gpu_job("train", 1);
    job["status"] = {{"conditions",
                      json::array({condition("Failed", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit", "2026-12-02T10:10:01Z")})}};
    json first = job_pod("train-a", "Failed", "gpu-2");
    first["metadata"]["creationTimestamp"] = "2026-12-02T10:00:00Z";
    json evicted = job_pod("train-b", "Failed", "gpu-3");
    evicted["metadata"]["creationTimestamp"] = "2026-12-02T10:01:00Z";
    evicted["status"]["conditions"] = json::array({{{"type", "DisruptionTarget"}, {"status", "True"}}});
    json last = job_pod("train-c", "Failed", "gpu-1");
    last["metadata"]["creationTimestamp"] = "2026-12-02T10:02:00Z";
    last["status"]["containerStatuses"] = json::array(
        {{{"name", "main"},
          {"state", {{"terminated", {{"exitCode", 2}, {"reason", "Error"}, {"message", "KeyError: 'lr'\n"}}}}}}});
    auto s = ops::summarize_job(job, {last, evicted, first}, {}, now);
    CHECK(s.failed_nodes == std::vector<std::string>{"gpu-2", "gpu-1"});
    REQUIRE(s.failure);
    CHECK_FALSE(s.failure->gpu_cause);
    CHECK(s.reason.ends_with("exited with code 2 (Error): KeyError: 'lr'"));
  }
  SECTION("failed by deadline with no failed container") {
    json job = gpu_job("train", 1);
    job["status"] = {{"startTime", "2026-12-02T10:00:05Z"},
                     {"conditions", json::array({condition("Failed", "DeadlineExceeded",
                                                           "Job was active longer than specified deadline",
                                                           "2026-12-02T10:10:01Z")})}};
    auto s = ops::summarize_job(job, {}, {}, now);
    CHECK(s.phase == ops::JobPhase::failed);
    REQUIRE(s.failure);
    CHECK(s.failure->reason == "DeadlineExceeded");
    CHECK_FALSE(s.failure->exit_code);
    CHECK(s.reason == "Job was active longer than specified deadline");
  }
  SECTION("FailureTarget alone: failed, not finished yet") {
    json job = gpu_job("train", 1);
    job["status"] = {
        {"conditions",
         json::array({condition(
             "FailureTarget", "PodFailurePolicy",
             "Container main for pod team-a/train-1 failed with exit code 42 matching FailJob rule at index 0",
             "2026-12-02T10:10:01Z")})}};
    auto s = ops::summarize_job(job, {}, {}, now);
    CHECK(s.phase == ops::JobPhase::failed);
    CHECK_FALSE(s.finished);
  }
  SECTION("running: duration to now") {
    json job = gpu_job("train", 2);
    job["status"] = {{"startTime", "2026-12-02T10:50:00Z"}, {"active", 1}, {"ready", 1}};
    auto s = ops::summarize_job(job, {job_pod("train-x", "Running", "gpu-3")}, {}, now);
    CHECK(s.phase == ops::JobPhase::running);
    CHECK_FALSE(s.finished);
    CHECK(s.duration_seconds == 600);
    CHECK(s.reason.empty());
    CHECK(s.nodes == std::vector<std::string>{"gpu-3"});
  }
  SECTION("a CPU job is no GPU job") {
    json job = gpu_job("etl", 0);
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "2"}}}};
    CHECK_FALSE(ops::job_requests_gpu(job));
    CHECK(ops::summarize_job(job, {}, {}, now).gpus == 0);
    json mig = gpu_job("mig", 0);
    mig["spec"]["template"]["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/mig-1g.10gb", "1"}}}};
    CHECK(ops::job_requests_gpu(mig));
  }
}

TEST_CASE("ops::summarize_job says why a job pends", "[job-status]") {
  const auto now = at("2026-12-02T11:00:00Z");
  json job = gpu_job("big", 16);
  job["status"] = {{"startTime", "2026-12-02T10:00:05Z"}, {"active", 1}};
  SECTION("the scheduler's verdict from PodScheduled=False") {
    json pod = job_pod("big-x", "Pending");
    pod["status"]["conditions"] =
        json::array({{{"type", "PodScheduled"},
                      {"status", "False"},
                      {"reason", "Unschedulable"},
                      {"message",
                       "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 "
                       "No preemption victims found for incoming pod."}}});
    auto s = ops::summarize_job(job, {pod}, {}, now);
    CHECK(s.phase == ops::JobPhase::pending);
    CHECK(s.reason ==
          "not scheduled: no node can take it now (3 nodes): 3 have too few free nvidia.com/gpu; preempting "
          "lower-priority pods would not help");
  }
  SECTION("the scheduler's event when the condition has no message") {
    json event = {{"involvedObject", {{"kind", "Pod"}, {"name", "big-x"}, {"namespace", "team-a"}}},
                  {"reason", "FailedScheduling"},
                  {"message", fixture("k8s-errors/sched__insufficient-gpu__1-node__k8s-1.1x.txt")},
                  {"lastTimestamp", "2026-12-02T10:01:00Z"}};
    json other = event;
    other["involvedObject"]["name"] = "someone-else";
    other["message"] = "0/9 nodes are available: 9 Too many pods.";
    auto s = ops::summarize_job(job, {job_pod("big-x", "Pending")}, {other, event}, now);
    CHECK(s.reason == "not scheduled: no node can take it now (1 node): 1 has too few free nvidia.com/gpu");
  }
  SECTION("a quota that refused its pods (FailedCreate)") {
    json event = {{"involvedObject", {{"kind", "Job"}, {"name", "big"}, {"namespace", "team-a"}, {"uid", "uid-big"}}},
                  {"reason", "FailedCreate"},
                  {"type", "Warning"},
                  {"message",
                   "Error creating: pods \"big-x\" is forbidden: exceeded quota: gpus, requested: "
                   "requests.nvidia.com/gpu=16, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=8"},
                  {"lastTimestamp", "2026-12-02T10:01:00Z"}};
    auto s = ops::summarize_job(job, {}, {event}, now);
    CHECK(s.phase == ops::JobPhase::pending);
    CHECK(s.reason.starts_with("pods refused at creation: quota \"gpus\""));
    CHECK(s.reason.find("requests.nvidia.com/gpu") != std::string::npos);
    // An event about another Job of the same name (older uid) is not this job's.
    event["involvedObject"]["uid"] = "uid-old";
    CHECK(ops::summarize_job(job, {}, {event}, now).reason == "no pods created yet");
  }
  SECTION("suspended") {
    job["spec"]["suspend"] = true;
    auto s = ops::summarize_job(job, {}, {}, now);
    CHECK(s.phase == ops::JobPhase::suspended);
    CHECK(s.reason.starts_with("suspended (spec.suspend is true)"));
  }
  SECTION("not started, or waiting for an image") {
    json fresh = gpu_job("fresh", 1);
    CHECK(ops::summarize_job(fresh, {}, {}, now).reason == "the Job controller has not started it yet");
    json pod = job_pod("big-x", "Pending", "gpu-1");
    pod["status"]["containerStatuses"] = json::array(
        {{{"name", "main"},
          {"state", {{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "Back-off pulling image \"x\""}}}}}}});
    CHECK(ops::summarize_job(job, {pod}, {}, now).reason ==
          "container main of pod big-x is waiting: ImagePullBackOff (Back-off pulling image \"x\")");
  }
}

TEST_CASE("ops::to_json(JobSummary) uses the documented field names", "[job-status]") {
  json job = gpu_job("train", 2);
  auto doc = ops::to_json(ops::summarize_job(job, {}, {}, at("2026-12-02T11:00:00Z")));
  CHECK(doc["namespace"] == "team-a");
  CHECK(doc["status"] == "Pending");
  CHECK(doc["gpus"] == 2);
  CHECK(doc["durationSeconds"].is_null());
  CHECK(doc["failure"].is_null());
  CHECK(doc["pods"] == json{{"active", 0}, {"succeeded", 0}, {"failed", 0}});
}

TEST_CASE("ops::wait_for_job polls until the Job has a Complete or Failed condition", "[job-status]") {
  FakeClient fc;
  auto& fake = *fc.fake;
  const std::string job_path = "/apis/batch/v1/namespaces/team-a/jobs/train";
  json pending = gpu_job("train", 1);
  json running = pending;
  running["status"] = {{"startTime", "2026-12-02T10:00:05Z"}, {"active", 1}, {"ready", 1}};
  json failing = running;
  failing["status"]["conditions"] = json::array({condition(
      "FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit", "2026-12-02T10:10:01Z")});
  json failed = failing;
  failed["status"]["active"] = 0;
  failed["status"]["conditions"].push_back(condition(
      "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", "2026-12-02T10:10:02Z"));
  json failed_pod = job_pod("train-1", "Failed", "gpu-1");
  failed_pod["status"]["containerStatuses"] =
      json::array({{{"name", "main"}, {"state", {{"terminated", {{"exitCode", 3}, {"reason", "Error"}}}}}}});
  auto list = [](std::vector<json> items) {
    return json{{"kind", "List"}, {"metadata", json::object()}, {"items", items}}.dump();
  };

  std::vector<std::string> seen;
  ops::JobWaitOptions options;
  options.poll_interval = std::chrono::milliseconds(500);
  std::vector<std::chrono::milliseconds> sleeps;
  auto clock_now = at("2026-12-02T10:00:00Z");
  options.sleep = [&](std::chrono::milliseconds d) {
    sleeps.push_back(d);
    clock_now += d;
  };
  options.clock = [&] { return clock_now; };
  options.on_change = [&](const ops::JobSummary& s) {
    seen.push_back(std::string(ops::to_string(s.phase)) + "|" + s.reason);
  };

  SECTION("to the final summary with the exit code") {
    for (const json* j : {&pending, &running, &running, &failing, &failed})
      fake.on("GET", job_path, json_answer(200, j->dump()));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({})));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({job_pod("train-1", "Running", "gpu-1")})));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({job_pod("train-1", "Running", "gpu-1")})));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({failed_pod})));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({failed_pod})));
    for (int i = 0; i < 5; ++i) fake.on("GET", "/api/v1/namespaces/team-a/events", json_answer(200, list({})));
    // The failed pod's log, read once for both polls that see it; it names no GPU cause.
    fake.on("GET", "/api/v1/namespaces/team-a/pods/train-1/log",
            gpuctl::testing::FakeAnswer{200, "KeyError: 'lr'\n", {{"content-type", "text/plain"}}});
    auto r = ops::wait_for_job(*fc.client, "team-a", "train", options);
    REQUIRE(r);
    CHECK(fake.unexpected().empty());
    int log_reads = 0;
    for (const auto& req : fake.requests()) log_reads += req.url.find("/pods/train-1/log?") != std::string::npos;
    CHECK(log_reads == 1);
    CHECK(r->phase == ops::JobPhase::failed);
    CHECK(r->finished);
    REQUIRE(r->failure);
    CHECK(r->failure->exit_code == 3);
    // Called on the first summary and on changes only (the second Running poll is no change).
    CHECK(seen == std::vector<std::string>{"Pending|the Job controller has not started it yet", "Running|",
                                           "Failed|Job has reached the specified backoff limit: container main of pod "
                                           "train-1 exited with code 3 (Error)"});
    CHECK(sleeps.size() == 4);
    // The pods are selected by the Job's own selector.
    bool selected = false;
    for (const auto& req : fake.requests()) {
      selected = selected ||
                 req.url.find("labelSelector=batch.kubernetes.io%2Fcontroller-uid%3Duid-train") != std::string::npos;
    }
    CHECK(selected);
  }
  SECTION("Errc::timeout when the timeout passes first") {
    options.timeout = std::chrono::milliseconds(1200);
    for (int i = 0; i < 4; ++i) {
      fake.on("GET", job_path, json_answer(200, running.dump()));
      fake.on("GET", "/api/v1/namespaces/team-a/pods",
              json_answer(200, list({job_pod("train-1", "Running", "gpu-1")})));
      fake.on("GET", "/api/v1/namespaces/team-a/events", json_answer(200, list({})));
    }
    auto r = ops::wait_for_job(*fc.client, "team-a", "train", options);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::timeout);
    CHECK(r.error().message.starts_with("job team-a/train is still Running after 1s"));
    CHECK(sleeps == std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(500),
                                                           std::chrono::milliseconds(500),
                                                           std::chrono::milliseconds(200)});
  }
  SECTION("NotFound, with a clear message, when the job is deleted meanwhile") {
    fake.on("GET", job_path, json_answer(200, running.dump()));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({})));
    fake.on("GET", "/api/v1/namespaces/team-a/events", json_answer(200, list({})));
    fake.on(
        "GET", job_path,
        json_answer(
            404,
            R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"jobs.batch \"train\" not found","reason":"NotFound","code":404})"));
    auto r = ops::wait_for_job(*fc.client, "team-a", "train", options);
    REQUIRE_FALSE(r);
    CHECK(r.error().is_not_found());
    CHECK(r.error().message == "job team-a/train was deleted while waiting for it to finish (last seen Running)");
  }
  SECTION("NotFound at the start names the job") {
    fake.on(
        "GET", job_path,
        json_answer(
            404,
            R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"jobs.batch \"train\" not found","reason":"NotFound","code":404})"));
    auto r = ops::wait_for_job(*fc.client, "team-a", "train", options);
    REQUIRE_FALSE(r);
    CHECK(r.error().is_not_found());
    CHECK(r.error().message == "job \"train\" not found in namespace \"team-a\"");
  }
  SECTION("cancelled between polls") {
    fake.on("GET", job_path, json_answer(200, running.dump()));
    fake.on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list({})));
    fake.on("GET", "/api/v1/namespaces/team-a/events", json_answer(200, list({})));
    options.cancelled = [] { return true; };
    auto r = ops::wait_for_job(*fc.client, "team-a", "train", options);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::cancelled);
    CHECK(sleeps.empty());
  }
}

TEST_CASE("ops::parse_scheduling_message reads the 1.36 scheduler's message with text before preemption",
          "[job-status]") {
  // Recorded from kube-scheduler v1.36.3 in the e2e cluster (a pod asking for 64 GPUs).
  auto v = gpuctl::ops::parse_scheduling_message(
      "0/248 nodes are available: 1 node(s) were unschedulable, 247 Insufficient nvidia.com/gpu. no new claims to "
      "deallocate, preemption: 0/248 nodes are available: 248 Preemption is not helpful for scheduling.");
  REQUIRE(v);
  CHECK(v->total == 248);
  REQUIRE(v->reasons.size() == 2);
  CHECK(v->reasons[1].nodes == 247);
  CHECK(v->reasons[1].reason == "Insufficient nvidia.com/gpu");
  CHECK(v->preemption.starts_with("0/248"));
  CHECK(gpuctl::ops::explain_scheduling(*v) ==
        "no node can take it now (248 nodes): 1 is cordoned (unschedulable), 247 have too few free nvidia.com/gpu; "
        "preempting lower-priority pods would not help");
}
