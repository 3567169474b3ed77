#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/paths.hpp"

using gpuctl::Errc;
using gpuctl::testing::FakeAnswer;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using namespace std::chrono_literals;

namespace {
std::string node_list_page(const std::vector<std::string>& names, const std::string& cont,
                           const std::string& rv = "100") {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& n : names) items.push_back({{"metadata", {{"name", n}}}});
  return nlohmann::json{{"kind", "NodeList"},
                        {"apiVersion", "v1"},
                        {"metadata", {{"resourceVersion", rv}, {"continue", cont}}},
                        {"items", items}}
      .dump();
}
const char* kExpired = R"({"kind":"Status","apiVersion":"v1","metadata":{"continue":"fresh-token"},"status":"Failure",
  "message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
  "reason":"Expired","code":410})";
}  // namespace

TEST_CASE("kube::Client::list follows continue tokens until the last page", "[client]") {
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"a", "b"}, "t1")), "limit=2")
      .on("GET", "/api/v1/nodes", json_answer(200, node_list_page({}, "t2")),
          "continue=t1")  // empty page, still a token
      .on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"c"}, "", "105")), "continue=t2");
  gpuctl::kube::ListOptions options;
  options.limit = 2;
  options.label_selector = "gpu=true";
  auto result = fc.client->list("/api/v1/nodes", options);
  REQUIRE(result);
  REQUIRE(result->items.size() == 3);
  CHECK(result->items[2]["metadata"]["name"] == "c");
  CHECK(result->pages == 3);
  CHECK(result->resource_version == "105");
  REQUIRE(fc.fake->requests().size() == 3);
  // The selector travels with every page; resourceVersion never accompanies continue.
  for (const auto& r : fc.fake->requests()) CHECK(r.url.find("labelSelector=gpu%3Dtrue") != std::string::npos);
  CHECK(fc.fake->requests()[1].url.find("resourceVersion") == std::string::npos);
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("kube::Client::list restarts a consistent list after 410 Expired", "[client]") {
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"a"}, "old")), "limit=500")
      .on("GET", "/api/v1/nodes", json_answer(410, kExpired), "continue=old")
      // the restart: first page again, then the end
      .on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"a"}, "new")), "limit=500")
      .on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"b"}, "")), "continue=new");
  auto result = fc.client->list("/api/v1/nodes");
  REQUIRE(result);
  CHECK(result->restarts == 1);
  REQUIRE(result->items.size() == 2);  // not 3: the first attempt's items were dropped
  CHECK(result->items[0]["metadata"]["name"] == "a");
  CHECK(result->items[1]["metadata"]["name"] == "b");
}

TEST_CASE("kube::Client::list can continue with the server's token when told to", "[client]") {
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"a"}, "old")), "limit=500")
      .on("GET", "/api/v1/nodes", json_answer(410, kExpired), "continue=old")
      .on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"b"}, "")), "continue=fresh-token");
  gpuctl::kube::ListOptions options;
  options.accept_inconsistent = true;
  auto result = fc.client->list("/api/v1/nodes", options);
  REQUIRE(result);
  CHECK(result->restarts == 0);
  CHECK(result->items.size() == 2);
}

TEST_CASE("kube::Client::list gives up when every restart expires again", "[client]") {
  FakeClient fc;
  for (int i = 0; i < 4; ++i) {
    fc.fake->on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"a"}, "t")), "limit=500")
        .on("GET", "/api/v1/nodes", json_answer(410, kExpired), "continue=t");
  }
  auto result = fc.client->list("/api/v1/nodes");
  REQUIRE_FALSE(result);
  CHECK(result.error().http_status == 410);
  CHECK(result.error().message.find("expired 4 times") != std::string::npos);
}

