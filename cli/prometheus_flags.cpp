#include "prometheus_flags.hpp"

#include <cctype>

#include <fmt/format.h>

#include "gpuctl/util/time.hpp"
#include "input_file.hpp"

namespace gpuctl::cli {

namespace {

constexpr const char* kUrlVariable = "GPUCTL_PROMETHEUS_URL";
constexpr const char* kTokenVariable = "GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE";
constexpr std::size_t kMaxCredentialFileBytes = std::size_t{1} << 20;

bool is_label_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '_') return false;
  }
  return true;
}

Result<void> set_label(ops::DcgmLabelMapping& mapping, std::string_view spec) {
  auto eq = spec.find('=');
  std::string role(spec.substr(0, eq));
  std::string value(eq == std::string_view::npos ? "" : spec.substr(eq + 1));
  std::vector<std::string> names;
  for (std::size_t start = 0; start <= value.size();) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    names.push_back(value.substr(start, comma - start));
    start = comma + 1;
  }
  for (const auto& name : names) {
    if (!is_label_name(name)) {
      return fail(Errc::invalid_argument,
                  fmt::format("--prometheus-label {}: \"{}\" is not a Prometheus label name; write ROLE=LABEL, "
                              "e.g. node=kubernetes_node",
                              spec, name));
    }
  }
  if (role == "node") {
    mapping.node = names;
    return {};
  }
  if (names.size() != 1) {
    return fail(Errc::invalid_argument, fmt::format("--prometheus-label {}: only node takes a list of labels", spec));
  }
  if (role == "gpu")
    mapping.gpu_index = names[0];
  else if (role == "uuid")
    mapping.uuid = names[0];
  else if (role == "model")
    mapping.model = names[0];
  else if (role == "pci-bus-id")
    mapping.pci_bus_id = names[0];
  else if (role == "driver")
    mapping.driver_version = names[0];
  else {
    return fail(Errc::invalid_argument,
                fmt::format("--prometheus-label {}: unknown role \"{}\"; roles: node, gpu, uuid, model, pci-bus-id, "
                            "driver",
                            spec, role));
  }
  return {};
}

Result<std::string> read_credential(const std::string& path, std::string_view flag, bool trim) {
  auto text = read_input_file(path, kMaxCredentialFileBytes);
  if (!text) {
    return fail(text.error().code, fmt::format("{}: {}", flag, text.error().message));
  }
  // Token and password files end with a newline when written by an editor or `echo`.
  if (trim) {
    while (!text->empty() && std::isspace(static_cast<unsigned char>(text->back()))) text->pop_back();
    if (text->empty()) return fail(Errc::invalid_argument, fmt::format("{} {}: the file is empty", flag, path));
  }
  return *text;
}

}  // namespace

void add_prometheus_flags(CLI::App& cmd, HelpData& help, PrometheusFlags& f) {
  const char* group = "Prometheus options (--via prometheus)";
  cmd.add_option("--prometheus-url", f.url,
                 "The Prometheus server that scrapes dcgm-exporter, e.g. http://prometheus.monitoring:9090; "
                 "default: $GPUCTL_PROMETHEUS_URL")
      ->group(group);
  completes(cmd.add_option("--prometheus-bearer-token-file", f.bearer_token_file,
                           "File holding a bearer token for Prometheus; default: $GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE"),
            help, ValueKind::file)
      ->group(group);
  cmd.add_option("--prometheus-username", f.username,
                 "User for Prometheus' basic auth (with --prometheus-password-file)")
      ->group(group);
  completes(cmd.add_option("--prometheus-password-file", f.password_file, "File holding the basic-auth password"), help,
            ValueKind::file)
      ->group(group);
  completes(cmd.add_option("--prometheus-ca-file", f.ca_file, "CA bundle (PEM) that signed Prometheus' certificate"),
            help, ValueKind::file)
      ->group(group);
  completes(cmd.add_option("--prometheus-cert-file", f.cert_file, "Client certificate (PEM) for Prometheus"), help,
            ValueKind::file)
      ->group(group);
  completes(cmd.add_option("--prometheus-key-file", f.key_file, "Key (PEM) of --prometheus-cert-file"), help,
            ValueKind::file)
      ->group(group);
  cmd.add_flag("--prometheus-insecure-skip-tls-verify", f.insecure_skip_tls_verify,
               "Do not verify Prometheus' certificate (testing only)")
      ->group(group);
  cmd.add_option("--prometheus-stale-after", f.stale_after,
                 "A node whose newest dcgm-exporter sample is older than this is reported stale")
      ->default_str("2m")
      ->group(group);
  cmd.add_option("--prometheus-label", f.labels,
                 "ROLE=LABEL: the series label that names a node (node=A,B: the first present wins; default "
                 "node,Hostname,kubernetes_node,nodename), or a GPU's gpu (gpu), uuid (UUID), model (modelName), "
                 "pci-bus-id (pci_bus_id), driver (DCGM_FI_DRIVER_VERSION); repeatable")
      ->group(group);
}

