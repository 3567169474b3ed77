// Exec credential plugins, run for real: tests/data/kubeconfig/exec-plugin.sh answers as its
// PLUGIN_* environment variables say, and records what it was given.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/config.hpp"
#include "gpuctl/kube/exec_credential.hpp"
#include "test_kubeconfig_support.hpp"

using Catch::Contains;
using Catch::StartsWith;
using gpuctl::kube::ExecConfig;
using gpuctl::kube::ExecCredential;
using gpuctl::kube::ExecCredentialSource;
using gpuctl::kube::ExecEnvVar;
using gpuctl::kube::RestConfig;
using gpuctl_test::read_file;
using gpuctl_test::TempDir;
using gpuctl_test::test_data;
using std::chrono::system_clock;

namespace {
constexpr const char* kV1 = "client.authentication.k8s.io/v1";
constexpr const char* kV1beta1 = "client.authentication.k8s.io/v1beta1";
const std::string kOrigin = "kubeconfig /test/config, context \"ctx\"";

// A plugin workspace: the files the plugin writes, and the RestConfig that runs it.
struct Plugin {
  TempDir dir;
  std::string count_file = dir.str() + "/runs";
  std::string info_file = dir.str() + "/exec-info.json";
  std::string args_file = dir.str() + "/args";
  std::string env_file = dir.str() + "/env";
  std::string stdin_file = dir.str() + "/stdin";
  RestConfig config;

