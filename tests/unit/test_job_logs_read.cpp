// read_job_logs (gpuctl logs JOB) over recorded answers: every started pod oldest first, lines
// split and named with pod, index and container, the query built from the flags, --pod by index
// or name, a pod whose log cannot be read named and not a stop, and a job that does not exist.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/jobs/job_logs.hpp"

using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

const std::string kPods = "/api/v1/namespaces/ml/pods";
const std::string kJob = "/apis/batch/v1/namespaces/ml/jobs/train";

json pod(const std::string& name, const std::string& index, const std::string& phase, const std::string& created) {
  return {
      {"metadata",
       {{"name", name},
        {"uid", "uid-" + name},
        {"creationTimestamp", created},
        {"labels", {{"batch.kubernetes.io/job-name", "train"}, {"batch.kubernetes.io/job-completion-index", index}}}}},
      {"spec", {{"nodeName", "gpu-1"}, {"containers", json::array({{{"name", "sidecar"}}, {{"name", "main"}}})}}},
      {"status", {{"phase", phase}}}};
}

std::string list(std::vector<json> items) {
  return json{{"kind", "List"}, {"metadata", json::object()}, {"items", items}}.dump();
}

json job() {
  return {{"metadata", {{"name", "train"}, {"namespace", "ml"}}},
          {"spec", {{"selector", {{"matchLabels", {{"batch.kubernetes.io/job-name", "train"}}}}}}},
          {"status", {{"conditions", json::array({{{"type", "Complete"}, {"status", "True"}}})}, {"succeeded", 2}}}};
}

// The job, its pods (listed once to choose, once more for the summary) and the summary's events.
void serve(FakeClient& fc, const std::vector<json>& pods) {
  fc.fake->on("GET", kJob, json_answer(200, job().dump())).on("GET", kJob, json_answer(200, job().dump()));
  fc.fake->on("GET", kPods, json_answer(200, list(pods))).on("GET", kPods, json_answer(200, list(pods)));
  fc.fake->on("GET", "/api/v1/namespaces/ml/events", json_answer(200, list({})));
}

struct Collected {
  std::vector<std::string> lines;  // "pod index container: text"
  std::vector<std::string> notices;
};

gpuctl::ops::JobLogsRequest request(Collected& got) {
  gpuctl::ops::JobLogsRequest r;
  r.ns = "ml";
  r.job = "train";
  r.on_line = [&](const gpuctl::ops::JobLogLine& l) {
    got.lines.push_back(l.pod + " " + l.index + " " + l.container + ": " + std::string(l.text));
    return true;
  };
  r.on_notice = [&](const std::string& n) { got.notices.push_back(n); };
  return r;
}

}  // namespace

TEST_CASE("job logs read: every started pod oldest first, each line named, the last line without newline",
          "[job-logs]") {
  FakeClient fc;
  serve(fc, {pod("train-1-b", "1", "Running", "2026-12-03T10:01:00Z"),
             pod("train-0-a", "0", "Succeeded", "2026-12-03T10:00:00Z"),
             pod("train-0-c", "0", "Pending", "2026-12-03T10:02:00Z")});
  fc.fake->on("GET", kPods + "/train-0-a/log", gpuctl::testing::FakeAnswer{200, "epoch 1\nepoch 2\n", {}, false});
  fc.fake->on("GET", kPods + "/train-1-b/log", gpuctl::testing::FakeAnswer{200, "rank 1 up\nhalf a line", {}, false});
  Collected got;
  auto r = request(got);
  r.tail_lines = 5;
  r.since_seconds = 600;
  auto result = gpuctl::ops::read_job_logs(*fc.client, r);
  REQUIRE(result);
  CHECK(got.lines == std::vector<std::string>{"train-0-a 0 main: epoch 1", "train-0-a 0 main: epoch 2",
                                              "train-1-b 1 main: rank 1 up", "train-1-b 1 main: half a line"});
  CHECK(got.notices.empty());
  CHECK(result->pods_read == 2);
  CHECK(result->lost.empty());
  CHECK(result->job.finished);
  CHECK(fc.fake->unexpected().empty());
  bool queried = false;
  for (const auto& req : fc.fake->requests()) {
    if (req.url.find("/train-0-a/log?") == std::string::npos) continue;
    queried = req.url.find("container=main") != std::string::npos && req.url.find("tailLines=5") != std::string::npos &&
              req.url.find("sinceSeconds=600") != std::string::npos && req.url.find("follow") == std::string::npos;
  }
  CHECK(queried);
}

TEST_CASE("job logs read: --pod by completion index or name, a lost log named, a missing job", "[job-logs]") {
  SECTION("index 1, whose log cannot be read") {
    FakeClient fc;
    serve(fc, {pod("train-0-a", "0", "Succeeded", "2026-12-03T10:00:00Z"),
               pod("train-1-b", "1", "Failed", "2026-12-03T10:01:00Z")});
    fc.fake->on(
        "GET", kPods + "/train-1-b/log",
        json_answer(500, R"({"kind":"Status","status":"Failure","message":"dial tcp 10.0.0.1:10250: connection )"
                         R"(refused","code":500})"));
    Collected got;
    auto r = request(got);
    r.pod = "1";
    r.previous = true;
    auto result = gpuctl::ops::read_job_logs(*fc.client, r);
    REQUIRE(result);
    CHECK(got.lines.empty());
    CHECK(result->lost == std::vector<std::string>{"train-1-b"});
    REQUIRE(got.notices.size() == 1);
    CHECK_THAT(got.notices[0], Catch::StartsWith("logs of pod train-1-b are not available: "));
    CHECK(fc.fake->requests()[2].url.find("previous=true") != std::string::npos);
    CHECK(fc.fake->unexpected().empty());
  }
  SECTION("a name no pod has") {
    FakeClient fc;
    serve(fc, {pod("train-0-a", "0", "Succeeded", "2026-12-03T10:00:00Z")});
    Collected got;
    auto r = request(got);
    r.pod = "train-9";
    auto result = gpuctl::ops::read_job_logs(*fc.client, r);
    REQUIRE_FALSE(result);
    CHECK(result.error().code == gpuctl::Errc::invalid_argument);
    CHECK(result.error().message == "job ml/train has no started pod named \"train-9\"");
  }
  SECTION("a job that does not exist") {
    FakeClient fc;
    fc.fake->on("GET", kJob, json_answer(404, R"({"kind":"Status","reason":"NotFound","code":404})"));
    Collected got;
    auto result = gpuctl::ops::read_job_logs(*fc.client, request(got));
    REQUIRE_FALSE(result);
    CHECK(result.error().message == "job \"train\" not found in namespace \"ml\"");
  }
}
