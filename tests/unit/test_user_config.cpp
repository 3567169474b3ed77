// gpuctl's config file: parsing and checking (every error names the file and the key), where it
// is looked for, and the precedence flag > environment > context section > top level > default.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/config/user_config.hpp"

using namespace gpuctl;
using config::Source;

namespace {

constexpr const char* kFile = "/etc/gpuctl/config.yaml";

const char* kExample = R"(ssh:
  user: admin
  config: ~/.ssh/gpu_config
  identity: keys/id_gpu
  port: 2222
  knownHosts: /etc/ssh/known_gpu
  options: [ProxyJump=bastion, StrictHostKeyChecking=yes]
  timeout: 90s
  connectTimeout: 5s
  fanout: 64
  hostFrom: "{name}.gpu.example.com"
requestTimeout: 30s
output: wide
contexts:
  prod-east:
    ssh: {user: root, options: [ProxyJump=bastion-east]}
    requestTimeout: 1m
  empty:
)";

config::UserConfig parsed(const std::string& text) {
  auto r = config::parse_user_config(text, kFile, "/home/ada");
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  return *r;
}

std::string error_of(const std::string& text) {
  auto r = config::parse_user_config(text, kFile, "/home/ada");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::config);
  CHECK(r.error().message.find('\n') == std::string::npos);
  return r.error().message;
}

config::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

const config::EffectiveSetting& setting(const std::vector<config::EffectiveSetting>& all, std::string_view key) {
  for (const auto& s : all) {
    if (s.spec->key == key) return s;
  }
  FAIL("no setting " << key);
  throw;
}

}  // namespace

TEST_CASE("user config: the example file, ~ and relative paths resolved, contexts apart", "[config]") {
  auto c = parsed(kExample);
  CHECK(c.top.at("ssh.user") == config::Value{"admin"});
  CHECK(c.top.at("ssh.config") == config::Value{"/home/ada/.ssh/gpu_config"});
  CHECK(c.top.at("ssh.identity") == config::Value{"/etc/gpuctl/keys/id_gpu"});
  CHECK(c.top.at("ssh.port") == config::Value{"2222"});
  CHECK(c.top.at("ssh.knownHosts") == config::Value{"/etc/ssh/known_gpu"});
  CHECK(c.top.at("ssh.options") == config::Value{"ProxyJump=bastion", "StrictHostKeyChecking=yes"});
  CHECK(c.top.at("ssh.timeout") == config::Value{"90s"});
  CHECK(c.top.at("ssh.fanout") == config::Value{"64"});
  CHECK(c.top.at("ssh.hostFrom") == config::Value{"{name}.gpu.example.com"});
  CHECK(c.top.at("requestTimeout") == config::Value{"30s"});
  CHECK(c.top.at("output") == config::Value{"wide"});
  REQUIRE(c.contexts.size() == 2);
  const auto& east = c.contexts.at("prod-east");
  CHECK(east.size() == 3);
  CHECK(east.at("ssh.user") == config::Value{"root"});
  CHECK(east.at("ssh.options") == config::Value{"ProxyJump=bastion-east"});
  CHECK(east.at("requestTimeout") == config::Value{"1m"});
  CHECK(c.contexts.at("empty").empty());
  CHECK(parsed("").top.empty());
  CHECK(parsed("# nothing yet\n").contexts.empty());
}

TEST_CASE("user config: an unknown key is named with its path and the closest known key", "[config]") {
  CHECK(error_of("ssh:\n  usr: x\n") ==
        "/etc/gpuctl/config.yaml: ssh.usr: unknown key (did you mean \"user\"?); the keys here are user, config, "
        "identity, port, knownHosts, options, timeout, connectTimeout, fanout, hostFrom");
  CHECK(error_of("outptu: json\n") ==
        "/etc/gpuctl/config.yaml: outptu: unknown key (did you mean \"output\"?); the keys here are ssh, "
        "requestTimeout, output, contexts");
  CHECK(error_of("contexts:\n  prod:\n    ssh:\n      prot: 22\n")
            .starts_with("/etc/gpuctl/config.yaml: contexts.prod.ssh.prot: unknown key (did you mean \"port\"?)"));
  // Sections do not nest.
  CHECK(error_of("contexts:\n  prod:\n    contexts: {}\n")
            .starts_with("/etc/gpuctl/config.yaml: contexts.prod.contexts: unknown key;"));
  CHECK(error_of("ssh:\n  user: a\n  user: b\n") == "/etc/gpuctl/config.yaml: ssh.user: appears twice; keep one");
}