Result<ops::PrometheusOptions> validate_prometheus_flags(const PrometheusFlags& f, const EnvLookup& env) {
  ops::PrometheusOptions o;
  o.url = f.url;
  if (o.url.empty()) {
    if (const char* v = non_empty(env, kUrlVariable)) o.url = v;
  }
  if (o.url.empty()) {
    return fail(Errc::invalid_argument,
                "--via prometheus needs the Prometheus server: --prometheus-url URL (or $GPUCTL_PROMETHEUS_URL), "
                "e.g. http://prometheus.monitoring:9090");
  }
  const bool https = o.url.rfind("https://", 0) == 0;
  if (!https && o.url.rfind("http://", 0) != 0) {
    return fail(Errc::invalid_argument,
                fmt::format("--prometheus-url {}: not an http:// or https:// URL", kube::redact_url(o.url)));
  }
  const bool token = !f.bearer_token_file.empty() || non_empty(env, kTokenVariable) != nullptr;
  if (token && !f.username.empty()) {
    return fail(Errc::invalid_argument,
                "--prometheus-bearer-token-file and --prometheus-username are two ways to log in: give one");
  }
  if (f.username.empty() != f.password_file.empty()) {
    return fail(Errc::invalid_argument, "basic auth needs both --prometheus-username and --prometheus-password-file");
  }
  if (f.cert_file.empty() != f.key_file.empty()) {
    return fail(Errc::invalid_argument,
                "a client certificate needs both --prometheus-cert-file and --prometheus-key-file");
  }
  if (!https && (!f.ca_file.empty() || !f.cert_file.empty() || f.insecure_skip_tls_verify)) {
    return fail(Errc::invalid_argument,
                "--prometheus-ca-file, --prometheus-cert-file and --prometheus-insecure-skip-tls-verify need an "
                "https:// --prometheus-url");
  }
  if (f.insecure_skip_tls_verify && !f.ca_file.empty()) {
    return fail(Errc::invalid_argument,
                "--prometheus-ca-file and --prometheus-insecure-skip-tls-verify contradict each other: give one");
  }
  o.insecure_skip_tls_verify = f.insecure_skip_tls_verify;
  auto stale = util::parse_duration(f.stale_after);
  if (!stale) return fail(stale.error().with_context("--prometheus-stale-after"));
  if (*stale < std::chrono::seconds(1)) {
    return fail(Errc::invalid_argument,
                fmt::format("--prometheus-stale-after {}: at least 1s (Prometheus' timestamps are in seconds here)",
                            f.stale_after));
  }
  o.stale_after = std::chrono::duration_cast<std::chrono::seconds>(*stale);
  for (const auto& spec : f.labels) GPUCTL_TRY(set_label(o.labels, spec));
  return o;
}

Result<ops::PrometheusOptions> read_prometheus_credentials(ops::PrometheusOptions o, const PrometheusFlags& f,
                                                           const EnvLookup& env) {
  std::string token_file = f.bearer_token_file;
  std::string token_flag = "--prometheus-bearer-token-file";
  if (token_file.empty()) {
    if (const char* v = non_empty(env, kTokenVariable)) {
      token_file = v;
      token_flag = std::string("$") + kTokenVariable;
    }
  }
  if (!token_file.empty()) {
    GPUCTL_TRY_ASSIGN(o.bearer_token, read_credential(token_file, token_flag, true));
  }
  if (!f.username.empty()) {
    o.basic_user = f.username;
    GPUCTL_TRY_ASSIGN(o.basic_password, read_credential(f.password_file, "--prometheus-password-file", true));
  }
  if (!f.ca_file.empty()) {
    GPUCTL_TRY_ASSIGN(o.ca_pem, read_credential(f.ca_file, "--prometheus-ca-file", false));
  }
  if (!f.cert_file.empty()) {
    GPUCTL_TRY_ASSIGN(o.client_cert_pem, read_credential(f.cert_file, "--prometheus-cert-file", false));
    GPUCTL_TRY_ASSIGN(o.client_key_pem, read_credential(f.key_file, "--prometheus-key-file", false));
  }
  return o;
}

}  // namespace gpuctl::cli
