// Exec credential plugins, as client-go's plugin/pkg/client/auth/exec runs them: the request in
// KUBERNETES_EXEC_INFO, the plugin's stderr to the user, an ExecCredential of the same
// apiVersion on stdout, and the result cached in this process until it expires.
#include "gpuctl/kube/exec_credential.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/util/process.hpp"
#include "kube/config_internal.hpp"

namespace gpuctl::kube {
namespace {

using std::chrono::system_clock;

bool digits(std::string_view s, std::size_t pos, std::size_t count, int& out) {
  if (pos + count > s.size()) return false;
  auto [ptr, ec] = std::from_chars(s.data() + pos, s.data() + pos + count, out);
  return ec == std::errc() && ptr == s.data() + pos + count;
}

// RFC 3339 (Go's time.RFC3339 layout, which also accepts fractional seconds).
std::optional<system_clock::time_point> parse_rfc3339(std::string_view s) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (s.size() < 20 || !digits(s, 0, 4, year) || s[4] != '-' || !digits(s, 5, 2, month) || s[7] != '-' ||
      !digits(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') || !digits(s, 11, 2, hour) || s[13] != ':' ||
      !digits(s, 14, 2, minute) || s[16] != ':' || !digits(s, 17, 2, second)) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  std::chrono::nanoseconds fraction{0};
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t start = pos;
    long long nanos = 0;
    int scale = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (scale < 9) {
        nanos = nanos * 10 + (s[pos] - '0');
        ++scale;
      }
      ++pos;
    }
    if (pos == start) return std::nullopt;
    for (; scale < 9; ++scale) nanos *= 10;
    fraction = std::chrono::nanoseconds(nanos);
  }
  std::chrono::minutes offset{0};
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0;
    if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, om) ||
        oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = std::chrono::hours(oh) + std::chrono::minutes(om);
    if (s[pos] == '-') offset = -offset;
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  std::chrono::year_month_day date{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                                   std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  auto tp = std::chrono::sys_days(date) + std::chrono::hours(hour) + std::chrono::minutes(minute) +
            std::chrono::seconds(second) + fraction - offset;
  return std::chrono::time_point_cast<system_clock::duration>(tp);
}

bool same_credential(const ExecCredential& a, const ExecCredential& b) {
  return a.token == b.token && a.client_cert_pem == b.client_cert_pem && a.client_key_pem == b.client_key_pem &&
         a.expiration == b.expiration;
}

// The text after "[json.exception.parse_error.101] ".
std::string json_error_text(const std::exception& e) {
  std::string text = e.what();
  if (text.starts_with("[json.exception.")) {
    auto end = text.find("] ");
    if (end != std::string::npos) text = text.substr(end + 2);
  }
  return text;
}

struct Failure {
  Errc code;
  std::string text;
};

std::unexpected<Failure> failure(Errc code, std::string text) {
  return std::unexpected<Failure>(Failure{code, std::move(text)});
}

