// The client against hostile input: names that would change the path, control characters in
// credential headers, malformed list answers, endless pagination, credentials in messages.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/kube/config.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/transport.hpp"
#include "gpuctl/util/time.hpp"
#include "test_kubeconfig_support.hpp"

using Catch::Contains;
using gpuctl::Errc;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
namespace paths = gpuctl::kube::paths;

TEST_CASE("client: a path with an empty, dot or dot-dot segment is refused before any request", "[client][hostile]") {
  for (const char* ns : {"..", ".", ""}) {
    FakeClient fc;
    auto path = std::string("/apis/batch/v1/namespaces/") + ns + "/jobs";
    auto listed = fc.client->list(path);
    REQUIRE_FALSE(listed);
    CHECK(listed.error().code == Errc::invalid_argument);
    CHECK_THAT(listed.error().message, Contains("refusing to send GET"));
    auto removed = fc.client->remove(paths::job(ns, "x"));
    REQUIRE_FALSE(removed);
    CHECK(removed.error().code == Errc::invalid_argument);
    CHECK(fc.fake->requests().empty());
  }
  // Names from the server or flags go through the path builders: "/" is encoded, dots refused.
  FakeClient fc;
  CHECK(fc.client->get(paths::node("..")).error().code == Errc::invalid_argument);
  CHECK(fc.client->get(paths::node("")).error().code == Errc::invalid_argument);
  CHECK(fc.client->get(paths::node("a/b")).error().code == Errc::invalid_argument);
  CHECK(fc.client->get("/api/v1/nodes/%2e%2E").error().code == Errc::invalid_argument);
  CHECK(fc.fake->requests().empty());
}

TEST_CASE("paths: one validator for Kubernetes names", "[paths][hostile]") {
  CHECK(paths::dns_label_problem("team-a").empty());
  CHECK(paths::dns_label_problem("a").empty());
  CHECK_FALSE(paths::dns_label_problem("..").empty());
  CHECK_FALSE(paths::dns_label_problem("a.b").empty());
  CHECK_FALSE(paths::dns_label_problem("a/b").empty());
  CHECK_FALSE(paths::dns_label_problem("A").empty());
  CHECK_FALSE(paths::dns_label_problem("-a").empty());
  CHECK_FALSE(paths::dns_label_problem(std::string(64, 'a')).empty());
  CHECK(paths::dns_subdomain_problem("gpu-node-1.example.com").empty());
  // Kubernetes bounds a subdomain's length (253), not its dot-separated parts'.
  CHECK(paths::dns_subdomain_problem(std::string(70, 'a') + ".example.com").empty());
  CHECK_FALSE(paths::dns_subdomain_problem(std::string(254, 'a')).empty());
  CHECK_FALSE(paths::dns_subdomain_problem("a..b").empty());
  CHECK_FALSE(paths::dns_subdomain_problem("..").empty());
  CHECK(paths::unsafe_path_problem("/api/v1/namespaces/a/pods").empty());
  CHECK(paths::unsafe_path_problem("/api/v1/nodes/n%2Fx") == "has a segment with an encoded '/'");
  CHECK(paths::unsafe_path_problem("/api/v1//pods") == "has an empty segment (an empty name)");
  CHECK(paths::unsafe_path_problem("/api/v1/nodes/") == "has an empty segment (an empty name)");
}

TEST_CASE("kubeconfig: an invalid -n or context namespace is refused, the flag with exit 2", "[kubeconfig][hostile]") {
  gpuctl_test::TempDir dir;
  auto file = [&](const std::string& ns_line) {
    return dir.write(
        "k.yaml",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\n"
        "users:\n- name: u\n  user: {}\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n" +
            ns_line + "current-context: ctx\n");
  };
  for (const char* bad : {"..", ".", "a/b", "A", "a.b"}) {
    auto o = gpuctl_test::only_file(file(""));
    o.namespace_name = bad;
    auto r = gpuctl::kube::load_rest_config(o);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK_THAT(r.error().message,
               Contains("-n/--namespace: \"" + std::string(bad) + "\" is not a valid namespace name"));
  }
  auto o = gpuctl_test::only_file(file("    namespace: ../kube-system\n"));
  auto r = gpuctl::kube::load_rest_config(o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::config);
  CHECK_THAT(r.error().message,
             Contains("context \"ctx\": namespace \"../kube-system\" is not a valid namespace name"));
}

