// `--via pod` (issue 21) through the API seam: whole runs over recorded answers (create, one list
// per poll, the log, the delete) with real probe transcripts built from the nvidia-smi fixtures,
// the ways a pod never runs the probe, whole-source errors, the fanout, Ctrl-C, --cleanup. The
// builder, the status reading and the flags without I/O: test_probe_pod_build.cpp.
#include <catch2/catch.hpp>

#include <csignal>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fakes/probe_transcript.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/gpu/probe.hpp"
#include "gpuctl/ops/fleet/probe_pods.hpp"
#include "gpuctl/util/cancel.hpp"

using nlohmann::json;
using namespace gpuctl;
using namespace std::chrono_literals;
using testing::cat;
using testing::fixture;
using testing::json_answer;
using testing::probe_step;

namespace {

const std::string kPods = "/api/v1/namespaces/gpuctl-system/pods";

json node(const std::string& name, const std::string& ready = "True") {
  return {{"metadata", {{"name", name}}},
          {"status", {{"conditions", json::array({{{"type", "Ready"}, {"status", ready}}})}}}};
}

json pod(const std::string& name, const std::string& node_name, const std::string& phase, json container_state) {
  json p = {{"metadata", {{"name", name}, {"namespace", "gpuctl-system"}}},
            {"spec", {{"nodeName", node_name}}},
            {"status", {{"phase", phase}}}};
  if (!container_state.is_null())
    p["status"]["containerStatuses"] = json::array({{{"name", "probe"}, {"state", container_state}}});
  return p;
}
json succeeded(const std::string& name, const std::string& node_name, int code = 0) {
  return pod(name, node_name, code == 0 ? "Succeeded" : "Failed",
             {{"terminated", {{"exitCode", code}, {"reason", code == 0 ? "Completed" : "Error"}}}});
}
json running(const std::string& name, const std::string& node_name) {
  return pod(name, node_name, "Running", {{"running", {{"startedAt", "2026-12-07T10:00:00Z"}}}});
}
json waiting(const std::string& name, const std::string& node_name, const std::string& reason,
             const std::string& message) {
  return pod(name, node_name, "Pending", {{"waiting", {{"reason", reason}, {"message", message}}}});
}

std::string list_of(json items) { return json{{"metadata", {{"resourceVersion", "9"}}}, {"items", items}}.dump(); }
std::string created(const std::string& name) {
  return json{{"metadata", {{"name", name}, {"namespace", "gpuctl-system"}}}}.dump();
}
testing::FakeAnswer text_answer(std::string body) {
  return testing::FakeAnswer{200, std::move(body), {{"content-type", "text/plain"}}, false};
}
std::string status(int code, const std::string& reason, const std::string& message) {
  return testing::status_body(code, reason, message).dump();
}

// The two RTX 2070s of the telegraf capture, as an unprivileged probe pod prints them.
std::string healthy_transcript() {
  const std::string list =
      "GPU 0: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789ab)\n"
      "GPU 1: NVIDIA GeForce RTX 2070 (UUID: GPU-12345678-aaaa-bbbb-cccc-0123456789cd)\n";
  return cat(testing::probe_start(), testing::probe_control("kernel-source skipped"),
             testing::probe_control("clock 1796637600 5000.5"), testing::probe_control("nvswitches 0"),
             probe_step("all", fixture("nvidia-smi-xml/telegraf__2x-rtx-2070__590.44.01__v13.xml"), "", 0),
             probe_step("list", list, "", 0), testing::probe_done());
}

ops::PodProbeOptions options(int fanout = 4) {
  ops::PodProbeOptions o;
  o.fanout = fanout;
  o.poll_interval = 1ms;
  o.deadline = 10s;
  o.run_id = "r1";
  o.owner = "tester@box pid=1";
  return o;
}

// The requests as "METHOD path" (no query), in the order sent.
std::vector<std::string> sent(const testing::FakeTransport& fake) {
  std::vector<std::string> out;
  for (const auto& r : fake.requests()) out.push_back(r.method + " " + testing::FakeTransport::split(r.url).first);
  return out;
}

std::size_t count(const std::vector<std::string>& requests, const std::string& what) {
  return static_cast<std::size_t>(std::count(requests.begin(), requests.end(), what));
}

Result<std::vector<ops::NodeProbe>> read(testing::FakeClient& fc, const std::vector<json>& nodes,
                                         const ops::PodProbeOptions& o) {
  auto source = ops::make_pod_source(*fc.client, o);
  REQUIRE(source->via() == ops::Via::pod);
  return source->read(nodes, {});
}

}  // namespace

