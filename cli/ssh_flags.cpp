#include "ssh_flags.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/util/time.hpp"

namespace gpuctl::cli {

void add_ssh_flags(CLI::App& cmd, SshFlags& f) {
  const char* group = "SSH options";
  cmd.add_option("--ssh-config", f.config_file, "ssh client configuration file (ssh -F); default: ~/.ssh/config")->group(group);
  cmd.add_option("--ssh-user", f.user, "User to log in as on the nodes (ssh -l)")->group(group);
  cmd.add_option("--ssh-port", f.port, "Port of the nodes' sshd (ssh -p)")->group(group);
  cmd.add_option("--ssh-identity", f.identity_file, "Private key file (ssh -i)")->group(group);
  cmd.add_option("--ssh-option", f.options, "An ssh -o KEY=VALUE option; repeatable (e.g. ProxyJump=bastion)")->group(group);
  cmd.add_option("--ssh-timeout", f.ssh_timeout, "Hard deadline per node, after which its ssh is killed (hung nvidia-smi)")
      ->default_str("60s")
      ->group(group);
  cmd.add_option("--connect-timeout", f.connect_timeout,
                 "How long to wait for a node's ssh connection (default 10s, or half of a shorter --ssh-timeout)")
      ->group(group);
  cmd.add_option("--fanout", f.fanout, "How many nodes to reach at once")->default_str("32")->check(CLI::Range(1, 1024))->group(group);
  cmd.add_option("--ssh-host-from", f.host_from,
                 "Where a node's ssh address comes from: internal-ip, external-ip, hostname, name, label:KEY, "
                 "annotation:KEY, or a template such as {name}.gpu.example.com")
      ->default_str("internal-ip")
      ->group(group);
}

Result<SshRequest> validate_ssh_flags(const SshFlags& f) {
  SshRequest r;
  r.probe.ssh.config_file = f.config_file;
  r.probe.ssh.user = f.user;
  r.probe.ssh.port = f.port;
  r.probe.ssh.identity_file = f.identity_file;
  r.probe.ssh.options = f.options;
  auto deadline = util::parse_duration(f.ssh_timeout);
  if (!deadline) return fail(deadline.error().with_context("--ssh-timeout"));
  r.probe.ssh.deadline = *deadline;
  if (f.connect_timeout.empty()) {
    r.probe.ssh.connect_timeout = std::min<std::chrono::milliseconds>(std::chrono::seconds(10), *deadline / 2);
  } else {
    auto connect = util::parse_duration(f.connect_timeout);
    if (!connect) return fail(connect.error().with_context("--connect-timeout"));
    r.probe.ssh.connect_timeout = *connect;
  }
  r.probe.fanout = f.fanout;
  GPUCTL_TRY(ssh::validate(r.probe.ssh));
  GPUCTL_TRY_ASSIGN(r.address_rule, ssh::parse_address_rule(f.host_from));
  return r;
}

}  // namespace gpuctl::cli