TEST_CASE("user config: a value of the wrong type or form names the file and the key", "[config]") {
  CHECK(error_of("ssh:\n  port: abc\n") == "/etc/gpuctl/config.yaml: ssh.port: expected a port (1-65535), got \"abc\"");
  CHECK(error_of("ssh:\n  port: 70000\n") ==
        "/etc/gpuctl/config.yaml: ssh.port: expected a port (1-65535), got \"70000\"");
  CHECK(error_of("ssh:\n  fanout: 0\n") ==
        "/etc/gpuctl/config.yaml: ssh.fanout: expected a positive whole number, got \"0\"");
  CHECK(error_of("ssh:\n  options: ProxyJump=b\n") ==
        "/etc/gpuctl/config.yaml: ssh.options: expected a list of KEY=VALUE strings, got \"ProxyJump=b\"");
  CHECK(error_of("ssh:\n  options: [ProxyJump]\n") ==
        "/etc/gpuctl/config.yaml: ssh.options[0]: \"ProxyJump\" is not KEY=VALUE (an ssh -o option, e.g. "
        "ProxyJump=bastion)");
  CHECK(error_of("ssh:\n  user: [a, b]\n") == "/etc/gpuctl/config.yaml: ssh.user: expected a single value, got a list");
  CHECK(error_of("ssh:\n  user:\n") == "/etc/gpuctl/config.yaml: ssh.user: expected a single value, got nothing");
  CHECK(error_of("ssh: root\n") == "/etc/gpuctl/config.yaml: ssh: expected a mapping, got \"root\"");
  CHECK(error_of("contexts:\n  prod:\n    ssh:\n      timeout: 5x\n")
            .starts_with("/etc/gpuctl/config.yaml: contexts.prod.ssh.timeout: invalid duration \"5x\""));
  CHECK(error_of("ssh:\n  hostFrom: nowhere\n") ==
        "/etc/gpuctl/config.yaml: ssh.hostFrom: use internal-ip, external-ip, hostname, name, label:KEY, "
        "annotation:KEY or a template with {name} such as {name}.gpu.example.com");
  CHECK(error_of("output: jsno\n") ==
        "/etc/gpuctl/config.yaml: output: unknown format \"jsno\" (did you mean \"json\"?); use one of table, wide, "
        "json, yaml, name, text, junit, prometheus");
  CHECK(error_of("ssh:\n  identity: ~bob/id\n") ==
        "/etc/gpuctl/config.yaml: ssh.identity: ~user is not expanded; write ~/... or the whole path");
  CHECK(error_of("[1, 2]\n") == "/etc/gpuctl/config.yaml: expected a mapping of settings, got a list");
  CHECK(error_of("contexts: [a]\n") ==
        "/etc/gpuctl/config.yaml: contexts: expected a mapping of kubeconfig context names, got a list");
}

TEST_CASE("user config: YAML that does not parse is named with its line", "[config]") {
  CHECK(error_of("ssh: [\n") ==
        "/etc/gpuctl/config.yaml: line 2, column 1: not valid YAML: end of sequence flow not found");
  CHECK(error_of("a: 1\n---\nb: 2\n") == "/etc/gpuctl/config.yaml: holds more than one YAML document; keep one");
  // An alias bomb is refused before it is expanded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'j'; ++c, ++prev) {
    bomb += fmt::format("{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", c, c, prev, prev, prev, prev,
                        prev, prev, prev, prev, prev, prev);
  }
  CHECK(error_of(bomb).starts_with("/etc/gpuctl/config.yaml"));
}

TEST_CASE("user config: GPUCTL_CONFIG, else XDG_CONFIG_HOME, else HOME", "[config]") {
  auto all = config::locate_user_config(
      env_of({{"GPUCTL_CONFIG", "/c.yaml"}, {"XDG_CONFIG_HOME", "/x"}, {"HOME", "/home/ada"}}));
  REQUIRE(all);
  CHECK(all->path == "/c.yaml");
  CHECK(all->required);
  auto xdg = config::locate_user_config(env_of({{"GPUCTL_CONFIG", ""}, {"XDG_CONFIG_HOME", "/x"}, {"HOME", "/h"}}));
  REQUIRE(xdg);
  CHECK(xdg->path == "/x/gpuctl/config.yaml");
  CHECK_FALSE(xdg->required);
  auto home = config::locate_user_config(env_of({{"HOME", "/home/ada"}}));
  REQUIRE(home);
  CHECK(home->path == "/home/ada/.config/gpuctl/config.yaml");
  CHECK(home->named_by == "HOME");
  CHECK_FALSE(config::locate_user_config(env_of({})));
  CHECK_FALSE(config::locate_user_config(nullptr));
}

