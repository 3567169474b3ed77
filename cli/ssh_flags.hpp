#pragma once
// The flags of every command that reaches nodes over ssh (gpus, nodes --live, later diagnose).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/gpus.hpp"

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

void add_ssh_flags(CLI::App& cmd, SshFlags& flags);

struct SshRequest {
  ops::ProbeOptions probe;
  ssh::AddressRule address_rule;
};
// Validates without I/O.
Result<SshRequest> validate_ssh_flags(const SshFlags& flags);

}  // namespace gpuctl::cli