TEST_CASE("kube::Client::list reads from the watch cache only on the first page", "[client]") {
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/pods", json_answer(200, node_list_page({"p"}, "t")), "resourceVersion=0")
      .on("GET", "/api/v1/pods", json_answer(200, node_list_page({"q"}, "")), "continue=t");
  gpuctl::kube::ListOptions options;
  options.from_cache = true;
  auto result = fc.client->list("/api/v1/pods", options);
  REQUIRE(result);
  CHECK(result->items.size() == 2);
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("kube::Client honours Retry-After on 429 and 5xx", "[client]") {
  FakeClient fc;
  fc.fake
      ->on("GET", "/api/v1/nodes",
           FakeAnswer{429,
                      "Too many requests, please try again later.\n",
                      {{"retry-after", "3"}, {"content-type", "text/plain"}}})
      .on("GET", "/api/v1/nodes", FakeAnswer{503, "", {{"retry-after", "1"}}})
      .on("GET", "/api/v1/nodes", json_answer(200, node_list_page({"a"}, "")));
  auto result = fc.client->get("/api/v1/nodes");
  REQUIRE(result);
  REQUIRE(fc.sleeps.size() == 2);
  CHECK(fc.sleeps[0] == 3s);
  CHECK(fc.sleeps[1] == 1s);
}

TEST_CASE("kube::Client does not retry a 429 without Retry-After (PDB evictions loop themselves)", "[client]") {
  FakeClient fc;
  fc.fake->on(
      "POST", "/api/v1/namespaces/train/pods/p/eviction",
      json_answer(
          429,
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget ddp-pdb needs 4 healthy pods and has 4 currently"}]},"code":429})"));
  auto result = fc.client->create("/api/v1/namespaces/train/pods/p/eviction", {{"kind", "Eviction"}});
  REQUIRE_FALSE(result);
  CHECK(result.error().is_too_many_requests());
  CHECK(result.error().reason == "TooManyRequests");
  REQUIRE(result.error().causes.size() == 1);
  CHECK(result.error().causes[0].type == "DisruptionBudget");
  CHECK(result.error().message == "Cannot evict pod as it would violate the pod's disruption budget.");
  CHECK(fc.sleeps.empty());
  CHECK(fc.fake->count("POST") == 1);
}

TEST_CASE("kube::Client retries GETs after transport errors with capped backoff, never writes", "[client]") {
  gpuctl::kube::ClientOptions options;
  options.backoff_base = 100ms;
  options.backoff_cap = 400ms;
  FakeClient fc(options);
  FakeAnswer reset;
  reset.transport_error = true;
  fc.fake->on("GET", "/api/v1/nodes/a", reset)
      .on("GET", "/api/v1/nodes/a", reset)
      .on("GET", "/api/v1/nodes/a", reset)
      .on("GET", "/api/v1/nodes/a", json_answer(200, R"({"metadata":{"name":"a"}})"));
  auto got = fc.client->get("/api/v1/nodes/a");
  REQUIRE(got);
  REQUIRE(fc.sleeps.size() == 3);
  for (auto s : fc.sleeps) {
    CHECK(s >= 50ms);
    CHECK(s <= 400ms);
  }

  fc.fake->on("PATCH", "/api/v1/nodes/a", reset);
  auto patched =
      fc.client->patch("/api/v1/nodes/a", gpuctl::kube::PatchType::merge, {{"spec", {{"unschedulable", true}}}});
  REQUIRE_FALSE(patched);
  CHECK(patched.error().code == Errc::transport);
  CHECK(fc.fake->count("PATCH") == 1);
}

TEST_CASE("kube::Client gives up on Retry-After after max_retries", "[client]") {
  gpuctl::kube::ClientOptions options;
  options.max_retries = 2;
  FakeClient fc(options);
  for (int i = 0; i < 5; ++i) fc.fake->on("GET", "/api/v1/nodes", FakeAnswer{503, "", {{"retry-after", "1"}}});
  auto result = fc.client->get("/api/v1/nodes");
  REQUIRE_FALSE(result);
  CHECK(result.error().http_status == 503);
  CHECK(fc.fake->count("GET") == 3);
}

namespace {
gpuctl::kube::HttpResponse make_response(int status, gpuctl::kube::Headers headers, std::string body) {
  gpuctl::kube::HttpResponse r;
  r.status = status;
  r.headers = std::move(headers);
  r.body = std::move(body);
  return r;
}
}  // namespace

TEST_CASE("kube::decode_api_error turns Status bodies into clear errors", "[client]") {
  using gpuctl::kube::HttpResponse;
  SECTION("RBAC 403 names user, verb and resource and says what to do") {
    HttpResponse r = make_response(
        403, {{"content-type", "application/json"}},
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"nodes"},"code":403})");
    auto e = gpuctl::kube::decode_api_error(r, "GET", "https://x/api/v1/nodes?limit=500");
    CHECK(e.is_forbidden());
    CHECK(e.reason == "Forbidden");
    CHECK(e.message ==
          "forbidden: nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the "
          "cluster scope; "
          "ask a cluster admin for the RBAC permission (check with: kubectl auth can-i)");
  }
  SECTION("401") {
    HttpResponse r = make_response(
        401, {{"content-type", "application/json"}},
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})");
    auto e = gpuctl::kube::decode_api_error(r, "GET", "https://x/api/v1/nodes");
    CHECK(e.is_unauthorized());
    CHECK(e.message.starts_with("unauthorized: the API server rejected these credentials (Unauthorized)"));
  }
  SECTION("plain-text 429 from API Priority and Fairness") {
    HttpResponse r = make_response(429, {{"content-type", "text/plain; charset=utf-8"}, {"retry-after", "2"}},
                                   "Too many requests, please try again later.\n");
    auto e = gpuctl::kube::decode_api_error(r, "GET", "https://x/api/v1/pods");
    CHECK(e.retry_after_seconds == 2);
    CHECK(e.reason == "TooManyRequests");
    CHECK(e.message ==
          "the API server is throttling requests (Too many requests, please try again later.); it asked to retry after "
          "2s");
  }
  SECTION("plain-text 500") {
    HttpResponse r = make_response(500, {{"content-type", "text/plain"}},
                                   "Internal Server Error: \"/api/v1/nodes\": etcdserver: request timed out\n");
    auto e = gpuctl::kube::decode_api_error(r, "GET", "https://x/api/v1/nodes");
    CHECK(e.reason == "InternalError");
    CHECK(e.message == "Internal Server Error: \"/api/v1/nodes\": etcdserver: request timed out");
  }
  SECTION("422 keeps field causes") {
    HttpResponse r = make_response(
        422, {{"content-type", "application/json"}},
        R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Job.batch \"train\" is invalid: spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator","reason":"Invalid","details":{"name":"train","group":"batch","kind":"Job","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 0: must not be 0 for the In operator","field":"spec.podFailurePolicy.rules[0].onExitCodes.values[0]"}]},"code":422})");
    auto e = gpuctl::kube::decode_api_error(r, "POST", "https://x/apis/batch/v1/namespaces/a/jobs");
    CHECK(e.reason == "Invalid");
    REQUIRE(e.causes.size() == 1);
    CHECK(e.causes[0].field == "spec.podFailurePolicy.rules[0].onExitCodes.values[0]");
    CHECK(e.causes[0].type == "FieldValueInvalid");
  }
  SECTION("the real 403 quota body from the fixtures") {
    std::string body = gpuctl::testing::fixture("k8s-errors/quota__api-status-403-exceeded-quota.json");
    HttpResponse r = make_response(403, {{"content-type", "application/json"}}, body);
    auto e = gpuctl::kube::decode_api_error(r, "POST", "https://x/api/v1/namespaces/a/pods");
    CHECK(e.is_forbidden());
    CHECK(e.message.find("exceeded quota") != std::string::npos);
  }
}

