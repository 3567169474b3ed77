// Ctrl-C during a drain and a rolling maintenance (util/cancel.hpp): nothing new is sent, the
// node stays cordoned, the unfinished nodes say interrupted, and an --exec child is stopped.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/util/cancel.hpp"
#include "test_drain_support.hpp"
#include "test_kubeconfig_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::nodeadmin;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using namespace std::chrono_literals;

namespace {

struct CancelGuard {
  CancelGuard() { util::reset_cancel_for_tests(); }
  ~CancelGuard() { util::reset_cancel_for_tests(); }
};

const std::string kOnN1 = "fieldSelector=spec.nodeName%3Dn1";

}  // namespace

TEST_CASE("drain interrupted between evictions: the node stays cordoned, nothing more is sent", "[drain][cancel]") {
  CancelGuard guard;
  FakeClient c;
  auto& fake = *c.fake;
  fake.on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()));
  fake.on("GET", "/api/v1", json_answer(200, discovery_with_eviction()));
  json w0 = PodBuilder("train", "w0").owned_by("StatefulSet", "ddp").labels({{"app", "ddp"}});
  json w1 = PodBuilder("train", "w1").owned_by("StatefulSet", "ddp").labels({{"app", "ddp"}});
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({w0, w1}, "10")), kOnN1);
  fake.on("POST", "/api/v1/namespaces/train/pods/w0/eviction",
          json_answer(201, R"({"kind":"Status","status":"Success","code":201})"));

  ops::DrainOptions o;
  o.sleep = [](std::chrono::milliseconds) {};
  std::size_t requests_at_cancel = 0;
  // Ctrl-C lands just after the first eviction was accepted.
  o.on_progress = [&](const ops::DrainProgress& p) {
    if (p.message != "evicted train/w0") return;
    requests_at_cancel = fake.requests().size();
    util::request_cancel(SIGINT);
  };
  auto r = ops::drain_node(*c.client, node("n1"), o);
  CHECK(r.outcome == ops::DrainOutcome::interrupted);
  CHECK(ops::to_string(r.outcome) == "interrupted");
  CHECK(r.cordon == "cordoned");
  CHECK(r.remaining == std::vector<std::string>{"train/w0", "train/w1"});
  CHECK(r.message == "interrupted by SIGINT with 2 pod(s) still on the node; it stays cordoned (re-run to continue)");
  // Nothing after the signal: no second eviction, no list or watch, no uncordon.
  REQUIRE(requests_at_cancel > 0);
  CHECK(fake.requests().size() == requests_at_cancel);
  CHECK(fake.count("PATCH") == 1);
  CHECK(fake.count("POST") == 1);
  CHECK(fake.unexpected().empty());
}

TEST_CASE("drain interrupted before it starts: every node is not started, no request is sent", "[drain][cancel]") {
  CancelGuard guard;
  FakeClient c;
  util::request_cancel(SIGTERM);
  ops::DrainOptions o;
  for (int parallel : {1, 3}) {
    auto results = ops::drain_nodes(*c.client, {node("n1"), node("n2"), node("n3")}, o, parallel);
    REQUIRE(results.size() == 3);
    for (const auto& r : results) {
      CHECK(r.outcome == ops::DrainOutcome::interrupted);
      CHECK(r.cordon == "-");
      CHECK(r.message == "not started: interrupted by SIGTERM (re-run to drain it)");
    }
    CHECK(results[1].node == "n2");
  }
  CHECK(c.fake->requests().empty());
}

TEST_CASE("rolling interrupted during --exec: the command is stopped, the node stays cordoned, the rest wait",
          "[drain][cancel]") {
  CancelGuard guard;
  gpuctl_test::TempDir dir;
  const auto pid_file = dir.path() / "pid";
  FakeClient c;
  auto& fake = *c.fake;
  fake.on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2", json::array(), true).dump()));
  fake.on("GET", "/api/v1/pods", json_answer(200, list_of({})), kOnN1);
  ops::RollingOptions o;
  o.drain.sleep = [](std::chrono::milliseconds) {};
  o.exec = "echo $$ > " + pid_file.string() + "; exec sleep 100";
  o.uncordon = true;
  o.wait_ready = 10s;
  std::thread canceller([&] {
    for (int i = 0; i < 3000 && !std::filesystem::exists(pid_file); i++) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(100ms);
    util::request_cancel(SIGINT);
  });
  auto results = ops::rolling_maintenance(*c.client, {node("n1"), node("n2")}, o);
  canceller.join();
  REQUIRE(results.size() == 2);
  CHECK_FALSE(results[0].ok);
  CHECK(results[0].interrupted);
  CHECK(results[0].exec == "interrupted");
  CHECK(results[0].ready.empty());
  CHECK(results[0].uncordon.empty());
  CHECK(results[0].drain.message ==
        "interrupted by SIGINT during the maintenance command (it was stopped); the node stays cordoned (re-run to "
        "continue)");
  CHECK(results[1].not_started);
  CHECK(fake.count("PATCH") == 1);  // the cordon; no uncordon
  CHECK(fake.unexpected().empty());
  std::ifstream in(pid_file);
  long pid = 0;
  in >> pid;
  REQUIRE(pid > 0);
  // The command led its own group: stopped and reaped, nothing of it is left.
  CHECK((::kill(static_cast<pid_t>(-pid), 0) == -1 && errno == ESRCH));
}
