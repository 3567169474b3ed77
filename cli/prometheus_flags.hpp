#pragma once
// The flags of `--via prometheus` (issue 21): where Prometheus is, how to log in to it, when its
// samples count as stale and which labels name a series' node and GPU. The command that offers
// `--via` adds them; validate (no I/O) then read_prometheus_credentials (the files) make the
// options of ops::make_prometheus_source.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"
#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/prometheus_source.hpp"
#include "ssh_flags.hpp"

namespace gpuctl::cli {

struct PrometheusFlags {
  std::string url;                // --prometheus-url, else $GPUCTL_PROMETHEUS_URL
  std::string bearer_token_file;  // else $GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE
  std::string username;
  std::string password_file;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool insecure_skip_tls_verify = false;
  std::string stale_after = "2m";
  std::vector<std::string> labels;  // ROLE=LABEL, repeatable
};

void add_prometheus_flags(CLI::App& cmd, HelpData& help, PrometheusFlags& flags);

// No I/O: the URL (flag, else environment), which credentials go together, the duration and the
// label mapping. The file paths stay in `flags` for read_prometheus_credentials.
Result<ops::PrometheusOptions> validate_prometheus_flags(const PrometheusFlags& flags, const EnvLookup& env);

// Reads the token, password, CA, certificate and key files named by the flags (or the token file
// of $GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE) into `options`; a file that cannot be read is a
// one-line error naming the flag and the path.
Result<ops::PrometheusOptions> read_prometheus_credentials(ops::PrometheusOptions options, const PrometheusFlags& flags,
                                                           const EnvLookup& env);

}  // namespace gpuctl::cli
