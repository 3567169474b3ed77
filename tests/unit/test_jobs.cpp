// gpuctl jobs and gpuctl jobs clean: the pure list and clean plan, the delete loop over the fake
// transport, and the commands run in-process.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/jobs/jobs.hpp"

using namespace gpuctl;
using gpuctl::testing::CliHarness;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using json = nlohmann::json;

namespace {

util::TimePoint at(const char* text) { return *util::parse_rfc3339(text); }

json job(const std::string& ns, const std::string& name, const std::string& gpus) {
  json resources = gpus.empty() ? json{{"requests", {{"cpu", "1"}}}} : json{{"limits", {{"nvidia.com/gpu", gpus}}}};
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"creationTimestamp", "2026-12-02T10:00:00Z"}}},
          {"spec",
           {{"template", {{"spec", {{"containers", json::array({{{"name", "main"}, {"resources", resources}}})}}}}}}},
          {"status", json::object()}};
}

json finished(json j, const std::string& type, const std::string& time) {
  j["status"]["conditions"] = json::array({{{"type", type},
                                            {"status", "True"},
                                            {"reason", type == "Failed" ? "BackoffLimitExceeded" : ""},
                                            {"lastTransitionTime", time}}});
  j["status"]["startTime"] = "2026-12-02T10:00:01Z";
  if (type == "Complete") j["status"]["completionTime"] = time;
  return j;
}

json owned_pod(const std::string& name, const std::string& job_uid, const std::string& phase, const std::string& node) {
  return {
      {"metadata",
       {{"name", name},
        {"namespace", "team-a"},
        {"ownerReferences", json::array({{{"kind", "Job"}, {"controller", true}, {"uid", job_uid}, {"name", "x"}}})}}},
      {"spec", {{"nodeName", node}}},
      {"status", {{"phase", phase}}}};
}

