#include "ssh_flags.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "gpuctl/util/time.hpp"

namespace gpuctl::cli {

void add_ssh_flags(CLI::App& cmd, HelpData& help, SshFlags& f) {
  const char* group = "SSH options";
  completes(cmd.add_option("--ssh-config", f.config_file,
                           "ssh client configuration file (ssh -F); default: $GPUCTL_SSH_CONFIG, else ~/.ssh/config"),
            help, ValueKind::file)
      ->group(group);
  cmd.add_option("--ssh-user", f.user, "User to log in as on the nodes (ssh -l); default: $GPUCTL_SSH_USER")
      ->group(group);
  cmd.add_option("--ssh-port", f.port, "Port of the nodes' sshd (ssh -p); default: $GPUCTL_SSH_PORT")->group(group);
  completes(
      cmd.add_option("--ssh-identity", f.identity_file, "Private key file (ssh -i); default: $GPUCTL_SSH_IDENTITY"),
      help, ValueKind::file)
      ->group(group);
  cmd.add_option("--ssh-option", f.options,
                 "An ssh -o KEY=VALUE option; repeatable (e.g. ProxyJump=bastion). $GPUCTL_SSH_KNOWN_HOSTS adds "
                 "UserKnownHostsFile=FILE unless one is given here")
      ->group(group);
  cmd.add_option("--ssh-timeout", f.ssh_timeout,
                 "Hard deadline per node, after which its ssh is killed (hung nvidia-smi)")
      ->default_str("60s")
      ->group(group);
  cmd.add_option("--connect-timeout", f.connect_timeout,
                 "How long to wait for a node's ssh connection (default 10s, or half of a shorter --ssh-timeout)")
      ->group(group);
  cmd.add_option("--fanout", f.fanout, "How many nodes to reach at once")
      ->default_str("32")
      ->check(CLI::Range(1, 1024))
      ->group(group);
  cmd.add_option("--ssh-host-from", f.host_from,
                 "Where a node's ssh address comes from: internal-ip, external-ip, hostname, name, label:KEY, "
                 "annotation:KEY, or a template such as {name}.gpu.example.com")
      ->default_str("internal-ip")
      ->group(group);
}

const char* non_empty(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

namespace {

Result<int> port_from_environment(std::string_view text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
    return fail(Errc::invalid_argument,
                fmt::format("GPUCTL_SSH_PORT=\"{}\": not a port (1-65535); set a port or unset the variable", text));
  }
  return port;
}

}  // namespace

bool has_ssh_option(const std::vector<std::string>& options, std::string_view key) {
  return std::any_of(options.begin(), options.end(), [&](const std::string& o) {
    if (o.size() <= key.size() || o[key.size()] != '=') return false;
    return std::equal(key.begin(), key.end(), o.begin(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    });
  });
}

std::string known_hosts_option(std::string_view path) {
  // ssh splits this option's value at blanks (several files); quotes keep a path with one whole.
  bool blank = path.find_first_of(" \t") != std::string_view::npos;
  return blank ? fmt::format("UserKnownHostsFile=\"{}\"", path) : fmt::format("UserKnownHostsFile={}", path);
}

Result<SshFlags> with_ssh_environment(SshFlags f, const EnvLookup& env) {
  if (const char* v = non_empty(env, "GPUCTL_SSH_CONFIG"); v && f.config_file.empty()) f.config_file = v;
  if (const char* v = non_empty(env, "GPUCTL_SSH_IDENTITY"); v && f.identity_file.empty()) f.identity_file = v;
  if (const char* v = non_empty(env, "GPUCTL_SSH_USER"); v && f.user.empty()) f.user = v;
  if (const char* v = non_empty(env, "GPUCTL_SSH_PORT"); v && f.port == 0) {
    GPUCTL_TRY_ASSIGN(f.port, port_from_environment(v));
  }
  if (const char* v = non_empty(env, "GPUCTL_SSH_KNOWN_HOSTS"); v && !has_ssh_option(f.options, "UserKnownHostsFile")) {
    f.options.push_back(known_hosts_option(v));
  }
  return f;
}

Result<SshRequest> validate_ssh_flags(const SshFlags& flags) {
  return validate_ssh_flags(flags, [](const char* name) -> const char* { return std::getenv(name); });
}

Result<SshRequest> validate_ssh_flags(const SshFlags& flags, const EnvLookup& env) {
  GPUCTL_TRY_ASSIGN(SshFlags f, with_ssh_environment(flags, env));
  SshRequest r;
  r.settings.config_file = f.config_file;
  r.settings.user = f.user;
  r.settings.port = f.port;
  r.settings.identity_file = f.identity_file;
  r.settings.options = f.options;
  auto deadline = util::parse_duration(f.ssh_timeout);
  if (!deadline) return fail(deadline.error().with_context("--ssh-timeout"));
  r.settings.deadline = *deadline;
  if (f.connect_timeout.empty()) {
    r.settings.connect_timeout = std::min<std::chrono::milliseconds>(std::chrono::seconds(10), *deadline / 2);
  } else {
    auto connect = util::parse_duration(f.connect_timeout);
    if (!connect) return fail(connect.error().with_context("--connect-timeout"));
    r.settings.connect_timeout = *connect;
  }
  r.probe.fanout = f.fanout;
  GPUCTL_TRY(ssh::validate(r.settings));
  GPUCTL_TRY_ASSIGN(r.address_rule, ssh::parse_address_rule(f.host_from));
  return r;
}

}  // namespace gpuctl::cli