TEST_CASE("kube::Client sends credentials and reports Warning headers", "[client]") {
  std::vector<std::string> warnings;
  gpuctl::kube::ClientOptions options;
  options.on_warning = [&](std::string_view w) { warnings.emplace_back(w); };
  FakeClient fc(options);
  fc.fake->on(
      "GET", "/api/v1/nodes/a",
      FakeAnswer{
          200, "{}", {{"content-type", "application/json"}, {"warning", R"(299 - "unknown field \"spec.foo\"")"}}});
  REQUIRE(fc.client->get("/api/v1/nodes/a"));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == R"(unknown field "spec.foo")");
  const auto& headers = fc.fake->requests().at(0).headers;
  CHECK(std::find(headers.begin(), headers.end(),
                  std::pair<std::string, std::string>("Authorization", "Bearer secret-token")) != headers.end());
}

TEST_CASE("kube::Client logs each request without credentials", "[client]") {
  std::vector<gpuctl::kube::RequestLog> logs;
  gpuctl::kube::ClientOptions options;
  options.on_request = [&](const gpuctl::kube::RequestLog& l) { logs.push_back(l); };
  FakeClient fc(options);
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, node_list_page({}, "")));
  REQUIRE(fc.client->get("/api/v1/nodes", gpuctl::kube::Query().add("limit", "5")));
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].method == "GET");
  CHECK(logs[0].url == "https://k8s.test:6443/api/v1/nodes?limit=5");
  CHECK(logs[0].status == 200);
  CHECK(logs[0].url.find("secret-token") == std::string::npos);
}

