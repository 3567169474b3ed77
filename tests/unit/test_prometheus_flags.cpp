// The --prometheus-* flags of `--via prometheus`: the URL from the flag or GPUCTL_PROMETHEUS_URL,
// which credentials go together, the staleness threshold, the label mapping, and the credential
// files read with errors naming the flag and the path.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "fakes/fake_env.hpp"
#include "prometheus_flags.hpp"

using namespace gpuctl;
using gpuctl::testing::env_of;

namespace {

const cli::EnvLookup kNoEnv = env_of({});

cli::PrometheusFlags with_url(std::string url = "http://prometheus.monitoring:9090") {
  cli::PrometheusFlags f;
  f.url = std::move(url);
  return f;
}

std::string error_of(const cli::PrometheusFlags& f, const cli::EnvLookup& env = kNoEnv) {
  auto r = cli::validate_prometheus_flags(f, env);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message.find('\n') == std::string::npos);
  return r.error().message;
}

std::string temp_file(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("gpuctl-test-prom-" + name);
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("prometheus flags: the URL comes from the flag else GPUCTL_PROMETHEUS_URL", "[prometheus][cli]") {
  auto r = cli::validate_prometheus_flags(with_url(), env_of({{"GPUCTL_PROMETHEUS_URL", "http://other:9090"}}));
  REQUIRE(r);
  CHECK(r->url == "http://prometheus.monitoring:9090");
  CHECK(r->stale_after == std::chrono::seconds(120));
  CHECK(r->labels.node == std::vector<std::string>{"node", "Hostname", "kubernetes_node", "nodename"});
  r = cli::validate_prometheus_flags({}, env_of({{"GPUCTL_PROMETHEUS_URL", "http://other:9090"}}));
  REQUIRE(r);
  CHECK(r->url == "http://other:9090");
  CHECK(error_of({}).find("--prometheus-url URL (or $GPUCTL_PROMETHEUS_URL)") != std::string::npos);
  CHECK(error_of(with_url("prometheus:9090")) == "--prometheus-url prometheus:9090: not an http:// or https:// URL");
  // A password in the URL is never repeated.
  CHECK(error_of(with_url("ftp://u:pw@host")).find("pw") == std::string::npos);
}

TEST_CASE("prometheus flags: credentials that do not go together are refused", "[prometheus][cli]") {
  auto f = with_url("https://prom.example.com");
  f.bearer_token_file = "/t";
  f.username = "u";
  f.password_file = "/p";
  CHECK(error_of(f).find("give one") != std::string::npos);
  f = with_url();
  f.username = "u";
  CHECK(error_of(f).find("--prometheus-password-file") != std::string::npos);
  f = with_url("https://prom.example.com");
  f.cert_file = "/c";
  CHECK(error_of(f).find("--prometheus-key-file") != std::string::npos);
  f = with_url();
  f.ca_file = "/ca";
  CHECK(error_of(f).find("need an https:// --prometheus-url") != std::string::npos);
  f = with_url("https://prom.example.com");
  f.ca_file = "/ca";
  f.insecure_skip_tls_verify = true;
  CHECK(error_of(f).find("contradict") != std::string::npos);
  // The token file of the environment counts as a token too.
  f = with_url();
  f.username = "u";
  f.password_file = "/p";
  CHECK_FALSE(cli::validate_prometheus_flags(f, env_of({{"GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE", "/t"}})));
}

TEST_CASE("prometheus flags: the staleness threshold is a duration of a second or more", "[prometheus][cli]") {
  auto f = with_url();
  f.stale_after = "3s";
  auto r = cli::validate_prometheus_flags(f, kNoEnv);
  REQUIRE(r);
  CHECK(r->stale_after == std::chrono::seconds(3));
  f.stale_after = "soon";
  CHECK(error_of(f).find("--prometheus-stale-after") != std::string::npos);
  f.stale_after = "500ms";
  CHECK(error_of(f).find("at least 1s") != std::string::npos);
}

TEST_CASE("prometheus flags: --prometheus-label maps each role to a label", "[prometheus][cli]") {
  auto f = with_url();
  f.labels = {"node=kubernetes_node,Hostname",
              "gpu=gpu_index",
              "uuid=gpu_uuid",
              "model=model",
              "pci-bus-id=bus",
              "driver=driver"};
  auto r = cli::validate_prometheus_flags(f, kNoEnv);
  REQUIRE(r);
  CHECK(r->labels.node == std::vector<std::string>{"kubernetes_node", "Hostname"});
  CHECK(r->labels.gpu_index == "gpu_index");
  CHECK(r->labels.uuid == "gpu_uuid");
  CHECK(r->labels.model == "model");
  CHECK(r->labels.pci_bus_id == "bus");
  CHECK(r->labels.driver_version == "driver");
  f.labels = {"host=Hostname"};
  CHECK(error_of(f).find("unknown role \"host\"; roles: node, gpu") != std::string::npos);
  f.labels = {"node=k8s-node"};
  CHECK(error_of(f).find("\"k8s-node\" is not a Prometheus label name") != std::string::npos);
  f.labels = {"gpu=a,b"};
  CHECK(error_of(f).find("only node takes a list") != std::string::npos);
  f.labels = {"node"};
  CHECK(error_of(f).find("ROLE=LABEL") != std::string::npos);
}

TEST_CASE("prometheus flags: credential files are read and trimmed", "[prometheus][cli]") {
  auto f = with_url("https://prom.example.com");
  f.username = "admin";
  f.password_file = temp_file("password", "s3cret\n");
  f.ca_file = temp_file("ca", "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n");
  auto options = cli::validate_prometheus_flags(f, kNoEnv);
  REQUIRE(options);
  auto r = cli::read_prometheus_credentials(*options, f, kNoEnv);
  REQUIRE(r);
  CHECK(r->basic_user == "admin");
  CHECK(r->basic_password == "s3cret");
  CHECK(r->ca_pem.find("CA\n") != std::string::npos);

  cli::PrometheusFlags token = with_url();
  auto env = env_of({{"GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE", temp_file("token", "tok-1\n")}});
  r = cli::read_prometheus_credentials(*cli::validate_prometheus_flags(token, env), token, env);
  REQUIRE(r);
  CHECK(r->bearer_token == "tok-1");

  token.bearer_token_file = "/nonexistent/gpuctl-token";
  r = cli::read_prometheus_credentials(*cli::validate_prometheus_flags(token, kNoEnv), token, kNoEnv);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::io);
  CHECK(r.error().message.rfind("--prometheus-bearer-token-file: cannot read /nonexistent/gpuctl-token", 0) == 0);
  token.bearer_token_file = temp_file("empty", "\n");
  r = cli::read_prometheus_credentials(*cli::validate_prometheus_flags(token, kNoEnv), token, kNoEnv);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("the file is empty") != std::string::npos);
}