TEST_CASE("probe_pods: a healthy node read through create, one list, the log and the delete", "[probe_pods]") {
  testing::FakeClient fc;
  fc.fake->on("POST", kPods, json_answer(201, created("gpuctl-probe-aaaaa")));
  fc.fake->on("GET", kPods, json_answer(200, list_of({succeeded("gpuctl-probe-aaaaa", "gpu-a")})));
  fc.fake->on("GET", kPods + "/gpuctl-probe-aaaaa/log", text_answer(healthy_transcript()));
  fc.fake->on("DELETE", kPods + "/gpuctl-probe-aaaaa", json_answer(200, "{}"));
  auto probes = read(fc, {node("gpu-a")}, options());
  REQUIRE(probes);
  REQUIRE(probes->size() == 1);
  const ops::NodeProbe& p = (*probes)[0];
  CHECK(p.node == "gpu-a");
  CHECK(p.via == "pod");
  CHECK(p.outcome == "ok");
  CHECK(p.message.empty());
  CHECK(p.exit_code == 0);
  REQUIRE(p.report);
  CHECK(p.report->gpus.size() == 2);
  CHECK(p.report->facts.kernel_log_source == "skipped");
  CHECK_THAT(p.report->facts.kernel_log_error, Catch::Contains("--probe-privileged"));
  CHECK(fc.fake->unexpected().empty());
  CHECK(sent(*fc.fake) == std::vector<std::string>{"POST " + kPods, "GET " + kPods,
                                                   "GET " + kPods + "/gpuctl-probe-aaaaa/log",
                                                   "DELETE " + kPods + "/gpuctl-probe-aaaaa"});
  const auto& r = fc.fake->requests();
  json body = json::parse(r[0].body);
  CHECK(body["spec"]["nodeName"] == "gpu-a");
  CHECK_THAT(r[1].url, Catch::Contains("labelSelector=") && Catch::Contains("probe.gpuctl.io%2Frun%3Dr1"));
  CHECK_THAT(r[2].url, Catch::Contains("container=probe") && Catch::Contains("limitBytes=8388608"));
  CHECK(json::parse(r[3].body)["gracePeriodSeconds"] == 0);
}

TEST_CASE("probe_pods: pods that never run the probe are classified and deleted", "[probe_pods]") {
  testing::FakeClient fc;
  fc.fake->on("POST", kPods, json_answer(201, created("p-pull")));
  fc.fake->on("POST", kPods, json_answer(201, created("p-full")));
  json full = pod("p-full", "gpu-b", "Failed", nullptr);
  full["status"]["reason"] = "OutOfpods";
  full["status"]["message"] = "Node didn't have enough resource: pods, requested: 1, used: 110, capacity: 110";
  fc.fake->on("GET", kPods,
              json_answer(200, list_of({waiting("p-pull", "gpu-a", "ErrImagePull", "pull access denied"), full})));
  fc.fake->on("DELETE", kPods + "/p-pull", json_answer(200, "{}"));
  fc.fake->on("DELETE", kPods + "/p-full", json_answer(200, "{}"));
  // Both pods are made at once, so which node got which is not known: the outcomes are.
  auto probes = read(fc, {node("gpu-a"), node("gpu-b"), node("gpu-c", "Unknown")}, options(2));
  REQUIRE(probes);
  for (const auto& p : *probes) CHECK(p.via == "pod");
  std::set<std::string> outcomes;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& p = (*probes)[i];
    outcomes.insert(p.outcome);
    if (p.outcome == "image_pull_failed") CHECK_THAT(p.message, Catch::Contains("pull access denied"));
    if (p.outcome == "unschedulable") CHECK_THAT(p.message, Catch::Contains("full of pods"));
    CHECK_FALSE(p.report);
  }
  CHECK(outcomes == std::set<std::string>{"image_pull_failed", "unschedulable"});
  CHECK((*probes)[2].outcome == "unschedulable");  // NotReady: no pod made at all
  CHECK_THAT((*probes)[2].message, Catch::Contains("Unknown"));
  CHECK(fc.fake->count("POST") == 2);
  CHECK(fc.fake->count("DELETE") == 2);
  CHECK(fc.fake->count("GET") == 1);  // no log read for a pod that never ran
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("probe_pods: a probe still running at the deadline is timed_out with what it printed", "[probe_pods]") {
  testing::FakeClient fc;
  ops::PodProbeOptions o = options();
  o.deadline = 1ms;
  o.poll_interval = 20ms;  // the first poll comes after the deadline
  fc.fake->on("POST", kPods, json_answer(201, created("p-hang")));
  fc.fake->on("GET", kPods, json_answer(200, list_of({running("p-hang", "gpu-a")})));
  const std::string partial = cat(testing::probe_start(), testing::probe_control("kernel-source skipped"),
                                  testing::probe_marker(), "begin all\n");
  fc.fake->on("GET", kPods + "/p-hang/log", text_answer(partial));
  fc.fake->on("DELETE", kPods + "/p-hang", json_answer(200, "{}"));
  auto probes = read(fc, {node("gpu-a")}, o);
  REQUIRE(probes);
  const auto& p = (*probes)[0];
  CHECK(p.outcome == "timed_out");
  CHECK_THAT(p.message, Catch::Contains("still running") && Catch::Contains("p-hang"));
  REQUIRE(p.report);  // the probe had started: what it printed is kept
  CHECK(p.report->truncated);
  CHECK(fc.fake->count("DELETE") == 1);
  CHECK(fc.fake->unexpected().empty());

  SECTION("still Pending at the deadline: not_started, with what it waits for") {
    testing::FakeClient fc2;
    fc2.fake->on("POST", kPods, json_answer(201, created("p-wait")));
    fc2.fake->on("GET", kPods, json_answer(200, list_of({waiting("p-wait", "gpu-a", "ContainerCreating", "")})));
    fc2.fake->on("DELETE", kPods + "/p-wait", json_answer(200, "{}"));
    auto got = read(fc2, {node("gpu-a")}, o);
    REQUIRE(got);
    CHECK((*got)[0].outcome == "not_started");
    CHECK_THAT((*got)[0].message, Catch::Contains("ContainerCreating"));
    CHECK(fc2.fake->count("DELETE") == 1);
  }
}

