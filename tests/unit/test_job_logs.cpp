// JobLogFollower (gpuctl submit --follow): every started pod once, oldest first, the container
// named main, and log failures as notices rather than errors.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/jobs/job_logs.hpp"

using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

json pod(const std::string& name, const std::string& uid, const std::string& phase, const std::string& created) {
  return {{"metadata", {{"name", name}, {"uid", uid}, {"creationTimestamp", created}}},
          {"spec", {{"nodeName", "gpu-1"}, {"containers", json::array({{{"name", "sidecar"}}, {{"name", "main"}}})}}},
          {"status", {{"phase", phase}}}};
}

std::string pod_list(std::vector<json> items) {
  return json{{"kind", "PodList"}, {"metadata", json::object()}, {"items", items}}.dump();
}

}  // namespace

TEST_CASE("job logs: each started pod is streamed once, oldest first, and failures are notices", "[job-logs]") {
  FakeClient fc;
  const std::string pods = "/api/v1/namespaces/ml/pods";
  // First poll: the retry (newer) runs, the first attempt has failed; a third pod still pends.
  fc.fake
      ->on("GET", pods,
           json_answer(200, pod_list({pod("train-b", "u2", "Running", "2026-12-03T10:01:00Z"),
                                      pod("train-a", "u1", "Failed", "2026-12-03T10:00:00Z"),
                                      pod("train-c", "u3", "Pending", "2026-12-03T10:02:00Z")})))
      // Second poll: nothing new has started.
      .on("GET", pods,
          json_answer(200, pod_list({pod("train-b", "u2", "Succeeded", "2026-12-03T10:01:00Z"),
                                     pod("train-a", "u1", "Failed", "2026-12-03T10:00:00Z")})));
  fc.fake->on("GET", pods + "/train-a/log", json_answer(500, R"({"kind":"Status","status":"Failure",
      "message":"Get \"https://10.0.0.1:10250/containerLogs/ml/train-a/main\": dial tcp: connection refused","code":500})"));
  fc.fake->on("GET", pods + "/train-b/log", gpuctl::testing::FakeAnswer{200, "epoch 1\nepoch 2\n", {}, false});
  std::string logs;
  std::vector<std::string> notices;
  gpuctl::ops::JobLogOptions options;
  options.on_chunk = [&](std::string_view c) {
    logs += c;
    return true;
  };
  options.on_notice = [&](const std::string& n) { notices.push_back(n); };
  gpuctl::ops::JobLogFollower follower(*fc.client, "ml", "train", options);
  follower.poll();
  follower.poll();
  CHECK(follower.streamed() == 2);
  CHECK(logs == "epoch 1\nepoch 2\n");
  REQUIRE(notices.size() == 3);
  CHECK(notices[0] == "==> pod train-a on node gpu-1 <==");
  CHECK_THAT(notices[1], Catch::StartsWith("logs of pod train-a are not available: "));
  CHECK(notices[2] == "==> pod train-b on node gpu-1 <==");
  CHECK(fc.fake->unexpected().empty());
  bool followed_main = false;
  for (const auto& r : fc.fake->requests()) {
    if (r.url.find("/train-b/log") != std::string::npos) {
      followed_main =
          r.url.find("follow=true") != std::string::npos && r.url.find("container=main") != std::string::npos;
    }
  }
  CHECK(followed_main);
}
