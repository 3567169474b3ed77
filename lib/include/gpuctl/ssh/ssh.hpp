#pragma once
// Reaching nodes with the system `ssh`: the argv gpuctl runs (never a local shell, so the
// admin's ~/.ssh/config, agent, ProxyJump and ControlMaster apply as they set them up), which
// address a node is reached at, and what a failed ssh run means.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/util/process.hpp"

namespace gpuctl::ssh {

struct SshSettings {
  std::string program = "ssh";
  std::string config_file;           // -F
  std::string user;                  // -l
  int port = 0;                      // -p; 0: ssh's own choice
  std::string identity_file;         // -i
  std::vector<std::string> options;  // each -o KEY=VALUE, after gpuctl's own
  std::chrono::milliseconds connect_timeout{10'000};
  // Hard deadline for the whole session; then the ssh process group is killed.
  std::chrono::milliseconds deadline{60'000};
};

// No I/O: options are KEY=VALUE, the port is a port, the deadline exceeds the connect timeout.
Result<void> validate(const SshSettings& settings);

// ssh [-F cfg] -o BatchMode=yes -o ConnectTimeout=N -o ServerAliveInterval=.. -o ServerAliveCountMax=..
//     [-l user] [-p port] [-i key] [-o opt]... -- ADDRESS REMOTE_COMMAND
// Host-key checking is left as the user configured it.
std::vector<std::string> ssh_argv(const SshSettings& settings, std::string_view address,
                                  std::string_view remote_command);

enum class HostOutcome {
  ok,                 // ssh worked; the remote command's own result is the caller's to read
  unreachable,        // connect timed out, refused, no route, name not resolved
  auth_failed,        // "Permission denied (publickey)"
  host_key_mismatch,  // known_hosts holds another key, or none and checking is strict
  timed_out,          // hung: the deadline killed it
  ssh_missing,        // the ssh program could not be started
  ssh_error,          // ssh failed (exit 255) for another reason
  interrupted,        // gpuctl was interrupted (Ctrl-C, SIGTERM) before the node answered
};
std::string_view to_string(HostOutcome outcome);

struct SshVerdict {
  HostOutcome outcome = HostOutcome::ok;
  std::string message;  // one line, no address in it (so identical failures group)
};
// Reads ssh's own failures from its exit status and stderr; ok when the remote command ran.
SshVerdict classify_ssh_run(const util::ProcessResult& run, const SshSettings& settings);

// Which address a node is reached at (--ssh-host-from).
struct AddressRule {
  enum class Kind { internal_ip, external_ip, hostname, node_name, label, annotation, name_template };
  Kind kind = Kind::internal_ip;
  std::string key;  // label/annotation key, or the template ("{name}.gpu.example.com")
};
// "internal-ip", "external-ip", "hostname", "name", "label:KEY", "annotation:KEY", or a template
// containing "{name}".
Result<AddressRule> parse_address_rule(std::string_view text);
// The address of this node by the rule; an error naming the node and the missing field. The
// result is checked to be a plain host name or IP address (it becomes one argv element, after
// "--", so it can never be read as an option).
Result<std::string> node_ssh_address(const nlohmann::json& node, const AddressRule& rule);

}  // namespace gpuctl::ssh