TEST_CASE("client: control characters in a token or impersonation value are refused, never sent", "[client][hostile]") {
  auto refused = [](gpuctl::kube::RestConfig config, const std::string& field) {
    FakeClient fc({}, std::move(config));
    auto r = fc.client->get("/api/v1/nodes/a");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::config);
    CHECK_THAT(r.error().message, Contains(field + " contains a control character"));
    CHECK_THAT(r.error().message, !Contains("system:masters"));
    CHECK(fc.fake->requests().empty());
  };
  auto c = gpuctl::testing::test_config();
  c.bearer_token = "tok\r\nImpersonate-Group: system:masters";
  refused(c, "token");
  c = gpuctl::testing::test_config();
  c.impersonate_user = "alice";
  c.impersonate_groups = {"dev\nImpersonate-Group: system:masters"};
  refused(c, "as-groups");
  c.impersonate_groups = {};
  c.impersonate_user = "alice\rX: system:masters";
  refused(c, "as (impersonated user)");
  c = gpuctl::testing::test_config();
  c.bearer_token.clear();
  c.username = "u";
  c.password = std::string("p\x01", 2);
  refused(c, "password");
  gpuctl_test::TempDir dir;
  c = gpuctl::testing::test_config();
  c.bearer_token.clear();
  c.token_file = dir.write("token", "abc\nImpersonate-Group: system:masters\n");
  refused(c, "tokenFile contents");
}

TEST_CASE("client: a list answer without an items array is an error, not an empty list", "[client][hostile]") {
  for (const char* body : {"", "null", "{}", "[]", R"({"items":{}})", R"({"items":null})", R"("x")", "42"}) {
    FakeClient fc;
    fc.fake->on("GET", "/api/v1/nodes", json_answer(200, body));
    auto r = fc.client->list("/api/v1/nodes");
    INFO(body);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::parse);
    CHECK_THAT(r.error().message, Contains("GET /api/v1/nodes"));
  }
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, R"({"items":[]})"));
  auto r = fc.client->list("/api/v1/nodes");
  REQUIRE(r);
  CHECK(r->items.empty());
}

TEST_CASE("client: a single-object GET answering a non-object is an error", "[client][hostile]") {
  for (const char* body : {"", "null", "[]", "\"x\"", "1"}) {
    FakeClient fc;
    fc.fake->on("GET", "/api/v1/nodes/a", json_answer(200, body));
    auto r = fc.client->get("/api/v1/nodes/a");
    INFO(body);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::parse);
    CHECK_THAT(r.error().message, Contains("GET /api/v1/nodes/a"));
  }
}

TEST_CASE("client: a continue token that repeats ends the list with an error", "[client][hostile]") {
  FakeClient fc;
  std::string page = R"({"metadata":{"continue":"same"},"items":[{"metadata":{"name":"a"}}]})";
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, page), "limit=");
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, page), "continue=same");
  auto r = fc.client->list("/api/v1/nodes");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::api);
  CHECK_THAT(r.error().message, Contains("the same continue token twice"));
  CHECK(fc.fake->requests().size() == 2);
}

TEST_CASE("client: a list's resourceVersion or continue token that is not a string reads as absent",
          "[client][hostile]") {
  // json::value() threw type_error.302 out of the library on these (issue 12, fuzz_api_objects).
  for (const char* metadata :
       {R"({"continue":7,"resourceVersion":8})", R"({"continue":{},"resourceVersion":[]})", "3"}) {
    FakeClient fc;
    fc.fake->on(
        "GET", "/api/v1/nodes",
        json_answer(200, std::string(R"({"metadata":)") + metadata + R"(,"items":[{"metadata":{"name":"a"}}]})"));
    INFO(metadata);
    auto r = fc.client->list("/api/v1/nodes");
    REQUIRE(r);
    CHECK(r->items.size() == 1);
    CHECK(r->resource_version.empty());
    CHECK(fc.fake->requests().size() == 1);
  }
}

