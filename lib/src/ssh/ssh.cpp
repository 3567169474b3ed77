#include "gpuctl/ssh/ssh.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/strings.hpp"
#include "gpuctl/util/utf8.hpp"

namespace gpuctl::ssh {

namespace {

long long seconds_ceil(std::chrono::milliseconds d) { return std::max<long long>(1, (d.count() + 999) / 1000); }

constexpr std::size_t kMaxStderrLine = 300;
using util::contains;

std::string seconds_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? fmt::format("{}s", d.count() / 1000) : fmt::format("{}ms", d.count());
}

}  // namespace

Result<void> validate(const SshSettings& s) {
  for (const auto& o : s.options) {
    auto eq = o.find('=');
    bool bad_chars = std::any_of(o.begin(), o.end(), [](char c) { return c == '\n' || c == '\r' || c == '\0'; });
    if (eq == std::string::npos || eq == 0 || bad_chars) {
      return fail(Errc::invalid_argument,
                  fmt::format("--ssh-option \"{}\": give it as KEY=VALUE, as in --ssh-option ProxyJump=bastion", o));
    }
  }
  if (s.port < 0 || s.port > 65535)
    return fail(Errc::invalid_argument, fmt::format("--ssh-port {}: not a port (1-65535)", s.port));
  if (s.connect_timeout.count() <= 0) return fail(Errc::invalid_argument, "--connect-timeout must be more than 0");
  if (s.deadline <= s.connect_timeout) {
    return fail(Errc::invalid_argument, fmt::format("--ssh-timeout ({}) must be longer than --connect-timeout ({})",
                                                    seconds_text(s.deadline), seconds_text(s.connect_timeout)));
  }
  return {};
}

std::vector<std::string> ssh_argv(const SshSettings& s, std::string_view address, std::string_view remote_command) {
  std::vector<std::string> argv = {s.program};
  if (!s.config_file.empty()) argv.insert(argv.end(), {"-F", s.config_file});
  // BatchMode: never prompt (a password or passphrase prompt would hang the fan-out).
  // ServerAlive: a session whose host went away ends before the hard deadline.
  argv.insert(argv.end(),
              {"-o", "BatchMode=yes", "-o", fmt::format("ConnectTimeout={}", seconds_ceil(s.connect_timeout)), "-o",
               "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"});
  if (!s.user.empty()) argv.insert(argv.end(), {"-l", s.user});
  if (s.port > 0) argv.insert(argv.end(), {"-p", std::to_string(s.port)});
  if (!s.identity_file.empty()) argv.insert(argv.end(), {"-i", s.identity_file});
  for (const auto& o : s.options) argv.insert(argv.end(), {"-o", o});
  argv.emplace_back("--");
  argv.emplace_back(address);
  argv.emplace_back(remote_command);
  return argv;
}

std::string_view to_string(HostOutcome outcome) {
  switch (outcome) {
    case HostOutcome::ok: return "ok";
    case HostOutcome::unreachable: return "unreachable";
    case HostOutcome::auth_failed: return "auth_failed";
    case HostOutcome::host_key_mismatch: return "host_key_mismatch";
    case HostOutcome::timed_out: return "timed_out";
    case HostOutcome::ssh_missing: return "ssh_missing";
    case HostOutcome::ssh_error: return "ssh_error";
    case HostOutcome::interrupted: return "interrupted";
  }
  return "ssh_error";
}