TEST_CASE("kube::Client::watch delivers events and returns 410 ERROR events as errors", "[client]") {
  FakeClient fc;
  std::string stream =
      R"({"type":"ADDED","object":{"metadata":{"name":"p1","uid":"u1"}}})"
      "\n"
      R"({"type":"DELETED","object":{"metadata":{"name":"p1","uid":"u1"}}})"
      "\n"
      R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}})js"
      "\n";
  fc.fake->on("GET", "/api/v1/namespaces/a/pods", json_answer(200, stream), "watch=1");
  std::vector<std::string> seen;
  auto result = fc.client->watch("/api/v1/namespaces/a/pods",
                                 {.label_selector = "",
                                  .field_selector = "spec.nodeName=n1",
                                  .resource_version = "5",
                                  .timeout_seconds = 30,
                                  .allow_bookmarks = true},
                                 [&](const gpuctl::kube::WatchEvent& e) {
                                   seen.push_back(e.type + ":" + e.object["metadata"]["name"].get<std::string>());
                                   return true;
                                 });
  CHECK(seen == std::vector<std::string>{"ADDED:p1", "DELETED:p1"});
  REQUIRE_FALSE(result);
  CHECK(result.error().is_gone());
  const auto& url = fc.fake->requests().at(0).url;
  CHECK(url.find("resourceVersion=5") != std::string::npos);
  CHECK(url.find("fieldSelector=spec.nodeName%3Dn1") != std::string::npos);
}

TEST_CASE("kube::paths percent-encodes names", "[client]") {
  CHECK(gpuctl::kube::paths::pod("ns", "a/../b") == "/api/v1/namespaces/ns/pods/a%2F..%2Fb");
  CHECK(gpuctl::kube::paths::job("team-a", "train") == "/apis/batch/v1/namespaces/team-a/jobs/train");
  CHECK(gpuctl::kube::paths::pods() == "/api/v1/pods");
}

TEST_CASE("kube::Client::remove puts dryRun into a DeleteOptions body, where the server reads it", "[client]") {
  // With a body the API server decodes DeleteOptions from the body alone: the query's dryRun=All
  // is ignored and the object really goes.
  FakeClient fc;
  fc.fake->on("DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", json_answer(200, R"({"kind":"Status"})"));
  gpuctl::kube::WriteOptions options;
  options.dry_run = true;
  auto result =
      fc.client->remove("/apis/batch/v1/namespaces/ns/jobs/j", {{"propagationPolicy", "Background"}}, options);
  REQUIRE(result);
  REQUIRE(fc.fake->requests().size() == 1);
  auto body = nlohmann::json::parse(fc.fake->requests()[0].body);
  CHECK(body["dryRun"] == nlohmann::json::array({"All"}));
  CHECK(body["propagationPolicy"] == "Background");
}