std::string list_body(std::vector<json> items) {
  return json{{"kind", "List"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", std::move(items)}}.dump();
}

}  // namespace

TEST_CASE("ops::build_job_list keeps GPU jobs and gives each its own pods", "[jobs]") {
  const auto now = at("2026-12-02T11:00:00Z");
  std::vector<json> jobs = {job("team-a", "train", "2"), job("team-a", "etl", ""), job("team-a", "eval", "1")};
  jobs[0]["status"] = {{"active", 1}, {"ready", 1}, {"startTime", "2026-12-02T10:00:01Z"}};
  std::vector<json> pods = {owned_pod("train-x", "uid-train", "Running", "gpu-1"),
                            owned_pod("eval-y", "uid-eval", "Pending", ""),
                            owned_pod("etl-z", "uid-etl", "Running", "cpu-1")};
  auto list = ops::build_job_list(jobs, pods, {}, false, now);
  REQUIRE(list.jobs.size() == 2);
  CHECK(list.jobs[0].name == "eval");  // sorted
  CHECK(list.jobs[0].phase == ops::JobPhase::pending);
  CHECK(list.jobs[0].nodes.empty());
  CHECK(list.jobs[1].name == "train");
  CHECK(list.jobs[1].phase == ops::JobPhase::running);
  CHECK(list.jobs[1].nodes == std::vector<std::string>{"gpu-1"});
  CHECK(ops::build_job_list(jobs, pods, {}, true, now).jobs.size() == 3);

  auto doc = ops::to_json(list);
  CHECK(doc["apiVersion"] == "gpuctl.io/v1alpha1");
  CHECK(doc["kind"] == "GPUJobList");
  CHECK(doc["items"].size() == 2);
  CHECK(doc["items"][1]["nodes"] == json::array({"gpu-1"}));
}

TEST_CASE("ops::build_job_list reads jobs, pods and events that are not objects without throwing", "[jobs]") {
  // fuzz_api_objects' crash-4bd5...: json::value() on a number threw type_error.306.
  const auto now = at("2026-12-02T11:00:00Z");
  std::vector<json> objects = {json(0), json("x"), json::array({1}), json(nullptr)};
  ops::JobList list;
  REQUIRE_NOTHROW(list = ops::build_job_list(objects, objects, objects, true, now));
  CHECK(list.jobs.size() == objects.size());
  CHECK_NOTHROW(ops::to_json(list).dump());
}

TEST_CASE("ops::clean_verdict removes finished jobs older than --older-than only", "[jobs]") {
  const auto now = at("2026-12-02T12:00:00Z");
  using std::chrono::hours;
  using std::chrono::milliseconds;
  auto done = finished(job("team-a", "a", "1"), "Complete", "2026-12-02T10:00:00Z");
  auto v = ops::clean_verdict(done, milliseconds(0), now);
  CHECK(v.remove);
  CHECK(v.phase == "Succeeded");
  CHECK(v.reason == "Succeeded 120m ago");
  v = ops::clean_verdict(done, std::chrono::duration_cast<milliseconds>(hours(3)), now);
  CHECK_FALSE(v.remove);
  CHECK(v.reason == "Succeeded 120m ago, not older than 3h");
  CHECK(ops::clean_verdict(done, std::chrono::duration_cast<milliseconds>(hours(1)), now).remove);

  auto failed = finished(job("team-a", "b", "1"), "Failed", "2026-12-02T11:55:00Z");
  v = ops::clean_verdict(failed, milliseconds(0), now);
  CHECK(v.remove);
  CHECK(v.reason == "Failed 5m ago");

  auto running = job("team-a", "c", "1");
  running["status"] = {{"active", 1}, {"ready", 1}};
  v = ops::clean_verdict(running, milliseconds(0), now);
  CHECK_FALSE(v.remove);
  CHECK(v.reason == "not finished (Running)");
  // FailureTarget alone: its pods are still being terminated, so the job is not finished yet.
  auto failing = running;
  failing["status"]["conditions"] = json::array({{{"type", "FailureTarget"}, {"status", "True"}}});
  CHECK_FALSE(ops::clean_verdict(failing, milliseconds(0), now).remove);
}

TEST_CASE("ops::plan_job_clean and ops::delete_jobs: Background propagation, uid precondition, partial failure",
          "[jobs]") {
  const auto now = at("2026-12-02T12:00:00Z");
  std::vector<json> jobs = {finished(job("team-a", "b-done", "1"), "Complete", "2026-12-02T10:00:00Z"),
                            finished(job("team-a", "a-failed", "1"), "Failed", "2026-12-02T10:00:00Z"),
                            finished(job("team-a", "cpu-done", ""), "Complete", "2026-12-02T10:00:00Z"),
                            job("team-a", "pending", "8"),
                            finished(job("team-a", "gone", "1"), "Complete", "2026-12-02T10:00:00Z")};
  auto plan = ops::plan_job_clean(jobs, std::chrono::milliseconds(0), false, now);
  REQUIRE(plan.remove.size() == 3);
  CHECK(plan.remove[0].name == "a-failed");
  CHECK(plan.remove[1].name == "b-done");
  CHECK(plan.remove[2].name == "gone");
  REQUIRE(plan.keep.size() == 1);
  CHECK(plan.keep[0].name == "pending");
  CHECK(plan.keep[0].phase == "Pending");
  CHECK(ops::plan_job_clean(jobs, std::chrono::milliseconds(0), true, now).remove.size() == 4);

  CHECK(ops::job_delete_options(plan.remove[0]) == json{{"apiVersion", "v1"},
                                                        {"kind", "DeleteOptions"},
                                                        {"propagationPolicy", "Background"},
                                                        {"preconditions", {{"uid", "uid-a-failed"}}}});

  CHECK(ops::job_delete_options(plan.remove[0], true)["dryRun"] == json::array({"All"}));

  FakeClient fc;
  fc.fake->on(
      "DELETE", "/apis/batch/v1/namespaces/team-a/jobs/a-failed",
      json_answer(
          403,
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"jobs.batch \"a-failed\" is forbidden: User \"bob\" cannot delete resource \"jobs\"","reason":"Forbidden","code":403})"));
  fc.fake->on("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/b-done",
              json_answer(200, R"({"kind":"Job","apiVersion":"batch/v1"})"));
  fc.fake->on(
      "DELETE", "/apis/batch/v1/namespaces/team-a/jobs/gone",
      json_answer(
          404,
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"jobs.batch \"gone\" not found","reason":"NotFound","code":404})"));
  std::vector<std::string> done;
  auto result =
      ops::delete_jobs(*fc.client, plan.remove, {}, [&](const ops::CleanOutcome& o) { done.push_back(o.target.name); });
  CHECK(done == std::vector<std::string>{"a-failed", "b-done", "gone"});  // the failure did not stop the others
  CHECK(result.deleted == 1);
  CHECK(result.gone == 1);
  CHECK(result.failed == 1);
  CHECK(result.outcomes[0].error.starts_with("job team-a/a-failed: "));
  REQUIRE(fc.fake->requests().size() == 3);
  CHECK(json::parse(fc.fake->requests()[1].body)["propagationPolicy"] == "Background");
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("cli: gpuctl jobs lists GPU jobs as a table and as GPUJobList", "[jobs][cli]") {
  CliHarness h;
  json failed = finished(job("team-a", "train", "4"), "Failed", "2026-12-02T10:10:00Z");
  json pod = owned_pod("train-1", "uid-train", "Failed", "gpu-7");
  pod["status"]["containerStatuses"] =
      json::array({{{"name", "main"}, {"state", {{"terminated", {{"exitCode", 3}, {"reason", "Error"}}}}}}});
  auto serve = [&] {
    h.fake().on("GET", "/apis/batch/v1/namespaces/team-a/jobs",
                json_answer(200, list_body({failed, job("team-a", "etl", "")})));
    h.fake().on("GET", "/api/v1/namespaces/team-a/pods", json_answer(200, list_body({pod})));
    h.fake().on("GET", "/api/v1/namespaces/team-a/events", json_answer(200, list_body({})),
                "involvedObject.kind%3DJob");
    // No termination message: the cause is in the last lines of the failed container's log.
    h.fake().on("GET", "/api/v1/namespaces/team-a/pods/train-1/log",
                testing::FakeAnswer{200, "step 12\nRuntimeError: CUDA error: out of memory\n", {}},
                "container=main&tailLines=50");
  };
  serve();
  auto r = h.run({"jobs", "-n", "team-a"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.starts_with("NAME    STATUS   GPUS   NODES   AGE"));
  CHECK(r.out.find("train   Failed   4      gpu-7") != std::string::npos);
  CHECK(r.out.find("container main of pod train-1 exited with code 3 (Error); GPU cause: the job ran out of GPU "
                   "memory on node gpu-7 (lower the batch size or use a GPU with more memory); its log says: "
                   "RuntimeError: CUDA error: out of memory") != std::string::npos);
  CHECK(r.out.find("etl") == std::string::npos);

  serve();
  auto wide = h.run({"jobs", "-n", "team-a", "-o", "wide"});
  CHECK(wide.exit_code == 0);
  CHECK(wide.out.find(" gpu-7(cuda-oom) ") != std::string::npos);

  serve();
  auto j = h.run({"jobs", "-n", "team-a", "-o", "json"});
  REQUIRE(j.exit_code == 0);
  auto doc = json::parse(j.out);
  CHECK(doc["kind"] == "GPUJobList");
  REQUIRE(doc["items"].size() == 1);
  CHECK(doc["items"][0]["failure"]["exitCode"] == 3);
  CHECK(doc["items"][0]["status"] == "Failed");
  CHECK(doc["items"][0]["failure"]["gpuCause"]["source"] == "log");
  CHECK(doc["items"][0]["failedAttempts"][0]["node"] == "gpu-7");
  CHECK(doc["items"][0]["failedAttempts"][0]["gpuCause"]["id"] == "cuda-oom");
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: gpuctl jobs -A lists every namespace with a NAMESPACE column", "[jobs][cli]") {
  CliHarness h;
  h.fake().on("GET", "/apis/batch/v1/jobs", json_answer(200, list_body({job("team-b", "x", "1")})));
  h.fake().on("GET", "/api/v1/pods", json_answer(200, list_body({})));
  h.fake().on("GET", "/api/v1/events", json_answer(200, list_body({})));
  auto r = h.run({"jobs", "-A"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.starts_with("NAMESPACE   NAME   STATUS"));
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli: gpuctl jobs clean deletes finished jobs, dry runs delete nothing", "[jobs][cli]") {
  CliHarness h;
  std::vector<json> jobs = {finished(job("team-a", "done", "1"), "Complete", "2026-12-01T10:00:00Z"),
                            finished(job("team-a", "broken", "1"), "Failed", "2026-12-01T10:00:00Z"),
                            job("team-a", "waiting", "16")};
  SECTION("--dry-run sends no DELETE") {
    h.fake().on("GET", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(200, list_body(jobs)));
    auto r = h.run({"jobs", "clean", "-n", "team-a", "--dry-run"});
    CHECK(r.exit_code == 0);
    CHECK(h.fake().count("DELETE") == 0);
    CHECK(r.out.find("job team-a/broken would be deleted with its pods: Failed ") != std::string::npos);
    CHECK(r.out.find("job team-a/waiting kept: not finished (Pending)") != std::string::npos);
    CHECK(r.out.find("2 finished jobs would be deleted (dry run), 1 kept (not finished or too recent).") !=
          std::string::npos);
  }
  SECTION("--dry-run=server sends dryRun=All") {
    h.fake().on("GET", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(200, list_body(jobs)));
    h.fake().on("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/broken", json_answer(200, "{}"), "dryRun=All");
    h.fake().on("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/done", json_answer(200, "{}"), "dryRun=All");
    auto r = h.run({"jobs", "clean", "-n", "team-a", "--dry-run=server"});
    CHECK(r.exit_code == 0);
    CHECK(h.fake().unexpected().empty());
    // In the body too: the API server ignores DELETE query parameters when a body is sent.
    for (const auto& req : h.fake().requests()) {
      if (req.method == "DELETE") CHECK(json::parse(req.body)["dryRun"] == json::array({"All"}));
    }
    CHECK(r.out.find("2 finished jobs deleted (server dry run), 1 kept") != std::string::npos);
  }
  SECTION("a failed delete is named and makes the exit code 1") {
    h.fake().on("GET", "/apis/batch/v1/namespaces/team-a/jobs", json_answer(200, list_body(jobs)));
    h.fake().on(
        "DELETE", "/apis/batch/v1/namespaces/team-a/jobs/broken",
        json_answer(
            500,
            R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out","code":500})"));
    h.fake().on("DELETE", "/apis/batch/v1/namespaces/team-a/jobs/done", json_answer(200, "{}"));
    auto r = h.run({"jobs", "clean", "-n", "team-a"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("job team-a/done deleted with its pods: Succeeded ") != std::string::npos);
    CHECK(r.out.find("1 finished job deleted, 1 kept") != std::string::npos);
    CHECK(r.err.find("error: 1 job could not be deleted: team-a/broken") != std::string::npos);
    CHECK(h.fake().count("DELETE") == 2);
  }
  SECTION("--older-than is validated before anything is sent") {
    auto r = h.run({"jobs", "clean", "-n", "team-a", "--older-than", "soon"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.starts_with("error: --older-than: "));
    CHECK(h.fake().requests().empty());
  }
}