SshVerdict classify_ssh_run(const util::ProcessResult& run, const SshSettings& s) {
  if (run.interrupted) {
    // One message for started and not-started hosts, so they group into one line.
    std::string by = util::cancel_signal_name();
    return {HostOutcome::interrupted,
            fmt::format("gpuctl was interrupted{} before the node answered (re-run to probe it)",
                        by.empty() ? "" : " by " + by)};
  }
  if (run.start_error != 0) {
    return {HostOutcome::ssh_missing,
            fmt::format("cannot run {}: {} (install openssh-client)", s.program, util::describe_outcome(run))};
  }
  if (run.timed_out) {
    return {HostOutcome::timed_out,
            fmt::format("no answer within --ssh-timeout {}: the node or its nvidia-smi hangs (killed)",
                        seconds_text(s.deadline))};
  }
  if (run.exit_code != 255) return {HostOutcome::ok, ""};
  const std::string& e = run.stderr_text;
  if (contains(e, "REMOTE HOST IDENTIFICATION HAS CHANGED") || contains(e, "Host key verification failed") ||
      contains(e, "No matching host key") || contains(e, "host key is known")) {
    return {HostOutcome::host_key_mismatch,
            "host key verification failed: the node's key is not the one in known_hosts (reinstalled? check, then "
            "update known_hosts)"};
  }
  if (contains(e, "Permission denied") || contains(e, "Too many authentication failures")) {
    return {HostOutcome::auth_failed, "authentication failed (Permission denied): check --ssh-user and --ssh-identity"};
  }
  if (contains(e, "Connection timed out") || contains(e, "Operation timed out")) {
    return {HostOutcome::unreachable, fmt::format("connection timed out after {}: no route to the node, or it is down",
                                                  seconds_text(s.connect_timeout))};
  }
  if (contains(e, "Connection refused")) return {HostOutcome::unreachable, "connection refused: sshd is not listening"};
  if (contains(e, "No route to host")) return {HostOutcome::unreachable, "no route to host"};
  if (contains(e, "Network is unreachable")) return {HostOutcome::unreachable, "network is unreachable"};
  if (contains(e, "Could not resolve hostname")) {
    return {HostOutcome::unreachable, "could not resolve the host name (see --ssh-host-from)"};
  }
  if (contains(e, "Connection closed") || contains(e, "Connection reset")) {
    return {HostOutcome::unreachable, "the connection was closed before the session started"};
  }
  std::string last;
  for (std::size_t start = 0; start < e.size();) {
    auto end = e.find('\n', start);
    std::string line = e.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() && line.find_first_not_of(" \r\t") != std::string::npos) last = line;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  // ssh's stderr is bytes from anywhere (a ProxyCommand, a remote banner): keep what is valid
  // UTF-8, so the message can go into -o json, and bounded, so one host cannot flood the summary.
  last.resize(util::valid_utf8_prefix(std::string_view(last).substr(0, kMaxStderrLine)));
  return {HostOutcome::ssh_error, last.empty() ? "ssh failed (exit 255)" : "ssh failed: " + last};
}

Result<AddressRule> parse_address_rule(std::string_view text) {
  AddressRule rule;
  if (text == "internal-ip") return rule;
  if (text == "external-ip") {
    rule.kind = AddressRule::Kind::external_ip;
    return rule;
  }
  if (text == "hostname") {
    rule.kind = AddressRule::Kind::hostname;
    return rule;
  }
  if (text == "name") {
    rule.kind = AddressRule::Kind::node_name;
    return rule;
  }
  for (auto [prefix, kind] : {std::pair{std::string_view("label:"), AddressRule::Kind::label},
                              std::pair{std::string_view("annotation:"), AddressRule::Kind::annotation}}) {
    if (text.starts_with(prefix) && text.size() > prefix.size()) {
      rule.kind = kind;
      rule.key = std::string(text.substr(prefix.size()));
      return rule;
    }
  }
  if (contains(text, "{name}")) {
    rule.kind = AddressRule::Kind::name_template;
    rule.key = std::string(text);
    return rule;
  }
  return fail(
      Errc::invalid_argument,
      fmt::format("--ssh-host-from \"{}\": use internal-ip, external-ip, hostname, name, label:KEY, annotation:KEY "
                  "or a template with {{name}} such as {{name}}.gpu.example.com",
                  text));
}

Result<std::string> node_ssh_address(const nlohmann::json& node, const AddressRule& rule) {
  const std::string name = kube::name_of(node);
  std::string address;
  std::string what;
  switch (rule.kind) {
    case AddressRule::Kind::internal_ip:
      address = kube::node_address(node, "InternalIP"), what = "no InternalIP address";
      break;
    case AddressRule::Kind::external_ip:
      address = kube::node_address(node, "ExternalIP"), what = "no ExternalIP address";
      break;
    case AddressRule::Kind::hostname:
      address = kube::node_address(node, "Hostname"), what = "no Hostname address";
      break;
    case AddressRule::Kind::node_name: address = name; break;
    case AddressRule::Kind::label:
      address = kube::label_of(node, rule.key).value_or(""), what = "no label " + rule.key;
      break;
    case AddressRule::Kind::annotation:
      address = kube::annotation_of(node, rule.key).value_or(""), what = "no annotation " + rule.key;
      break;
    case AddressRule::Kind::name_template: {
      address = rule.key;
      for (auto at = address.find("{name}"); at != std::string::npos; at = address.find("{name}", at + name.size())) {
        address.replace(at, 6, name);
      }
      break;
    }
  }
  if (address.empty()) {
    return fail(Errc::config, fmt::format("node {} has {} to reach it at: choose another --ssh-host-from", name, what));
  }
  bool plain = address.front() != '-' && std::all_of(address.begin(), address.end(), [](char c) {
                 return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '-' || c == ':' || c == '_' || c == '%' || c == '[' || c == ']';
               });
  if (!plain) {
    return fail(Errc::config,
                fmt::format("node {}: \"{}\" is not a host name or IP address; refusing to ssh to it", name, address));
  }
  return address;
}

}  // namespace gpuctl::ssh