TEST_CASE("probe_pods: a missing namespace or missing RBAC fails the whole read with the fix", "[probe_pods]") {
  testing::FakeClient fc;
  SECTION("namespace missing") {
    fc.fake->on("POST", kPods, json_answer(404, status(404, "NotFound", "namespaces \"gpuctl-system\" not found")));
    auto got = read(fc, {node("gpu-a")}, options(1));
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error().message,
               Catch::Contains("kubectl create namespace gpuctl-system") && Catch::Contains("--probe-namespace"));
    CHECK(fc.fake->count("DELETE") == 0);  // nothing was made
  }
  SECTION("create forbidden by RBAC") {
    fc.fake->on("POST", kPods,
                json_answer(403, status(403, "Forbidden",
                                        "pods is forbidden: User \"viewer\" cannot create resource \"pods\" in API "
                                        "group \"\" in the namespace \"gpuctl-system\"")));
    auto got = read(fc, {node("gpu-a")}, options(1));
    REQUIRE_FALSE(got);
    CHECK(got.error().is_forbidden());
    CHECK_THAT(got.error().message, Catch::Contains("create, get, list and delete on pods") &&
                                        Catch::Contains("pods/log") && Catch::Contains("gpuctl-system"));
  }
  SECTION("list forbidden after a pod was made: the pod is still deleted") {
    fc.fake->on("POST", kPods, json_answer(201, created("p-1")));
    fc.fake->on("GET", kPods,
                json_answer(403, status(403, "Forbidden",
                                        "pods is forbidden: User \"x\" cannot list resource \"pods\" in API group "
                                        "\"\" in the namespace \"gpuctl-system\"")));
    fc.fake->on("DELETE", kPods + "/p-1", json_answer(200, "{}"));
    auto got = read(fc, {node("gpu-a")}, options(1));
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error().message, Catch::Contains("may not list pods"));
    CHECK(fc.fake->count("DELETE") == 1);
  }
}

