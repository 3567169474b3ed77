// The config file through the real CLI, in-process: its values reach the commands' flags (ssh
// settings, -o, --request-timeout), flags and GPUCTL_SSH_* win over it, a context's section over
// its top level, a bad file is one line naming the file and key with exit 1 before any request,
// and `gpuctl config view` shows each setting's source.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fakes/cli_harness.hpp"
#include "fakes/test_support.hpp"

using nlohmann::json;
using namespace gpuctl;
using testing::CliHarness;

namespace {

// A config file in a fresh folder, removed again at the end of the test.
struct ConfigFile {
  std::filesystem::path dir;
  std::string path;
  explicit ConfigFile(const std::string& text) {
    dir = std::filesystem::temp_directory_path() / ("gpuctl-config-cli-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    path = (dir / "config.yaml").string();
    std::ofstream(path) << text;
  }
  ~ConfigFile() { std::filesystem::remove_all(dir); }
};

const char* kFile = R"(ssh:
  user: admin
  identity: /keys/id_gpu
  port: 2222
  knownHosts: /keys/known_hosts
  options: [ProxyJump=bastion]
  timeout: 9s
requestTimeout: 30s
output: json
contexts:
  prod:
    ssh: {user: root, options: [ProxyJump=bastion-prod]}
)";

const char* kEmptyList = R"({"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]})";

json setting(const json& view, const std::string& key) {
  for (const auto& s : view["settings"]) {
    if (s["key"] == key) return s;
  }
  FAIL("no setting " << key);
  return {};
}

}  // namespace

TEST_CASE("config cli: the file's ssh settings reach the nodes' runner when no flag gives them", "[config][cli]") {
  ConfigFile f(kFile);
  CliHarness h;
  h.set_env("GPUCTL_CONFIG", f.path);
  h.run({"gpus"});  // the node list fails (nothing scripted); the runner is made before it
  REQUIRE(h.ssh_settings().size() == 1);
  const auto& s = h.ssh_settings()[0];
  CHECK(s.user == "admin");
  CHECK(s.identity_file == "/keys/id_gpu");
  CHECK(s.port == 2222);
  CHECK(s.deadline == std::chrono::seconds(9));
  CHECK(s.options == std::vector<std::string>{"ProxyJump=bastion", "UserKnownHostsFile=/keys/known_hosts"});

  // A flag wins; --ssh-option given replaces the file's options, the file's known_hosts is added.
  h.run({"gpus", "--ssh-user", "ops", "--ssh-option", "Compression=yes", "--ssh-port", "22"});
  REQUIRE(h.ssh_settings().size() == 2);
  CHECK(h.ssh_settings()[1].user == "ops");
  CHECK(h.ssh_settings()[1].port == 22);
  CHECK(h.ssh_settings()[1].options ==
        std::vector<std::string>{"Compression=yes", "UserKnownHostsFile=/keys/known_hosts"});
  // ... unless the flags name a known_hosts file themselves.
  h.run({"gpus", "--ssh-option", "UserKnownHostsFile=/mine"});
  REQUIRE(h.ssh_settings().size() == 3);
  CHECK(h.ssh_settings()[2].options == std::vector<std::string>{"UserKnownHostsFile=/mine"});
}

TEST_CASE("config cli: the section of the context in use wins over the top level", "[config][cli]") {
  ConfigFile f(kFile);
  CliHarness h;
  h.set_env("GPUCTL_CONFIG", f.path);
  h.run({"gpus", "--context", "prod"});
  REQUIRE(h.ssh_settings().size() == 1);
  CHECK(h.ssh_settings()[0].user == "root");
  CHECK(h.ssh_settings()[0].port == 2222);  // not in the section: the top level's
  CHECK(h.ssh_settings()[0].options ==
        std::vector<std::string>{"ProxyJump=bastion-prod", "UserKnownHostsFile=/keys/known_hosts"});
  // Without --context: the kubeconfig's current context.
  h.config().context = "prod";
  h.run({"gpus"});
  REQUIRE(h.ssh_settings().size() == 2);
  CHECK(h.ssh_settings()[1].user == "root");
  h.config().context = "staging";
  h.run({"gpus"});
  REQUIRE(h.ssh_settings().size() == 3);
  CHECK(h.ssh_settings()[2].user == "admin");
}