  explicit Plugin(const std::string& api_version = kV1, const std::string& mode = "Never") {
    config.server = "https://10.0.0.1:6443";
    config.context = "ctx";
    config.cluster = "c";
    config.user = "u";
    config.origin = kOrigin;
    ExecConfig exec;
    exec.api_version = api_version;
    exec.command = test_data("exec-plugin.sh");
    exec.interactive_mode = mode;
    exec.env = {{"PLUGIN_COUNT_FILE", count_file}, {"PLUGIN_INFO_FILE", info_file}};
    config.exec = exec;
  }
  void set(const std::string& name, const std::string& value) { config.exec->env.push_back(ExecEnvVar{name, value}); }
  int runs() const {
    std::string text = read_file(count_file);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  nlohmann::json info() const { return nlohmann::json::parse(read_file(info_file)); }
  std::string prefix() const { return kOrigin + ": user \"u\": getting credentials: "; }
};

std::string trim_copy(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

ExecCredential expect_credential(gpuctl::Result<ExecCredential> r) {
  if (!r) FAIL("exec credential failed: " << r.error().message);
  return *r;
}

gpuctl::Error expect_failure(gpuctl::Result<ExecCredential> r) {
  if (r) FAIL("expected an error, got token " << r->token);
  return r.error();
}

system_clock::time_point at(int year, unsigned month, unsigned day, int hours = 0, int minutes = 0, int seconds = 0) {
  return std::chrono::sys_days(std::chrono::year(year) / month / day) + std::chrono::hours(hours) +
         std::chrono::minutes(minutes) + std::chrono::seconds(seconds);
}

// A clock the test moves by hand.
struct ManualClock {
  std::shared_ptr<system_clock::time_point> now = std::make_shared<system_clock::time_point>(at(2030, 1, 1));
  ExecCredentialSource::Clock fn() const {
    auto p = now;
    return [p] { return *p; };
  }
};
}  // namespace

TEST_CASE("exec: a v1 plugin gets KUBERNETES_EXEC_INFO, args and env, and returns a token", "[exec]") {
  Plugin p;
  p.config.exec->args = {"get-token", "--name", "a b; echo no-shell"};
  p.set("PLUGIN_TOKEN", "v1-token");
  p.set("PLUGIN_ARGS_FILE", p.args_file);
  p.set("PLUGIN_ENV_FILE", p.env_file);
  p.set("PLUGIN_STDIN_FILE", p.stdin_file);
  p.set("PART1", "hello");
  ExecCredentialSource source(p.config, /*stdin_is_terminal=*/false);
  auto cred = expect_credential(source.get());
  CHECK(cred.token == "v1-token");
  CHECK(cred.client_cert_pem.empty());
  CHECK_FALSE(cred.expiration.has_value());

  CHECK(p.info() == nlohmann::json::parse(R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",
                                              "spec":{"interactive":false}})"));
  CHECK(read_file(p.args_file) == "get-token\n--name\na b; echo no-shell\n");
  CHECK_THAT(read_file(p.env_file), Contains("\nPART1=hello\n"));
  CHECK_THAT(read_file(p.env_file), Contains("\nPATH="));    // the parent environment is kept
  CHECK(trim_copy(read_file(p.stdin_file)) == "/dev/null");  // not interactive: no stdin
  CHECK(p.runs() == 1);
}

TEST_CASE("exec: a v1beta1 plugin returns a client certificate and key", "[exec]") {
  Plugin p(kV1beta1, "IfAvailable");
  const std::string cert = p.dir.write("cert.pem", gpuctl_test::kFakeCertPem);
  const std::string key = p.dir.write("key.pem", gpuctl_test::kFakeKeyPem);
  p.set("PLUGIN_CERT_FILE", cert);
  p.set("PLUGIN_KEY_FILE", key);
  ExecCredentialSource source(p.config, false);
  auto cred = expect_credential(source.get());
  CHECK(cred.token.empty());
  CHECK(cred.client_cert_pem == gpuctl_test::kFakeCertPem);
  CHECK(cred.client_key_pem == gpuctl_test::kFakeKeyPem);
  CHECK(p.info()["apiVersion"] == kV1beta1);
  CHECK(p.info()["spec"]["interactive"] == false);  // IfAvailable without a terminal
}

TEST_CASE("exec: provideClusterInfo passes the cluster in KUBERNETES_EXEC_INFO", "[exec]") {
  Plugin p;
  p.config.exec->provide_cluster_info = true;
  p.config.tls_server_name = "api.internal";
  p.config.ca_pem = gpuctl_test::kFakeCaPem;
  p.config.proxy_url = "socks5://proxy:1080";
  p.config.disable_compression = true;
  p.config.exec_cluster_config_json = R"({"audience":"sts","retries":3})";
  p.set("PLUGIN_TOKEN", "t");
  ExecCredentialSource source(p.config, false);
  expect_credential(source.get());
  CHECK(p.info() == nlohmann::json{{"kind", "ExecCredential"},
                                   {"apiVersion", kV1},
                                   {"spec",
                                    {{"cluster",
                                      {{"server", "https://10.0.0.1:6443"},
                                       {"tls-server-name", "api.internal"},
                                       {"certificate-authority-data", gpuctl_test::kFakeCaB64},
                                       {"proxy-url", "socks5://proxy:1080"},
                                       {"disable-compression", true},
                                       {"config", {{"audience", "sts"}, {"retries", 3}}}}},
                                     {"interactive", false}}}});

  Plugin insecure;
  insecure.config.exec->provide_cluster_info = true;
  insecure.config.insecure_skip_tls_verify = true;
  insecure.set("PLUGIN_TOKEN", "t");
  ExecCredentialSource s2(insecure.config, false);
  expect_credential(s2.get());
  CHECK(insecure.info()["spec"]["cluster"] ==
        nlohmann::json{{"server", "https://10.0.0.1:6443"}, {"insecure-skip-tls-verify", true}, {"config", nullptr}});
}

TEST_CASE("exec: credentials are cached until expirationTimestamp", "[exec]") {
  Plugin p;
  p.set("PLUGIN_TOKEN", "token-%n");
  p.set("PLUGIN_EXPIRATION", "2030-01-01T00:10:00Z");
  ManualClock clock;
  ExecCredentialSource source(p.config, false, clock.fn());

  auto first = expect_credential(source.get());
  CHECK(first.token == "token-1");
  REQUIRE(first.expiration.has_value());
  CHECK(*first.expiration == at(2030, 1, 1, 0, 10));
  *clock.now = at(2030, 1, 1, 0, 9, 59);
  CHECK(expect_credential(source.get()).token == "token-1");
  *clock.now = at(2030, 1, 1, 0, 10);  // still valid at the instant itself
  CHECK(expect_credential(source.get()).token == "token-1");
  CHECK(p.runs() == 1);
  *clock.now = at(2030, 1, 1, 0, 10, 1);
  CHECK(expect_credential(source.get()).token == "token-2");
  CHECK(p.runs() == 2);
}

TEST_CASE("exec: expirationTimestamp offsets and fractions", "[exec]") {
  Plugin p;
  p.set("PLUGIN_TOKEN", "t");
  p.set("PLUGIN_EXPIRATION", "2030-01-01T02:00:00.5+02:00");
  ExecCredentialSource source(p.config, false);
  auto cred = expect_credential(source.get());
  REQUIRE(cred.expiration.has_value());
  CHECK(*cred.expiration == at(2030, 1, 1) + std::chrono::milliseconds(500));
}

TEST_CASE("exec: without expirationTimestamp the credential lasts for the process", "[exec]") {
  Plugin p;
  p.set("PLUGIN_TOKEN", "token-%n");
  ManualClock clock;
  ExecCredentialSource source(p.config, false, clock.fn());
  CHECK(expect_credential(source.get()).token == "token-1");
  *clock.now = at(2099, 12, 31);
  CHECK(expect_credential(source.get()).token == "token-1");
  CHECK(p.runs() == 1);
}

TEST_CASE("exec: refresh after a 401 runs the plugin once, unless already rotated", "[exec]") {
  Plugin p;
  p.set("PLUGIN_TOKEN", "token-%n");
  ExecCredentialSource source(p.config, false);
  auto stale = expect_credential(source.get());
  CHECK(stale.token == "token-1");

  auto fresh = expect_credential(source.refresh(stale));
  CHECK(fresh.token == "token-2");
  CHECK(p.runs() == 2);
  // A second request that was refused with the same old token finds the new one.
  CHECK(expect_credential(source.refresh(stale)).token == "token-2");
  CHECK(p.runs() == 2);
  CHECK(expect_credential(source.get()).token == "token-2");
  // refresh() before any get() runs the plugin.
  Plugin q;
  q.set("PLUGIN_TOKEN", "q-%n");
  ExecCredentialSource other(q.config, false);
  CHECK(expect_credential(other.refresh(ExecCredential{})).token == "q-1");
}

TEST_CASE("exec: a failed run is not cached", "[exec]") {
  Plugin p;
  p.set("PLUGIN_TOKEN", "token-%n");
  p.set("PLUGIN_EXIT", "7");
  ExecCredentialSource failing(p.config, false);
  auto e = expect_failure(failing.get());
  CHECK(e.code == gpuctl::Errc::process);
  CHECK(e.message == p.prefix() + "exec: executable " + test_data("exec-plugin.sh") + " failed with exit code 7");
  CHECK(p.runs() == 1);
  expect_failure(failing.get());
  CHECK(p.runs() == 2);
}

TEST_CASE("exec: a plugin that floods stdout is stopped at the limit", "[exec]") {
  Plugin p;
  p.set("PLUGIN_FLOOD", "1");
  ExecCredentialSource source(p.config, false);
  auto e = expect_failure(source.get());
  CHECK(e.code == gpuctl::Errc::process);
  CHECK(e.message ==
        p.prefix() + "exec: executable " + test_data("exec-plugin.sh") +
            " wrote more than 4 MiB to stdout (the limit for an ExecCredential) and was stopped; check the plugin");
}

TEST_CASE("exec: malformed plugin output is reported like client-go", "[exec]") {
  auto failure_for = [](const std::vector<std::pair<std::string, std::string>>& vars, const std::string& api = kV1) {
    Plugin p(api);
    for (const auto& [n, v] : vars) p.set(n, v);
    ExecCredentialSource source(p.config, false);
    auto e = expect_failure(source.get());
    CHECK(e.code == gpuctl::Errc::process);
    CHECK_THAT(e.message, StartsWith(p.prefix()));
    return e.message.substr(p.prefix().size());
  };
  CHECK_THAT(failure_for({{"PLUGIN_OUTPUT", "not json"}}),
             StartsWith("decoding stdout: not an ExecCredential in JSON: "));
  CHECK(failure_for({{"PLUGIN_OUTPUT", "[1,2]"}}) == "decoding stdout: not an ExecCredential: expected a JSON object");
  CHECK(failure_for({{"PLUGIN_TOKEN", "t"}, {"PLUGIN_KIND", "Status"}}) ==
        "decoding stdout: kind is \"Status\", want ExecCredential");
  CHECK(
      failure_for({{"PLUGIN_OUTPUT", R"({"apiVersion":"client.authentication.k8s.io/v1","status":{"token":"t"}})"}}) ==
      "decoding stdout: Object 'Kind' is missing (want ExecCredential)");
  CHECK(failure_for({{"PLUGIN_TOKEN", "t"}, {"PLUGIN_API_VERSION", kV1beta1}}) ==
        "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin returned version "
        "client.authentication.k8s.io/v1beta1");
  CHECK(failure_for({{"PLUGIN_TOKEN", "t"}, {"PLUGIN_API_VERSION", kV1}}, kV1beta1) ==
        "exec plugin is configured to use API version client.authentication.k8s.io/v1beta1, plugin returned version "
        "client.authentication.k8s.io/v1");
  CHECK(failure_for({{"PLUGIN_NO_STATUS", "1"}}) == "exec plugin didn't return a status field");
  CHECK(failure_for({}) == "exec plugin didn't return a token or cert/key pair");
  CHECK(failure_for({{"PLUGIN_EXPIRATION", "2030-01-01T00:00:00Z"}}) ==
        "exec plugin didn't return a token or cert/key pair");

  TempDir dir;
  const std::string cert = dir.write("cert.pem", gpuctl_test::kFakeCertPem);
  CHECK(failure_for({{"PLUGIN_CERT_FILE", cert}}) == "exec plugin returned only certificate or key, not both");
  CHECK(failure_for({{"PLUGIN_KEY_FILE", cert}, {"PLUGIN_TOKEN", "t"}}) ==
        "exec plugin returned only certificate or key, not both");
  const std::string junk = dir.write("junk", "not pem");
  CHECK(failure_for({{"PLUGIN_CERT_FILE", junk}, {"PLUGIN_KEY_FILE", cert}}) ==
        "failed parsing client key/certificate: tls: failed to find any PEM data in certificate input");
  CHECK(failure_for({{"PLUGIN_TOKEN", "t"}, {"PLUGIN_EXPIRATION", "tomorrow"}}) ==
        "decoding stdout: status.expirationTimestamp: \"tomorrow\" is not an RFC 3339 time");
  CHECK(failure_for({{"PLUGIN_TOKEN", "t"}, {"PLUGIN_EXPIRATION", "2030-02-30T00:00:00Z"}}) ==
        "decoding stdout: status.expirationTimestamp: \"2030-02-30T00:00:00Z\" is not an RFC 3339 time");
  CHECK(failure_for({{"PLUGIN_OUTPUT", R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",
                                          "status":{"token":5}})"}}) ==
        "decoding stdout: status.token: expected a string");
}

TEST_CASE("exec: a plugin that is not installed shows the installHint, like kubectl", "[exec]") {
  // The gcloud-generated user from the shared fixtures, through load_rest_config.
  TempDir dir;
  const std::string users = dir.write(
      "users.yaml", "users:\n- name: gke-exec-user\n" +
                        read_file(gpuctl_test::fixture("issue__gke-gcloud-auth-plugin-exec-user-fragment.yaml")));
  auto loaded = gpuctl::kube::load_rest_config(
      gpuctl_test::kubeconfig_env(users + ":" + test_data("fragment-clusters.yaml"), "gke-exec"));
  REQUIRE(loaded.has_value());

  // An empty PATH guarantees the plugin is not found.
  const char* old_path = std::getenv("PATH");
  std::string saved = old_path ? old_path : "";
  ::setenv("PATH", dir.str().c_str(), 1);
  ExecCredentialSource source(*loaded, false);
  auto result = source.get();
  ::setenv("PATH", saved.c_str(), 1);

  auto e = expect_failure(result);
  CHECK(e.code == gpuctl::Errc::process);
  // kubectl__exec-plugin-not-found-gke-gcloud-auth-plugin.txt: "exec: executable
  // gke-gcloud-auth-plugin not found" and the "not installed" help, then the hint.
  CHECK(e.message ==
        "kubeconfig " + test_data("fragment-clusters.yaml") +
            ", context \"gke-exec\": user \"gke-exec-user\": getting credentials: exec: executable "
            "gke-gcloud-auth-plugin not found; it looks like you are trying to use a client-go credential plugin that "
            "is not installed (to learn more about this feature, consult the documentation available at: "
            "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins); "
            "Install gke-gcloud-auth-plugin for use with kubectl by following "
            "https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke");

  Plugin p;
  p.config.exec->command = p.dir.str() + "/no-such-plugin";
  p.config.exec->install_hint = "Get it from the intranet";
  ExecCredentialSource by_path(p.config, false);
  CHECK_THAT(expect_failure(by_path.get()).message,
             StartsWith(p.prefix() + "exec: fork/exec " + p.dir.str() + "/no-such-plugin: no such file or directory"));
  CHECK_THAT(expect_failure(by_path.get()).message, Contains("; Get it from the intranet"));
}

TEST_CASE("exec: interactiveMode decides stdin and spec.interactive", "[exec]") {
  SECTION("Always without a terminal fails before running anything") {
    Plugin p(kV1, "Always");
    p.set("PLUGIN_TOKEN", "t");
    ExecCredentialSource source(p.config, /*stdin_is_terminal=*/false);
    auto e = expect_failure(source.get());
    CHECK(e.code == gpuctl::Errc::config);
    CHECK(e.message == p.prefix() +
                           "exec plugin cannot support interactive mode: standard input is not a terminal "
                           "(interactiveMode is Always; run gpuctl from a terminal)");
    CHECK(p.runs() == 0);
  }
  SECTION("Always with a terminal") {
    Plugin p(kV1, "Always");
    p.set("PLUGIN_TOKEN", "t");
    ExecCredentialSource source(p.config, true);
    expect_credential(source.get());
    CHECK(p.info()["spec"]["interactive"] == true);
  }
  SECTION("IfAvailable follows the terminal") {
    Plugin p(kV1, "IfAvailable");
    p.set("PLUGIN_TOKEN", "t");
    ExecCredentialSource with_tty(p.config, true);
    expect_credential(with_tty.get());
    CHECK(p.info()["spec"]["interactive"] == true);
  }
  SECTION("Never ignores the terminal and gives the plugin no stdin") {
    Plugin p(kV1, "Never");
    p.set("PLUGIN_TOKEN", "t");
    p.set("PLUGIN_STDIN_FILE", p.stdin_file);
    ExecCredentialSource source(p.config, true);
    expect_credential(source.get());
    CHECK(p.info()["spec"]["interactive"] == false);
    CHECK(trim_copy(read_file(p.stdin_file)) == "/dev/null");
  }
  SECTION("an unknown mode or apiVersion in a hand-made RestConfig") {
    Plugin p(kV1, "Sometimes");
    ExecCredentialSource source(p.config, true);
    CHECK(expect_failure(source.get()).message ==
          p.prefix() + "exec plugin cannot support interactive mode: unknown interactiveMode: \"Sometimes\"");
    Plugin old("client.authentication.k8s.io/v1alpha1");
    ExecCredentialSource old_source(old.config, true);
    CHECK(expect_failure(old_source.get()).message ==
          old.prefix() + "exec plugin: invalid apiVersion \"client.authentication.k8s.io/v1alpha1\"");
    RestConfig none;
    none.user = "u";
    ExecCredentialSource no_exec(none, false);
    CHECK(expect_failure(no_exec.get()).message ==
          "user \"u\": getting credentials: no exec credential plugin is configured");
  }
}

TEST_CASE("exec: the fabric8 exec-v1 fixture end to end", "[exec]") {
  // ./token-generator next to the kubeconfig, with env PART1=hello and the argument "world".
  TempDir dir;
  std::string text = read_file(gpuctl_test::fixture("fabric8__exec-v1-with-env.yaml"));
  text = gpuctl_test::replace_all(text, "      command: ./token-generator",
                                  "      command: ./token-generator\n      interactiveMode: Never");
  const std::string config = dir.write("config", text);
  const std::string args_file = dir.str() + "/args";
  const std::string env_file = dir.str() + "/env";
  dir.write("token-generator",
            "#!/bin/sh\nPLUGIN_TOKEN=generated PLUGIN_ARGS_FILE='" + args_file + "' PLUGIN_ENV_FILE='" + env_file +
                "' exec '" + test_data("exec-plugin.sh") + "' \"$@\"\n",
            /*executable=*/true);
  auto rc = gpuctl::kube::load_rest_config(gpuctl_test::only_file(config));
  REQUIRE(rc.has_value());
  ExecCredentialSource source(*rc, false);
  CHECK(expect_credential(source.get()).token == "generated");
  CHECK(read_file(args_file) == "world\n");
  CHECK_THAT(read_file(env_file), Contains("\nPART1=hello\n"));
}
