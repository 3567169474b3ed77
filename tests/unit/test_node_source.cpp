// Where node data comes from (--via): the names, the ssh source over the fake runner, the
// GPUCTL_VIA default, and diagnose's node-side checks that metrics cannot answer, skipped with
// that reason instead of passing on nothing.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/fake_env.hpp"
#include "fakes/fake_ssh_runner.hpp"
#include "fakes/fixtures.hpp"
#include "fakes/probe_transcript.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"
#include "node_source_flags.hpp"

using namespace gpuctl;
using gpuctl::testing::env_of;
using nlohmann::json;

namespace {

json node_at(const std::string& name, const std::string& ip) {
  return {{"metadata", {{"name", name}}},
          {"status", {{"addresses", json::array({{{"type", "InternalIP"}, {"address", ip}}})}}}};
}

// A node whose driver does not load: every probe source would say driver_not_loaded.
std::string driver_not_loaded() {
  return testing::cat(testing::probe_start(),
                      testing::probe_step("all",
                                          testing::fixture("nvidia-smi-errors/"
                                                           "issue__nvidia-smi-failed-communicate-driver.txt"),
                                          "", 9),
                      testing::probe_done());
}

}  // namespace

TEST_CASE("node source: --via names ssh, pod and prometheus, and nothing else", "[node-source]") {
  for (ops::Via v : {ops::Via::ssh, ops::Via::pod, ops::Via::prometheus}) {
    auto parsed = ops::parse_via(ops::to_string(v));
    REQUIRE(parsed);
    CHECK(*parsed == v);
  }
  auto wrong = ops::parse_via("kubelet");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == Errc::invalid_argument);
  CHECK(wrong.error().message == "--via: \"kubelet\" is not a node source (use ssh, pod or prometheus)");
}

TEST_CASE("node source: the ssh source probes each node at its address, in order, with progress", "[node-source]") {
  testing::FakeSshRunner runner;
  runner.on("10.0.0.1", testing::remote_ran(driver_not_loaded()));
  ops::ProbeOptions probe;
  probe.fanout = 3;
  auto source = ops::make_ssh_source(runner, {}, probe);
  CHECK(source->via() == ops::Via::ssh);
  std::vector<std::size_t> done;
  auto read = source->read({node_at("gpu-a", "10.0.0.1"), node_at("gpu-b", "10.0.0.2")},
                           [&](std::size_t d, std::size_t) { done.push_back(d); });
  REQUIRE(read);
  REQUIRE(read->size() == 2);
  CHECK((*read)[0].node == "gpu-a");
  CHECK((*read)[0].via == "ssh");
  CHECK((*read)[0].outcome == "driver_not_loaded");
  CHECK((*read)[1].outcome == "unreachable");  // the fake's answer for an address it was not given
  REQUIRE(runner.calls().size() == 1);
  CHECK(runner.calls()[0].max_parallel == 3);
  CHECK(done.back() == 2);
}

TEST_CASE("node source: GPUCTL_VIA is the default of --via, the flag wins, a wrong value names the variable",
          "[node-source][cli]") {
  auto defaulted = cli::validate_node_source_flags(cli::NodeSourceFlags{}, env_of({}));
  REQUIRE(defaulted);
  CHECK(defaulted->via == ops::Via::ssh);

  auto from_env = cli::validate_node_source_flags(cli::NodeSourceFlags{}, env_of({{"GPUCTL_VIA", "pod"}}));
  REQUIRE(from_env);
  CHECK(from_env->via == ops::Via::pod);

  cli::NodeSourceFlags flags;
  flags.via = "ssh";
  auto flag_wins = cli::validate_node_source_flags(flags, env_of({{"GPUCTL_VIA", "pod"}}));
  REQUIRE(flag_wins);
  CHECK(flag_wins->via == ops::Via::ssh);

  auto wrong = cli::validate_node_source_flags(cli::NodeSourceFlags{}, env_of({{"GPUCTL_VIA", "smoke"}}));
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message == "GPUCTL_VIA=\"smoke\": not a node source (use ssh, pod or prometheus, or unset it)");
}