TEST_CASE("config cli: output and requestTimeout from the file, where the command takes them", "[config][cli]") {
  ConfigFile f(kFile);
  CliHarness h;
  h.set_env("GPUCTL_CONFIG", f.path);
  h.fake().on("GET", "/api/v1/nodes", testing::json_answer(200, kEmptyList));
  h.fake().on("GET", "/api/v1/pods", testing::json_answer(200, kEmptyList));
  h.fake().serves_no_dra();
  auto nodes = h.run({"nodes"});
  INFO(nodes.err);
  REQUIRE(nodes.exit_code == 0);
  CHECK(json::parse(nodes.out)["kind"] == "GPUNodeList");  // output: json
  auto view = h.run({"config", "view", "-o", "json"});
  REQUIRE(view.exit_code == 0);
  auto doc = json::parse(view.out);
  CHECK(setting(doc, "requestTimeout")["value"] == "30s");
  CHECK(setting(doc, "output")["source"] == "flag");

  // A format this command's -o does not take is left to the commands that take it.
  ConfigFile wide("output: wide\n");
  h.set_env("GPUCTL_CONFIG", wide.path);
  auto text = h.run({"config", "view"});
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.starts_with("File:     " + wide.path + " (named by GPUCTL_CONFIG)\n"));
  auto line = text.out.substr(text.out.find("\noutput ") + 1);
  line = line.substr(0, line.find('\n'));
  CHECK(line.find(" wide ") != std::string::npos);
  CHECK(line.ends_with("   file: output"));
}

TEST_CASE("config cli: config view shows flag over env over file", "[config][cli]") {
  ConfigFile f(kFile);
  CliHarness h;
  h.set_env("GPUCTL_CONFIG", f.path);
  h.set_env("GPUCTL_SSH_PORT", "2022");
  h.set_env("GPUCTL_SSH_USER", "envuser");
  auto r = h.run({"config", "view", "-o", "json", "--ssh-user", "flaguser", "--context", "prod"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = json::parse(r.out);
  CHECK(doc["file"]["path"] == f.path);
  CHECK(doc["context"] == json{{"name", "prod"}, {"from", "--context"}, {"section", true}});
  CHECK(setting(doc, "ssh.user")["value"] == "flaguser");
  CHECK(setting(doc, "ssh.user")["source"] == "flag");
  CHECK(setting(doc, "ssh.port")["value"] == 2022);
  CHECK(setting(doc, "ssh.port")["source"] == "env");
  CHECK(setting(doc, "ssh.options")["source"] == "fileContext");
  CHECK(setting(doc, "ssh.identity")["source"] == "file");
  CHECK(setting(doc, "ssh.fanout")["source"] == "default");
  CHECK(setting(doc, "ssh.fanout")["value"] == 32);

  // No file at all: nothing applied, and the view says so.
  CliHarness bare;
  bare.set_env("HOME", "/nonexistent-home");
  auto none = bare.run({"config", "view", "-o", "json"});
  REQUIRE(none.exit_code == 0);
  CHECK(json::parse(none.out)["file"] ==
        json{{"path", "/nonexistent-home/.config/gpuctl/config.yaml"}, {"namedBy", "HOME"}, {"found", false}});
}

TEST_CASE("config cli: a bad file is one line naming the file and key, exit 1, no request", "[config][cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ssh:\n  prot: 22\n", ": ssh.prot: unknown key (did you mean \"port\"?)"},
      {"ssh:\n  port: many\n", ": ssh.port: expected a port (1-65535), got \"many\""},
      {"ssh: [\n", ": line 2, column 1: not valid YAML"},
      // Checked by the flag itself (--fanout takes 1-1024), named by the key all the same.
      {"contexts:\n  test:\n    ssh:\n      fanout: 5000\n",
       ": contexts.test.ssh.fanout: Value 5000 not in range 1 to 1024"},
  };
  for (const auto& [text, expected] : cases) {
    ConfigFile f(text);
    CliHarness h;
    h.set_env("GPUCTL_CONFIG", f.path);
    auto r = h.run({"gpus"});
    INFO(text);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.starts_with("error: " + f.path + expected));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(h.fake().requests().empty());
    CHECK(h.ssh_settings().empty());
  }
  CliHarness missing;
  missing.set_env("GPUCTL_CONFIG", "/nonexistent/gpuctl.yaml");
  auto r = missing.run({"nodes"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "error: /nonexistent/gpuctl.yaml: cannot read: No such file or directory (named by GPUCTL_CONFIG)\n");
}
