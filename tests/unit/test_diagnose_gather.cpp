// diagnose's gathering pass through FakeTransport: each list once, a refused list skips only
// its checks, and what stops every list stops diagnose.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "diagnose_builders.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"

using gpuctl::testing::dx::list_of;
using nlohmann::json;
using namespace gpuctl::ops::diagnose;
using gpuctl::testing::json_answer;

namespace {

const char* kForbidden =
    R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,)"
    R"("message":"events is forbidden: User \"ops\" cannot list resource \"events\" in API group \"\" at the cluster scope"})";

}  // namespace

TEST_CASE("diagnose::gather reads each needed list once; a refused one is named, the rest are read", "[diagnose]") {
  gpuctl::testing::FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes",
              json_answer(200, list_of({{{"metadata", {{"name", "gpu-0"}}}, {"status", json::object()}}})),
              "labelSelector=pool%3Da");
  fc.fake->on("GET", "/api/v1/namespaces/ml/pods", json_answer(200, list_of(json::array())));
  fc.fake->on("GET", "/api/v1/namespaces/ml/events", json_answer(403, kForbidden));
  GatherOptions options{{Source::nodes, Source::pods, Source::events}, "pool=a", "ml", {}};
  auto snapshot = gather(*fc.client, options);
  REQUIRE(snapshot);
  CHECK(fc.fake->unexpected().empty());
  CHECK(fc.fake->requests().size() == 3);
  REQUIRE(snapshot->list(Source::nodes).size() == 1);
  CHECK(snapshot->list(Source::nodes)[0]["metadata"]["name"] == "gpu-0");
  CHECK(snapshot->lists.contains(Source::pods));
  CHECK_FALSE(snapshot->lists.contains(Source::events));
  REQUIRE(snapshot->unavailable.contains(Source::events));
  CHECK(snapshot->unavailable.at(Source::events).find("events is forbidden") != std::string::npos);
  CHECK(snapshot->list(Source::jobs).empty());  // never asked for
}

TEST_CASE("diagnose::gather stops when the cluster refuses the credentials", "[diagnose]") {
  gpuctl::testing::FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes",
              json_answer(401, R"({"kind":"Status","status":"Failure","reason":"Unauthorized","code":401,)"
                               R"("message":"Unauthorized"})"));
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, list_of(json::array())));
  auto snapshot = gather(*fc.client, {{Source::nodes, Source::pods}, "", "", {}});
  REQUIRE_FALSE(snapshot);
  CHECK(snapshot.error().is_unauthorized());
}

TEST_CASE("diagnose::needed_sources is the union of the selected checks' reads", "[diagnose]") {
  auto all = select_checks({});
  REQUIRE(all);
  CHECK(needed_sources(*all).size() == 16);  // every source: each check adds its own, each read once
  // A derived read brings what it is read from: plugin logs need the plugin's pods and DaemonSets.
  auto logs = select_checks({{"device-plugin-log-errors"}, {}});
  REQUIRE(logs);
  CHECK(needed_sources(*logs) ==
        std::set<Source>{Source::nodes, Source::daemon_sets, Source::plugin_pods, Source::plugin_logs});
  // Optional reads are read too (gpu-pods-pending names unbound claims when PVCs can be read).
  auto pending = select_checks({{"gpu-pods-pending"}, {}});
  REQUIRE(pending);
  CHECK(needed_sources(*pending) == std::set<Source>{Source::nodes, Source::pods, Source::events, Source::pvcs});
  auto network = select_checks({{"node-network-unavailable"}, {}});
  REQUIRE(network);
  CHECK(needed_sources(*network) == std::set<Source>{Source::nodes});
}
