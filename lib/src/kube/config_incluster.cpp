// The in-cluster service account (rest.InClusterConfig and clientcmd's
// inClusterClientConfig.Namespace).
#include <fmt/format.h>

#include "kube/config_internal.hpp"

namespace gpuctl::kube::detail {

Result<RestConfig> in_cluster_config(const LoadOptions& options) {
  constexpr const char* kPrefix = "in-cluster configuration";
  const std::string host = options.service_host.value_or("");
  const std::string port = options.service_port.value_or("");
  if (host.empty() || port.empty()) {
    return fail(Errc::config,
                fmt::format("{}: {} is not set (both KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are needed)",
                            kPrefix, host.empty() ? "KUBERNETES_SERVICE_HOST" : "KUBERNETES_SERVICE_PORT"));
  }
  const std::string dir = options.service_account_dir;
  const std::string token_file = dir + "/token";
  auto token = read_text_file(token_file);
  if (!token) return fail(Errc::config, fmt::format("{}: service account token: {}", kPrefix, token.error().message));
  // client-go logs a missing CA and falls back to the system roots; a library cannot log, and
  // the API server's certificate is signed by the cluster CA, so say so now.
  const std::string ca_file = dir + "/ca.crt";
  auto ca = read_text_file(ca_file);
  if (!ca) return fail(Errc::config, fmt::format("{}: service account CA: {}", kPrefix, ca.error().message));
  if (!looks_like_pem(*ca)) {
    return fail(Errc::config, fmt::format("{}: service account CA {}: unable to load root certificates: unable to "
                                          "parse bytes as PEM block",
                                          kPrefix, ca_file));
  }

  RestConfig rc;
  // net.JoinHostPort: an IPv6 address is bracketed.
  const bool ipv6 = host.find(':') != std::string::npos && !host.starts_with("[");
  rc.server = ipv6 ? fmt::format("https://[{}]:{}", host, port) : fmt::format("https://{}:{}", host, port);
  rc.origin = "in-cluster service account";
  rc.bearer_token = trim(*token);
  rc.token_file = token_file;
  rc.ca_pem = std::move(*ca);

  if (options.namespace_name && !options.namespace_name->empty()) {
    rc.namespace_name = *options.namespace_name;
  } else if (options.pod_namespace && !options.pod_namespace->empty()) {
    rc.namespace_name = *options.pod_namespace;
  } else if (auto ns = read_text_file(dir + "/namespace"); ns && !trim(*ns).empty()) {
    rc.namespace_name = trim(*ns);
  }
  return rc;
}

}  // namespace gpuctl::kube::detail
