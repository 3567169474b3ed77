// The Prometheus HTTP API client of `--via prometheus`: GET /api/v1/query through kube::Transport,
// the credentials a Prometheus client takes, the answer read into series, and every failure made
// into one line that names the fix. Secrets are never part of a message; URLs go through
// kube::redact_url.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/fleet/prometheus_source.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

// RFC 4648 base64 for the Basic credentials (the kube module's encoder is private to it).
std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[v & 63] : '=');
  }
  return out;
}

Error error_of(Errc code, std::string message, int http_status = 0) {
  Error e;
  e.code = code;
  e.message = std::move(message);
  e.http_status = http_status;
  return e;
}

// The transport's own reason (libcurl's words) out of its message, which is written for the API
// server ("cannot connect to the API server X (REASON); is it running and is the kubeconfig's
// server address right?"): the kubeconfig advice would mislead here.
std::string transport_reason(const std::string& message) {
  auto open = message.find(" (");
  auto close = message.rfind("); ");
  if (open != std::string::npos && close != std::string::npos && close > open) {
    return message.substr(open + 2, close - open - 2);
  }
  auto colon = message.find(": ");
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

std::string base_url(const PrometheusOptions& options) {
  std::string url = options.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// Prometheus writes sample values as strings: numbers, "NaN", "+Inf", "-Inf".
std::optional<double> sample_value(const json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_string()) return std::nullopt;
  const std::string& text = pair[1].get_ref<const std::string&>();
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return value;
}

Error not_prometheus(std::string_view url, std::string_view what) {
  return error_of(Errc::parse,
                  fmt::format("{} answered {}, not Prometheus' API JSON: is --prometheus-url the Prometheus server "
                              "(e.g. http://prometheus.monitoring:9090, without /api/v1)?",
                              kube::redact_url(url), what));
}

// A refused query: Prometheus' own errorType and error, when the body has them.
std::optional<Error> api_error(const json& body, int http_status) {
  if (!body.is_object() || body.value("status", "") != "error") return std::nullopt;
  return error_of(Errc::api,
                  fmt::format("Prometheus refused the query ({}): {}", body.value("errorType", "error"),
                              body.value("error", "no reason given")),
                  http_status);
}

Result<std::vector<PromSample>> vector_of(const json& doc, std::string_view url) {
  if (doc.is_discarded() || !doc.is_object()) return std::unexpected(not_prometheus(url, "a body that is not JSON"));
  if (auto refused = api_error(doc, 200)) return std::unexpected(*refused);
  const json& data = kube::field(doc, "data");
  if (doc.value("status", "") != "success" || !data.is_object()) {
    return std::unexpected(not_prometheus(url, "JSON without status and data"));
  }
  if (data.value("resultType", "") != "vector" || !kube::field(data, "result").is_array()) {
    return std::unexpected(not_prometheus(url, fmt::format("a {} result", data.value("resultType", "missing"))));
  }
  std::vector<PromSample> samples;
  for (const json& item : data["result"]) {
    PromSample sample;
    auto value = sample_value(kube::field(item, "value"));
    if (!value) continue;  // a series without a readable sample says nothing
    sample.value = *value;
    const json& metric = kube::field(item, "metric");
    if (metric.is_object()) {
      for (const auto& [name, text] : metric.items()) {
        if (text.is_string()) sample.labels.emplace(name, text.get<std::string>());
      }
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace

Result<std::vector<PromSample>> parse_prometheus_vector(std::string_view body, std::string_view url) {
  return vector_of(json::parse(body, nullptr, false), url);
}

Result<std::vector<PromSample>> prometheus_query(kube::Transport& transport, const PrometheusOptions& options,
                                                 std::string_view promql, std::chrono::milliseconds time_unix) {
  const std::string url = base_url(options) + "/api/v1/query";
  kube::HttpRequest request;
  request.url = fmt::format("{}?query={}&time={}.{:03}", url, kube::percent_encode(promql), time_unix.count() / 1000,
                            time_unix.count() % 1000);
  request.headers.emplace_back("Accept", "application/json");
  if (!options.bearer_token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + options.bearer_token);
  } else if (!options.basic_user.empty()) {
    request.headers.emplace_back("Authorization", "Basic " + base64(options.basic_user + ":" + options.basic_password));
  }
  request.client_cert_pem = options.client_cert_pem;
  request.client_key_pem = options.client_key_pem;
  request.timeout = options.timeout;

  auto response = transport.send(request);
  if (!response) {
    Error e = response.error();
    if (e.code == Errc::cancelled) return std::unexpected(e);
    e.message = fmt::format(
        "Prometheus at {} could not be reached ({}); check --prometheus-url (or $GPUCTL_PROMETHEUS_URL) and, for "
        "https, --prometheus-ca-file",
        kube::redact_url(url), kube::redact_urls_in(transport_reason(e.message)));
    return std::unexpected(e);
  }
  const int status = response->status;
  if (status == 401 || status == 403) {
    return std::unexpected(error_of(
        Errc::config,
        fmt::format("Prometheus at {} refused the credentials (HTTP {}): check --prometheus-bearer-token-file, "
                    "or --prometheus-username with --prometheus-password-file, or the client certificate "
                    "(--prometheus-cert-file, --prometheus-key-file)",
                    kube::redact_url(url), status),
        status));
  }
  json doc = json::parse(response->body, nullptr, false);
  if (auto refused = api_error(doc, status)) return std::unexpected(*refused);
  if (status != 200) {
    if (status >= 500) {
      return std::unexpected(error_of(
          Errc::api, fmt::format("Prometheus at {} answered HTTP {}; try again later", kube::redact_url(url), status),
          status));
    }
    return std::unexpected(not_prometheus(url, fmt::format("HTTP {}", status)));
  }
  return vector_of(doc, url);
}

kube::TransportSettings prometheus_transport_settings(const PrometheusOptions& options) {
  kube::TransportSettings settings;
  settings.ca_pem = options.ca_pem;
  settings.insecure_skip_tls_verify = options.insecure_skip_tls_verify;
  settings.request_timeout = options.timeout;
  settings.connect_timeout = std::min<std::chrono::milliseconds>(settings.connect_timeout, options.timeout);
  return settings;
}

}  // namespace gpuctl::ops