// The ExecCredential the plugin printed.
std::expected<ExecCredential, Failure> decode_output(const std::string& out, const std::string& api_version) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    return failure(Errc::process, "decoding stdout: not an ExecCredential in JSON: " + json_error_text(e));
  }
  if (!doc.is_object()) return failure(Errc::process, "decoding stdout: not an ExecCredential: expected a JSON object");
  auto string_field = [](const nlohmann::json& obj, const char* key) -> std::optional<std::string> {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::string();
    if (!it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  auto kind = string_field(doc, "kind");
  if (!kind || kind->empty())
    return failure(Errc::process, "decoding stdout: Object 'Kind' is missing (want ExecCredential)");
  if (*kind != "ExecCredential") {
    return failure(Errc::process, fmt::format("decoding stdout: kind is \"{}\", want ExecCredential", *kind));
  }
  auto version = string_field(doc, "apiVersion");
  if (!version || version->empty()) return failure(Errc::process, "decoding stdout: Object 'apiVersion' is missing");
  if (*version != api_version) {
    return failure(Errc::process,
                   fmt::format("exec plugin is configured to use API version {}, plugin returned version {}",
                               api_version, *version));
  }
  auto status_it = doc.find("status");
  if (status_it == doc.end() || status_it->is_null()) {
    return failure(Errc::process, "exec plugin didn't return a status field");
  }
  if (!status_it->is_object()) return failure(Errc::process, "decoding stdout: status: expected a JSON object");
  const nlohmann::json& status = *status_it;
  ExecCredential cred;
  const std::pair<const char*, std::string*> fields[] = {{"token", &cred.token},
                                                         {"clientCertificateData", &cred.client_cert_pem},
                                                         {"clientKeyData", &cred.client_key_pem}};
  for (const auto& [key, target] : fields) {
    auto value = string_field(status, key);
    if (!value) return failure(Errc::process, fmt::format("decoding stdout: status.{}: expected a string", key));
    *target = std::move(*value);
  }
  auto expiry = string_field(status, "expirationTimestamp");
  if (!expiry) return failure(Errc::process, "decoding stdout: status.expirationTimestamp: expected a string");
  if (!expiry->empty()) {
    auto when = parse_rfc3339(*expiry);
    if (!when) {
      return failure(
          Errc::process,
          fmt::format("decoding stdout: status.expirationTimestamp: \"{}\" is not an RFC 3339 time", *expiry));
    }
    cred.expiration = *when;
  }
  if (cred.token.empty() && cred.client_cert_pem.empty() && cred.client_key_pem.empty()) {
    return failure(Errc::process, "exec plugin didn't return a token or cert/key pair");
  }
  if (cred.client_cert_pem.empty() != cred.client_key_pem.empty()) {
    return failure(Errc::process, "exec plugin returned only certificate or key, not both");
  }
  if (!cred.client_cert_pem.empty() && !detail::looks_like_pem(cred.client_cert_pem)) {
    return failure(Errc::process,
                   "failed parsing client key/certificate: tls: failed to find any PEM data in certificate input");
  }
  if (!cred.client_key_pem.empty() && !detail::looks_like_pem(cred.client_key_pem)) {
    return failure(Errc::process,
                   "failed parsing client key/certificate: tls: failed to find any PEM data in key input");
  }
  return cred;
}

// KUBERNETES_EXEC_INFO: an ExecCredential with spec.interactive, and spec.cluster when the
// kubeconfig asks for it (provideClusterInfo).
std::string exec_info(const RestConfig& config, const ExecConfig& exec, bool interactive) {
  nlohmann::ordered_json spec = nlohmann::ordered_json::object();
  if (exec.provide_cluster_info) {
    nlohmann::ordered_json cluster = nlohmann::ordered_json::object();
    cluster["server"] = config.server;
    if (!config.tls_server_name.empty()) cluster["tls-server-name"] = config.tls_server_name;
    if (config.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
    if (!config.ca_pem.empty()) cluster["certificate-authority-data"] = detail::base64_encode(config.ca_pem);
    if (!config.proxy_url.empty()) cluster["proxy-url"] = config.proxy_url;
    if (config.disable_compression) cluster["disable-compression"] = true;
    cluster["config"] = config.exec_cluster_config_json.empty()
                            ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json::parse(config.exec_cluster_config_json, nullptr, false);
    spec["cluster"] = std::move(cluster);
  }
  spec["interactive"] = interactive;
  nlohmann::ordered_json info = nlohmann::ordered_json::object();
  info["kind"] = "ExecCredential";
  info["apiVersion"] = exec.api_version;
  info["spec"] = std::move(spec);
  return info.dump();
}

std::string not_found_message(const ExecConfig& exec, bool in_path) {
  std::string text = in_path ? fmt::format("exec: executable {} not found", exec.command)
                             : fmt::format("exec: fork/exec {}: no such file or directory", exec.command);
  text += fmt::format(
      "; it looks like you are trying to use a client-go credential plugin that is not installed (to learn more "
      "about this feature, consult the documentation available at: {})",
      detail::kCredentialPluginDocs);
  if (!exec.install_hint.empty()) text += "; " + exec.install_hint;
  return text;
}

}  // namespace

ExecCredentialSource::ExecCredentialSource(const RestConfig& config, bool stdin_is_terminal, Clock clock,
                                           Notice on_notice)
    : config_(config),
      stdin_is_terminal_(stdin_is_terminal),
      clock_(clock ? std::move(clock) : Clock([] { return system_clock::now(); })),
      on_notice_(std::move(on_notice)) {}

Result<ExecCredential> ExecCredentialSource::get() {
  std::lock_guard lock(mutex_);
  // Valid up to and including the expiration instant (client-go: now.After(exp) expires it).
  if (cached_ && (!cached_->expiration || clock_() <= *cached_->expiration)) return *cached_;
  GPUCTL_TRY_ASSIGN(ExecCredential fresh, run_plugin());
  cached_ = fresh;
  return fresh;
}

Result<ExecCredential> ExecCredentialSource::refresh(const ExecCredential& stale) {
  std::lock_guard lock(mutex_);
  // Another request already replaced the credential that was refused: use the new one.
  if (cached_ && !same_credential(*cached_, stale) && (!cached_->expiration || clock_() <= *cached_->expiration)) {
    return *cached_;
  }
  GPUCTL_TRY_ASSIGN(ExecCredential fresh, run_plugin());
  cached_ = fresh;
  return fresh;
}

Result<ExecCredential> ExecCredentialSource::run_plugin() {
  std::string who = config_.origin.empty() ? "" : config_.origin + ": ";
  who += fmt::format("user \"{}\": getting credentials: ", config_.user);
  auto error = [&](Errc code, const std::string& text) { return fail(code, who + text); };
  if (!config_.exec) return error(Errc::config, "no exec credential plugin is configured");
  const ExecConfig& exec = *config_.exec;
  if (exec.api_version != detail::kExecApiV1 && exec.api_version != detail::kExecApiV1beta1) {
    return error(Errc::config, fmt::format("exec plugin: invalid apiVersion \"{}\"", exec.api_version));
  }

  bool interactive = false;
  if (exec.interactive_mode == "Never") {
    interactive = false;
  } else if (exec.interactive_mode == "IfAvailable") {
    interactive = stdin_is_terminal_;
  } else if (exec.interactive_mode == "Always") {
    if (!stdin_is_terminal_) {
      return error(Errc::config,
                   "exec plugin cannot support interactive mode: standard input is not a terminal "
                   "(interactiveMode is Always; run gpuctl from a terminal)");
    }
    interactive = true;
  } else {
    return error(Errc::config,
                 fmt::format("exec plugin cannot support interactive mode: unknown interactiveMode: \"{}\"",
                             exec.interactive_mode));
  }

  util::ProcessOptions options;
  options.argv.push_back(exec.command);
  options.argv.insert(options.argv.end(), exec.args.begin(), exec.args.end());
  for (const auto& var : exec.env) options.extra_env.emplace_back(var.name, var.value);
  options.extra_env.emplace_back("KUBERNETES_EXEC_INFO", exec_info(config_, exec, interactive));
  options.capture_stderr = false;  // the plugin explains itself (or prompts) on the user's terminal
  options.pass_stdin = interactive;
  // Like kubectl, no timeout (a plugin may wait for a browser login) and the plugin stays in
  // our process group: it can read the terminal, and Ctrl-C reaches it too.
  options.own_process_group = false;
  options.max_output_bytes = kMaxExecOutputBytes;
  if (on_notice_) {
    options.notice_after = kExecNoticeAfter;
    options.on_notice = [this, &exec] {
      on_notice_(fmt::format(
          "still waiting for the exec credential plugin {} (user \"{}\") after {}s; it may be waiting for a login; "
          "Ctrl-C stops it",
          exec.command, config_.user, kExecNoticeAfter.count()));
    };
  }

  GPUCTL_TRY_ASSIGN(util::ProcessResult result, util::run_process(options));
  if (!result.started()) {
    if (result.start_error == ENOENT) {
      return error(Errc::process, not_found_message(exec, exec.command.find('/') == std::string::npos));
    }
    return error(Errc::process, fmt::format("exec: fork/exec {}: {}", exec.command, std::strerror(result.start_error)));
  }
  if (result.output_too_large) {
    return error(Errc::process, fmt::format("exec: executable {} wrote more than {} MiB to stdout (the limit for an "
                                            "ExecCredential) and was stopped; check the plugin",
                                            exec.command, kMaxExecOutputBytes >> 20));
  }
  if (result.term_signal != 0) {
    return error(Errc::process, fmt::format("exec: executable {} {}", exec.command, util::describe_outcome(result)));
  }
  if (result.exit_code != 0) {
    return error(Errc::process,
                 fmt::format("exec: executable {} failed with exit code {}", exec.command, result.exit_code));
  }
  auto cred = decode_output(result.stdout_text, exec.api_version);
  if (!cred) return error(cred.error().code, cred.error().text);
  return *cred;
}

}  // namespace gpuctl::kube
