#pragma once
// What every subcommand shares: the output streams, the global flags, and the lazily built
// Kubernetes client (only commands that talk to the cluster load the kubeconfig).
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"
#include "exit_code.hpp"
#include "gpuctl/config/user_config.hpp"
#include "gpuctl/error.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/config.hpp"
#include "gpuctl/ssh/runner.hpp"

namespace gpuctl::cli {

struct Streams {
  std::ostream& out;
  std::ostream& err;
  bool out_is_terminal = false;
  bool err_is_terminal = false;
  bool stdin_is_terminal = false;
};

struct GlobalOptions {
  std::string kubeconfig;
  std::string context;
  std::string namespace_name;
  std::string request_timeout = "0";
  int verbosity = 0;
  bool no_color = false;
};

// Seams for in-process tests: where configuration, the transport and the ssh runner come from.
struct Environment {
  std::function<Result<kube::RestConfig>(const kube::LoadOptions&)> load_config;
  std::function<std::unique_ptr<kube::Transport>(const kube::RestConfig&, const kube::TransportSettings&)>
      make_transport;
  std::function<kube::LoadOptions()> load_options_from_environment;
  std::function<std::unique_ptr<ssh::Runner>(const ssh::SshSettings&)> make_ssh_runner;
  bool no_color_env = false;  // NO_COLOR is set
  // The variables gpuctl's config file is found and overridden by (GPUCTL_CONFIG, XDG_CONFIG_HOME,
  // HOME, GPUCTL_SSH_*); null reads none, so in-process tests never see the developer's file.
  config::EnvLookup env_var;
};

Environment default_environment();

class AppContext {
 public:
  AppContext(Streams streams, Environment environment);

  Streams& streams() { return streams_; }
  GlobalOptions& globals() { return globals_; }
  // The help, man pages and completion words of the command tree (command_doc.hpp).
  HelpData& help() { return help_; }
  const Environment& environment() const { return environment_; }

  // Where the kubeconfig comes from: the environment, overridden by the global flags.
  kube::LoadOptions load_options() const;
  // Loads the kubeconfig and builds the client on first use ("complete").
  Result<kube::Client*> client();
  // The kubeconfig resolved (once); the config file reads its context name.
  Result<kube::RestConfig> rest_config() { return load_config(); }
  // The namespace from -n, else the context's, else "default". Needs the configuration.
  Result<std::string> namespace_name();
  // How nodes are reached (the system ssh, or a test's fake), with these settings.
  std::unique_ptr<ssh::Runner> ssh_runner(const ssh::SshSettings& settings);
  // Colors only on a terminal, and never with --no-color or NO_COLOR.
  bool color() const;
  // Prints "Warning: ..." lines on stderr (server warnings, partial failures).
  void warn(const std::string& message);

  // The selected subcommand's run step, set by its parse callback.
  std::function<Result<ExitCode>()> run;
  // Every configurable setting's value and where it came from, once the config file is applied
  // (cli/user_config); what `gpuctl config view` shows.
  config::EffectiveConfig user_config;

 private:
  Result<kube::RestConfig> load_config();

  Streams streams_;
  Environment environment_;
  GlobalOptions globals_;
  HelpData help_;
  std::optional<kube::RestConfig> config_;
  std::unique_ptr<kube::Client> client_;
};

// Adds the global flags and every command of the command table to `app`.
void configure_app(CLI::App& app, AppContext& context, bool& show_version);

// Runs gpuctl with these arguments; returns the exit code. main() and the CLI tests call it.
int run_cli(int argc, const char* const* argv, Streams streams, Environment environment);

}  // namespace gpuctl::cli