TEST_CASE("user config: a missing default file is no file, a missing GPUCTL_CONFIG file an error", "[config]") {
  const std::string dir = std::filesystem::temp_directory_path() / "gpuctl-test-user-config";
  std::filesystem::create_directories(dir);
  auto absent = config::load_user_config({dir + "/none.yaml", "HOME", false}, "/h");
  REQUIRE(absent);
  CHECK_FALSE(absent->has_value());
  auto required = config::load_user_config({dir + "/none.yaml", "GPUCTL_CONFIG", true}, "/h");
  REQUIRE_FALSE(required);
  CHECK(required.error().message ==
        dir + "/none.yaml: cannot read: No such file or directory (named by GPUCTL_CONFIG)");
  std::ofstream(dir + "/c.yaml") << "ssh:\n  user: ops\n";
  auto present = config::load_user_config({dir + "/c.yaml", "GPUCTL_CONFIG", true}, "/h");
  REQUIRE(present);
  REQUIRE(present->has_value());
  CHECK((*present)->top.at("ssh.user") == config::Value{"ops"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("user config: flag > environment > context section > top level > default", "[config]") {
  auto file = parsed(kExample);
  config::ResolveInput in;
  in.file = &file;
  in.context = "prod-east";
  in.env = env_of({{"GPUCTL_SSH_IDENTITY", "/env/id"}, {"GPUCTL_SSH_USER", "envuser"}, {"GPUCTL_SSH_PORT", ""}});
  in.flags["--ssh-user"] = {"flaguser"};
  in.flags["--fanout"] = {"7"};
  auto all = config::resolve_settings(in);
  REQUIRE(all.size() == config::setting_specs().size());

  auto user = setting(all, "ssh.user");  // flag over env over context over top
  CHECK(user.value == config::Value{"flaguser"});
  CHECK(user.source == Source::flag);
  CHECK(user.origin == "--ssh-user");
  auto identity = setting(all, "ssh.identity");  // env over top
  CHECK(identity.value == config::Value{"/env/id"});
  CHECK(identity.source == Source::env);
  CHECK(identity.origin == "GPUCTL_SSH_IDENTITY");
  auto port = setting(all, "ssh.port");  // an empty variable counts as unset
  CHECK(port.source == Source::file);
  CHECK(port.origin == "ssh.port");
  auto options = setting(all, "ssh.options");  // the context's list replaces the top level's
  CHECK(options.value == config::Value{"ProxyJump=bastion-east"});
  CHECK(options.source == Source::file_context);
  CHECK(options.origin == "contexts.prod-east.ssh.options");
  CHECK(setting(all, "requestTimeout").value == config::Value{"1m"});
  CHECK(setting(all, "ssh.fanout").value == config::Value{"7"});
  CHECK(setting(all, "ssh.timeout").source == Source::file);

  // Another context, or none: the top level.
  in.context = "staging";
  in.flags.clear();
  in.env = nullptr;
  all = config::resolve_settings(in);
  CHECK(setting(all, "ssh.user").value == config::Value{"admin"});
  CHECK(setting(all, "ssh.user").source == Source::file);
  CHECK(setting(all, "ssh.options").value == config::Value{"ProxyJump=bastion", "StrictHostKeyChecking=yes"});

  // No file: the defaults, as values where they are values.
  in.file = nullptr;
  all = config::resolve_settings(in);
  CHECK(setting(all, "ssh.timeout").value == config::Value{"60s"});
  CHECK(setting(all, "ssh.timeout").source == Source::default_value);
  CHECK(setting(all, "ssh.fanout").value == config::Value{"32"});
  CHECK(setting(all, "ssh.user").value.empty());
  CHECK(setting(all, "ssh.connectTimeout").value.empty());  // a rule, not a value
}

TEST_CASE("user config: known_hosts given as an --ssh-option counts as its flag", "[config]") {
  auto file = parsed(kExample);
  config::ResolveInput in;
  in.file = &file;
  in.env = env_of({{"GPUCTL_SSH_KNOWN_HOSTS", "/env/kh"}});
  auto all = config::resolve_settings(in);
  CHECK(setting(all, "ssh.knownHosts").source == Source::env);
  in.flags["--ssh-option"] = {"ProxyJump=x", "userknownhostsfile=/flag/kh"};
  all = config::resolve_settings(in);
  CHECK(setting(all, "ssh.knownHosts").value == config::Value{"/flag/kh"});
  CHECK(setting(all, "ssh.knownHosts").source == Source::flag);
}

TEST_CASE("user config: config view's schema", "[config]") {
  auto file = parsed(kExample);
  config::EffectiveConfig view;
  view.location = config::ConfigLocation{kFile, "GPUCTL_CONFIG", true};
  view.file_found = true;
  view.context = "prod-east";
  view.context_from = "kubeconfig";
  view.context_section = true;
  config::ResolveInput in;
  in.file = &file;
  in.context = view.context;
  view.settings = config::resolve_settings(in);
  auto doc = config::to_json(view);
  CHECK(doc["apiVersion"] == "gpuctl.io/v1alpha1");
  CHECK(doc["kind"] == "ConfigView");
  CHECK(doc["file"] == nlohmann::json{{"path", kFile}, {"namedBy", "GPUCTL_CONFIG"}, {"found", true}});
  CHECK(doc["context"] == nlohmann::json{{"name", "prod-east"}, {"from", "kubeconfig"}, {"section", true}});
  REQUIRE(doc["settings"].size() == config::setting_specs().size());
  auto port = doc["settings"][3];
  CHECK(port == nlohmann::json{{"key", "ssh.port"},
                               {"value", 2222},
                               {"source", "file"},
                               {"origin", "ssh.port"},
                               {"flag", "--ssh-port"},
                               {"env", "GPUCTL_SSH_PORT"},
                               {"default", nullptr}});
  CHECK(doc["settings"][0]["source"] == "fileContext");
  CHECK(doc["settings"][5]["value"] == nlohmann::json{"ProxyJump=bastion-east"});
  CHECK(doc["settings"][4]["flag"].is_null());  // knownHosts: no flag of its own
}
