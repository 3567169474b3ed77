#pragma once
// The flags of every command that reaches nodes over ssh (gpus, nodes --live, later diagnose).
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"
#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"

namespace gpuctl::cli {

struct SshFlags {
  std::string config_file;
  std::string user;
  int port = 0;
  std::string identity_file;
  std::vector<std::string> options;
  std::string ssh_timeout = "60s";
  std::string connect_timeout;  // empty: 10s, or half of --ssh-timeout when that is shorter
  int fanout = 32;
  std::string host_from = "internal-ip";
};

void add_ssh_flags(CLI::App& cmd, HelpData& help, SshFlags& flags);

struct SshRequest {
  ssh::SshSettings settings;
  ops::ProbeOptions probe;
  ssh::AddressRule address_rule;
};

// Reads one environment variable: null when unset. Tests pass their own.
using EnvLookup = std::function<const char*(const char*)>;
// The variable's value, or null when it is unset or empty (an empty variable counts as unset).
const char* non_empty(const EnvLookup& env, const char* name);

// The flags with GPUCTL_SSH_CONFIG, _IDENTITY, _USER, _PORT and _KNOWN_HOSTS filled in where the
// matching flag was not given (a flag always wins; an empty variable counts as unset), so that a
// shell prepared once (`cluster.py env`, the sandbox) needs no --ssh-* flags on every command.
Result<SshFlags> with_ssh_environment(SshFlags flags, const EnvLookup& env);

// Whether one of the ssh -o KEY=VALUE options sets `key` (ssh reads keys case-insensitively).
bool has_ssh_option(const std::vector<std::string>& options, std::string_view key);

// The ssh -o option that names a known_hosts file, as GPUCTL_SSH_KNOWN_HOSTS and the config
// file's ssh.knownHosts add it (quoted when the path holds a blank: ssh splits the value there).
std::string known_hosts_option(std::string_view path);

// Validates without I/O, the GPUCTL_SSH_* variables read through env (the first: the process's).
Result<SshRequest> validate_ssh_flags(const SshFlags& flags);
Result<SshRequest> validate_ssh_flags(const SshFlags& flags, const EnvLookup& env);

}  // namespace gpuctl::cli