TEST_CASE("probe_pods: a pod refused by admission is that node's outcome, the others are probed", "[probe_pods]") {
  testing::FakeClient fc;
  fc.fake->on(
      "POST", kPods,
      json_answer(403, status(403, "Forbidden",
                              "pods \"gpuctl-probe-x\" is forbidden: violates PodSecurity \"restricted:latest\": "
                              "runAsNonRoot != true")));
  fc.fake->on("POST", kPods, json_answer(201, created("p-b")));
  fc.fake->on("GET", kPods, json_answer(200, list_of({succeeded("p-b", "gpu-b")})));
  fc.fake->on("GET", kPods + "/p-b/log", text_answer(healthy_transcript()));
  fc.fake->on("DELETE", kPods + "/p-b", json_answer(200, "{}"));
  auto probes = read(fc, {node("gpu-a"), node("gpu-b")}, options(1));
  REQUIRE(probes);
  CHECK((*probes)[0].outcome == "admission_refused");
  CHECK_THAT((*probes)[0].message, Catch::Contains("PodSecurity") && Catch::Contains("baseline"));
  CHECK((*probes)[1].outcome == "ok");
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("probe_pods: at most fanout pods in flight, the next created once one is done", "[probe_pods]") {
  testing::FakeClient fc;
  for (const char* name : {"p-1", "p-2", "p-3"}) {
    fc.fake->on("POST", kPods, json_answer(201, created(name)));
    fc.fake->on("GET", kPods + "/" + name + "/log", text_answer(healthy_transcript()));
    fc.fake->on("DELETE", kPods + "/" + name, json_answer(200, "{}"));
  }
  // First poll: p-1 done, p-2 still running; second: p-2 and p-3 done.
  fc.fake->on("GET", kPods, json_answer(200, list_of({succeeded("p-1", "x"), running("p-2", "x")})));
  fc.fake->on("GET", kPods, json_answer(200, list_of({succeeded("p-2", "x"), succeeded("p-3", "x")})));
  std::vector<std::size_t> progress;
  auto source = ops::make_pod_source(*fc.client, options(2));
  auto probes = source->read({node("a"), node("b"), node("c")}, [&](std::size_t done, std::size_t total) {
    CHECK(total == 3);
    progress.push_back(done);
  });
  REQUIRE(probes);
  for (const auto& p : *probes) CHECK(p.outcome == "ok");
  CHECK(progress == std::vector<std::size_t>{1, 2, 3});
  // The third create comes only after the first list: two in flight before it.
  std::vector<std::string> order = sent(*fc.fake);
  auto first_list = std::find(order.begin(), order.end(), "GET " + kPods);
  CHECK(std::count(order.begin(), first_list, "POST " + kPods) == 2);
  CHECK(count(order, "POST " + kPods) == 3);
  CHECK(count(order, "GET " + kPods) == 2);  // one list per poll, shared by the pods in flight
  CHECK(fc.fake->count("DELETE") == 3);
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("probe_pods: Ctrl-C stops creating and deletes every pod made", "[probe_pods]") {
  util::reset_cancel_for_tests();
  testing::FakeClient fc;
  ops::PodProbeOptions o = options(2);
  o.poll_interval = 5s;  // the run sleeps until the signal wakes it
  fc.fake->on("POST", kPods, json_answer(201, created("p-1")));
  fc.fake->on("POST", kPods, json_answer(201, created("p-2")));
  fc.fake->on("DELETE", kPods + "/p-1", json_answer(200, "{}"));
  fc.fake->on("DELETE", kPods + "/p-2", json_answer(200, "{}"));
  std::thread signal([] {
    std::this_thread::sleep_for(100ms);
    util::request_cancel(SIGINT);
  });
  auto probes = read(fc, {node("a"), node("b"), node("c")}, o);
  signal.join();
  util::reset_cancel_for_tests();
  REQUIRE(probes);
  for (const auto& p : *probes) {
    CHECK(p.outcome == "interrupted");
    CHECK_THAT(p.message, Catch::Contains("SIGINT"));
  }
  CHECK(fc.fake->count("POST") == 2);    // the third node never got a pod
  CHECK(fc.fake->count("DELETE") == 2);  // sent although gpuctl was interrupted
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("probe_pods: an image without sh is probe_failed with what the container said", "[probe_pods]") {
  testing::FakeClient fc;
  fc.fake->on("POST", kPods, json_answer(201, created("p-1")));
  fc.fake->on("GET", kPods, json_answer(200, list_of({succeeded("p-1", "a", 127)})));
  fc.fake->on("GET", kPods + "/p-1/log", text_answer("exec: \"sh\": executable file not found in $PATH\n"));
  fc.fake->on("DELETE", kPods + "/p-1", json_answer(200, "{}"));
  auto probes = read(fc, {node("a")}, options());
  REQUIRE(probes);
  CHECK((*probes)[0].outcome == "probe_failed");
  CHECK_THAT((*probes)[0].message, Catch::Contains("exit 127") && Catch::Contains("executable file not found"));
}

TEST_CASE("probe_pods: cleanup deletes every probe pod left in the namespace", "[probe_pods]") {
  testing::FakeClient fc;
  fc.fake->on("GET", kPods,
              json_answer(200, list_of({running("gpuctl-probe-old1", "a"), running("gpuctl-probe-old2", "b")})));
  fc.fake->on("DELETE", kPods + "/gpuctl-probe-old1", json_answer(200, "{}"));
  fc.fake->on("DELETE", kPods + "/gpuctl-probe-old2", json_answer(404, status(404, "NotFound", "gone")));
  auto deleted = ops::cleanup_probe_pods(*fc.client, "gpuctl-system");
  REQUIRE(deleted);
  CHECK(*deleted == std::vector<std::string>{"gpuctl-probe-old1"});
  CHECK_THAT(fc.fake->requests()[0].url,
             Catch::Contains("app.kubernetes.io%2Fname%3Dgpuctl-probe") && !Catch::Contains("probe.gpuctl.io%2Frun"));
}
