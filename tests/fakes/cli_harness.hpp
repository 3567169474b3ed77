#pragma once
// Runs the gpuctl CLI in-process against a FakeTransport, capturing stdout and stderr.
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"
#include "fakes/fake_ssh_runner.hpp"
#include "fakes/test_support.hpp"

namespace gpuctl::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliHarness {
 public:
  CliHarness() : transport_(std::make_unique<FakeTransport>()), fake_(transport_.get()) {}

  FakeTransport& fake() { return *fake_; }
  // Answers every command that reaches nodes (gpus, nodes --live) instead of the system ssh.
  FakeSshRunner& ssh() { return ssh_; }
  // The settings of each runner the commands asked for, in order.
  const std::vector<ssh::SshSettings>& ssh_settings() const { return ssh_settings_; }
  kube::RestConfig& config() { return config_; }
  // The variables the config file is found and overridden by (GPUCTL_CONFIG, HOME, GPUCTL_SSH_*);
  // none is set unless a test sets it, whatever the process's environment holds.
  void set_env(const std::string& name, const std::string& value) { env_vars_[name] = value; }
  // Make configuration loading fail with this error (e.g. a broken kubeconfig).
  void fail_config(Error e) { config_error_ = std::move(e); }

  CliRun run(std::vector<std::string> args) {
    args.insert(args.begin(), "gpuctl");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    cli::Environment env;
    env.load_options_from_environment = [] { return kube::LoadOptions{}; };
    env.load_config = [this](const kube::LoadOptions& options) -> Result<kube::RestConfig> {
      last_load_options_ = options;
      if (config_error_) return fail(*config_error_);
      kube::RestConfig c = config_;
      if (options.namespace_name) c.namespace_name = *options.namespace_name;
      return c;
    };
    env.make_transport = [this](const kube::RestConfig&,
                                const kube::TransportSettings&) -> std::unique_ptr<kube::Transport> {
      // The harness keeps the fake across runs; each run's client gets a forwarder to it.
      return std::make_unique<Forward>(fake_);
    };
    env.make_ssh_runner = [this](const ssh::SshSettings& settings) -> std::unique_ptr<ssh::Runner> {
      ssh_settings_.push_back(settings);
      return std::make_unique<ForwardSsh>(&ssh_);
    };
    env.env_var = [this](const char* name) -> const char* {
      auto found = env_vars_.find(name);
      return found == env_vars_.end() ? nullptr : found->second.c_str();
    };
    cli::Streams streams{out, err, false, false, false};
    CliRun r;
    r.exit_code = cli::run_cli(static_cast<int>(argv.size()), argv.data(), streams, env);
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  const kube::LoadOptions& last_load_options() const { return last_load_options_; }

 private:
  struct Forward : kube::Transport {
    explicit Forward(FakeTransport* f) : fake(f) {}
    Result<kube::HttpResponse> send(const kube::HttpRequest& r) override { return fake->send(r); }
    Result<kube::HttpResponse> send_streaming(const kube::HttpRequest& r, const kube::BodyChunkHandler& h) override {
      return fake->send_streaming(r, h);
    }
    FakeTransport* fake;
  };
  struct ForwardSsh : ssh::Runner {
    explicit ForwardSsh(FakeSshRunner* f) : fake(f) {}
    Result<std::vector<ssh::HostRun>> run(const std::vector<std::string>& addresses, std::string_view command,
                                          const ssh::RunOptions& options) override {
      return fake->run(addresses, command, options);
    }
    FakeSshRunner* fake;
  };
  std::unique_ptr<FakeTransport> transport_;
  FakeSshRunner ssh_;
  std::vector<ssh::SshSettings> ssh_settings_;
  FakeTransport* fake_;
  kube::RestConfig config_ = test_config();
  std::optional<Error> config_error_;
  std::map<std::string, std::string> env_vars_;
  kube::LoadOptions last_load_options_;
};

}  // namespace gpuctl::testing
