// What rest.Config.TransportConfig and transport.TLSConfigFor refuse of the selected user and
// cluster, and what they set: the credentials (token, client certificate, basic auth, exec plugin
// with its apiVersion, auth-provider refusals) and TLS (CA, insecure, tls-server-name, PEM data).
#include <fmt/format.h>

#include "gpuctl/kube/transport.hpp"
#include "kube/config_internal.hpp"

namespace gpuctl::kube::detail {
namespace {

std::optional<std::string> exec_api_version_problem(const std::string& version) {
  if (version == kExecApiV1 || version == kExecApiV1beta1) return std::nullopt;
  if (version == kExecApiV1alpha1) {
    return fmt::format(
        "exec plugin: invalid apiVersion \"{}\": v1alpha1 was removed in Kubernetes 1.24; regenerate the "
        "kubeconfig with a current version of the tool that wrote it (e.g. aws eks update-kubeconfig), or "
        "use {} if the plugin supports it",
        version, kExecApiV1beta1);
  }
  return fmt::format("exec plugin: invalid apiVersion \"{}\" (supported: {}, {})", version, kExecApiV1,
                     kExecApiV1beta1);
}

// auth-provider: only the exec mechanism is supported; the messages for gcp and azure are
// kubectl's own, on one line.
std::string auth_provider_problem(const std::string& name) {
  if (name == "gcp") {
    return "auth-provider \"gcp\": The gcp auth plugin has been removed. Please use the \"gke-gcloud-auth-plugin\" "
           "kubectl/client-go credential plugin instead. See "
           "https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke for further "
           "details";
  }
  if (name == "azure") {
    return fmt::format(
        "auth-provider \"azure\": The azure auth plugin has been removed. Please use the "
        "https://github.com/Azure/kubelogin kubectl/client-go credential plugin instead. See {} for further details",
        kCredentialPluginDocs);
  }
  if (name == "oidc") {
    return fmt::format(
        "auth-provider \"oidc\" is not supported by gpuctl: use an exec credential plugin instead, such as kubelogin "
        "(https://github.com/int128/kubelogin); see {}",
        kCredentialPluginDocs);
  }
  return fmt::format(
      "auth-provider \"{}\": no Auth Provider found for name \"{}\"; gpuctl supports exec credential plugins "
      "instead (e.g. gke-gcloud-auth-plugin, kubelogin; see {})",
      name, name, kCredentialPluginDocs);
}

// Reads a file-or-data pair: data wins (validation already refused both).
Result<std::string> data_or_file(const std::string& data, const std::string& file) {
  if (!data.empty() || file.empty()) return data;
  return read_text_file(file);
}

// kubectl config view prints this instead of certificate data; base64-valid but not PEM.
bool omitted_by_config_view(const std::string& decoded) {
  std::string encoded = base64_encode(decoded);
  return encoded == "DATA+OMITTED" || encoded == "REDACTED";
}

}  // namespace

// Credentials: token, client certificate, basic auth, exec (rest's user identification).
Result<void> add_user_identification(const KcUser& user, const KcCluster& cluster, RestConfig& rc) {
  auto problem = [&](std::string_view field, const std::string& text) {
    std::string prefix = fmt::format("user \"{}\": ", user.name);
    if (!field.empty()) prefix += std::string(field) + ": ";
    return std::unexpected<Error>(combine({{user.origin, prefix + text}}, rc.context));
  };
  if (!user.token.empty()) {
    rc.bearer_token = user.token;
    rc.token_file = user.token_file;
  } else if (!user.token_file.empty()) {
    auto token = read_text_file(user.token_file);
    if (!token) return problem("tokenFile", token.error().message);
    rc.bearer_token = trim(*token);
    rc.token_file = user.token_file;
  }
  rc.username = user.username;
  rc.password = user.password;
  if (user.exec) {
    if (auto p = exec_api_version_problem(user.exec->api_version)) return problem("exec.apiVersion", *p);
    rc.exec = *user.exec;
    rc.exec->install_hint = clean_control_characters(rc.exec->install_hint);
    rc.exec_cluster_config_json = cluster.exec_extension_json;
  }
  if (user.auth_provider) return problem("", auth_provider_problem(*user.auth_provider));
  return {};
}

// TLS: the CA, insecure-skip-tls-verify, tls-server-name and the client key pair
// (transport.TLSConfigFor).
Result<void> add_tls(const KcUser& user, const KcCluster& cluster, RestConfig& rc) {
  auto cluster_problem = [&](std::string_view field, const std::string& text) {
    return std::unexpected<Error>(
        combine({{cluster.origin, fmt::format("cluster \"{}\": {}: {}", cluster.name, field, text)}}, rc.context));
  };
  auto user_problem = [&](std::string_view field, const std::string& text) {
    return std::unexpected<Error>(
        combine({{user.origin, fmt::format("user \"{}\": {}: {}", user.name, field, text)}}, rc.context));
  };
  const bool has_ca = !cluster.certificate_authority.empty() || !cluster.certificate_authority_data.empty();
  if (cluster.insecure_skip_tls_verify && has_ca) {
    return cluster_problem("insecure-skip-tls-verify",
                           "specifying a root certificates file with the insecure flag is not allowed");
  }
  rc.insecure_skip_tls_verify = cluster.insecure_skip_tls_verify;
  rc.tls_server_name = cluster.tls_server_name;

  const char* ca_field =
      cluster.certificate_authority_data.empty() ? "certificate-authority" : "certificate-authority-data";
  auto ca = data_or_file(cluster.certificate_authority_data, cluster.certificate_authority);
  if (!ca) return cluster_problem(ca_field, ca.error().message);
  const char* cert_field = user.client_certificate_data.empty() ? "client-certificate" : "client-certificate-data";
  auto cert = data_or_file(user.client_certificate_data, user.client_certificate);
  if (!cert) return user_problem(cert_field, cert.error().message);
  const char* key_field = user.client_key_data.empty() ? "client-key" : "client-key-data";
  auto key = data_or_file(user.client_key_data, user.client_key);
  if (!key) return user_problem(key_field, key.error().message);

  if (!ca->empty() && !looks_like_pem(*ca)) {
    std::string text = "unable to load root certificates: unable to parse bytes as PEM block";
    if (omitted_by_config_view(cluster.certificate_authority_data)) {
      text +=
          " (the data was omitted by \"kubectl config view\"; export the kubeconfig with \"kubectl config view "
          "--raw\")";
    }
    return cluster_problem(ca_field, text);
  }
  if (!cert->empty() && !looks_like_pem(*cert)) {
    return user_problem(cert_field, "tls: failed to find any PEM data in certificate input");
  }
  if (!key->empty() && !looks_like_pem(*key)) {
    return user_problem(key_field, "tls: failed to find any PEM data in key input");
  }
  rc.ca_pem = std::move(*ca);
  rc.client_cert_pem = std::move(*cert);
  rc.client_key_pem = std::move(*key);
  return {};
}

}  // namespace gpuctl::kube::detail