TEST_CASE("node source: from Prometheus, the checks metrics cannot answer are skipped by request, never passed",
          "[node-source][diagnose]") {
  namespace dx = ops::diagnose;
  dx::Snapshot s =
      testing::dx::snapshot({{dx::Source::nodes, {testing::dx::h100_node("gpu-0", 8, 8)}}, {dx::Source::pods, {}}});
  ops::NodeProbe probe;
  probe.node = "gpu-0";
  probe.outcome = "ok";
  probe.via = "prometheus";
  probe.report = gpu::NodeGpuReport{};
  probe.report->status = gpu::ProbeStatus::ok;
  s.probes.emplace("gpu-0", probe);
  std::vector<const dx::Check*> selected = {dx::find_check("driver-broken"), dx::find_check("nvlink-down"),
                                            dx::find_check("ecc-errors"), dx::find_check("xid-errors")};

  s.probes_via = "prometheus";
  dx::Report from_metrics = dx::run_checks(s, selected);
  REQUIRE(from_metrics.checks.size() == 4);
  for (std::size_t i : {0, 1}) {  // driver-broken, nvlink-down: they need nvidia-smi on the node
    CHECK(from_metrics.checks[i].status == dx::CheckStatus::skipped);
    CHECK(from_metrics.checks[i].by_request);
    CHECK(from_metrics.checks[i].skipped_because.find("--via prometheus") != std::string::npos);
  }
  for (std::size_t i : {2, 3}) CHECK(from_metrics.checks[i].status == dx::CheckStatus::pass);

  s.probes_via = "pod";  // the probe script itself: every check runs
  dx::Report from_probe = dx::run_checks(s, selected);
  for (const auto& c : from_probe.checks) CHECK(c.status != dx::CheckStatus::skipped);
}

TEST_CASE("node source: node-unreachable speaks the source's words: a probe pod that did not run, no or stale metrics",
          "[node-source][diagnose]") {
  namespace dx = ops::diagnose;
  dx::Snapshot s =
      testing::dx::snapshot({{dx::Source::nodes,
                              {testing::dx::h100_node("pod-0", 8, 8), testing::dx::h100_node("prom-0", 8, 8),
                               testing::dx::h100_node("prom-1", 8, 8)}}});
  auto probe = [](std::string node, std::string via, std::string outcome, bool report) {
    ops::NodeProbe p;
    p.node = std::move(node);
    p.via = std::move(via);
    p.outcome = std::move(outcome);
    p.message = "why: " + p.outcome;
    if (report) p.report = gpu::NodeGpuReport{};
    return p;
  };
  s.probes.emplace("pod-0", probe("pod-0", "pod", "image_pull_failed", false));
  s.probes.emplace("prom-0", probe("prom-0", "prometheus", "no_exporter", false));
  s.probes.emplace("prom-1", probe("prom-1", "prometheus", "stale", true));  // numbers, but old
  auto found = dx::check_node_unreachable(s);
  REQUIRE(found.size() == 3);
  std::map<std::string, dx::Finding> by_node;
  for (auto& f : found) by_node[f.node] = f;
  CHECK(by_node["pod-0"].summary == "the probe pod on pod-0 did not run the probe (image_pull_failed)");
  CHECK(by_node["pod-0"].evidence.at(0).text == "why: image_pull_failed");
  CHECK(by_node["prom-0"].summary == "Prometheus has no DCGM exporter series for prom-0 (no_exporter)");
  CHECK(by_node["prom-0"].severity == dx::Severity::error);
  CHECK(by_node["prom-1"].severity == dx::Severity::warning);
  CHECK(by_node["prom-1"].summary.find("stale") != std::string::npos);
  for (const auto& f : found) CHECK(f.summary.find("ssh") == std::string::npos);
}