TEST_CASE("client: whoami reads a SelfSubjectReview of any shape without throwing", "[client][hostile]") {
  for (const char* body :
       {R"({"status":{"userInfo":{"username":7}}})", R"({"status":"x"})", R"({"status":{"userInfo":[]}})"}) {
    FakeClient fc;
    fc.fake->on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_answer(201, body));
    INFO(body);
    auto r = fc.client->whoami();
    REQUIRE(r);
    CHECK(*r == "tester");  // the kubeconfig's user name, as when the server has no answer
  }
  FakeClient fc;
  fc.fake->on("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
              json_answer(201, R"({"status":{"userInfo":{"username":"alice"}}})"));
  auto r = fc.client->whoami();
  REQUIRE(r);
  CHECK(*r == "alice");
}

TEST_CASE("redact_url: userinfo in server and proxy URLs is never printed", "[client][hostile]") {
  using gpuctl::kube::redact_url;
  using gpuctl::kube::redact_urls_in;
  CHECK(redact_url("https://user:SECRETPW@k8s:6443/api?x=1") == "https://***@k8s:6443/api?x=1");
  CHECK(redact_url("http://proxy:3128") == "http://proxy:3128");
  CHECK(redact_url("https://k8s/api/v1/namespaces/a@b") == "https://k8s/api/v1/namespaces/a@b");
  CHECK(redact_urls_in("Failed to connect to http://u:pw@proxy:3128 (x), see https://a:b@c/d") ==
        "Failed to connect to http://***@proxy:3128 (x), see https://***@c/d");
  // The -v log line is built from the redacted URL.
  gpuctl::kube::ClientOptions options;
  std::string logged;
  options.on_request = [&](const gpuctl::kube::RequestLog& log) { logged = log.url; };
  auto config = gpuctl::testing::test_config();
  config.server = "https://user:SECRETPW@k8s.test:6443";
  FakeClient fc(options, config);
  fc.fake->on("GET", "/api/v1/nodes/a", json_answer(200, "{}"));
  (void)fc.client->get("/api/v1/nodes/a");
  CHECK(logged.find("SECRETPW") == std::string::npos);
  CHECK_THAT(logged, Contains("***@k8s.test"));
}

TEST_CASE("client: a Retry-After wait that would pass the request timeout is not started", "[client][hostile]") {
  gpuctl::kube::ClientOptions options;
  options.request_timeout = std::chrono::milliseconds(3000);
  std::vector<std::string> waits;
  options.on_wait = [&](std::string_view text) { waits.emplace_back(text); };
  FakeClient fc(options);
  fc.fake->on("GET", "/api/v1/nodes/a", json_answer(429, "{}", {{"retry-after", "60"}}));
  auto r = fc.client->get("/api/v1/nodes/a");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::timeout);
  CHECK_THAT(r.error().message, Contains("throttling"));
  CHECK(fc.sleeps.empty());
  CHECK(waits.empty());
  CHECK(fc.fake->requests().size() == 1);
}

TEST_CASE("client: each throttled wait of a second or more is said through on_wait", "[client][hostile]") {
  gpuctl::kube::ClientOptions options;
  std::vector<std::string> waits;
  options.on_wait = [&](std::string_view text) { waits.emplace_back(text); };
  FakeClient fc(options);
  fc.fake->on("GET", "/api/v1/nodes/a", json_answer(429, "{}", {{"retry-after", "5"}}))
      .on("GET", "/api/v1/nodes/a", json_answer(200, "{}"));
  REQUIRE(fc.client->get("/api/v1/nodes/a"));
  REQUIRE(waits.size() == 1);
  CHECK(waits[0] == "waiting 5s: the API server is throttling requests (429, Retry-After)");
}

TEST_CASE("parse_duration: Go's grammar, nothing more", "[time][hostile]") {
  using gpuctl::util::parse_duration;
  using namespace std::chrono_literals;
  CHECK(parse_duration("1h2m3.5s").value() == 3723500ms);
  CHECK(parse_duration("0").value() == 0ms);
  CHECK(parse_duration("500ms").value() == 500ms);
  CHECK(parse_duration(".5s").value() == 500ms);
  CHECK(parse_duration("1.s").value() == 1000ms);
  CHECK(parse_duration("1500us").value() == 1ms);
  for (const char* bad :
       {"1.2.3s", "1..2s", ".s", "s", "", "1", "5x", "1s junk", "-1s", "1e3s", "99999999999999999h", "1s-"}) {
    INFO(bad);
    auto r = parse_duration(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
  }
}
