#pragma once
// Resolving "which API server, as whom" the way kubectl does: kubeconfig files (KUBECONFIG with
// several files, or one explicit --kubeconfig), contexts, namespaces, and the in-cluster
// service account. The result is a RestConfig: everything the HTTP client needs, with file
// references already read into memory.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

struct ExecEnvVar {
  std::string name;
  std::string value;
};

// A client.authentication.k8s.io exec credential plugin, as configured in users[].user.exec.
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  // As configured, but resolved against the kubeconfig's folder when it contains a '/';
  // a bare name is looked up in PATH when the plugin runs.
  std::string command;
  std::vector<std::string> args;
  std::vector<ExecEnvVar> env;   // added to the parent environment
  std::string interactive_mode;  // Never, IfAvailable or Always (v1beta1 defaults IfAvailable)
  bool provide_cluster_info = false;
  std::string install_hint;
};

// One resolved context: the server, TLS material, and how to authenticate.
struct RestConfig {
  std::string server;  // e.g. "https://127.0.0.1:6443", no trailing slash
  // Names as they appear in the kubeconfig; empty for in-cluster configuration.
  std::string context;
  std::string cluster;
  std::string user;
  // --namespace, else the context's namespace, else "default".
  std::string namespace_name = "default";
  // Where this configuration came from, for error messages:
  // "kubeconfig /home/a/.kube/config, context \"prod\"" or "in-cluster service account".
  std::string origin;

  // TLS. PEM text, already read from files or decoded from *-data fields.
  std::string ca_pem;  // empty: the system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string client_cert_pem;
  std::string client_key_pem;

  std::string proxy_url;  // http, https or socks5 scheme; empty for none
  bool disable_compression = false;

  // Authentication (at most one scheme besides client certificates).
  std::string bearer_token;
  std::string token_file;  // absolute path; re-read at most once a minute, wins once read
  std::string username;    // basic auth
  std::string password;
  std::optional<ExecConfig> exec;
  // The cluster's extensions["client.authentication.k8s.io/exec"] as JSON text, passed to exec
  // plugins in KUBERNETES_EXEC_INFO when provideClusterInfo is set; empty when absent.
  std::string exec_cluster_config_json;

  // Impersonation (users[].user.as, as-uid, as-groups, as-user-extra).
  std::string impersonate_user;
  std::string impersonate_uid;
  std::vector<std::string> impersonate_groups;
  std::vector<std::pair<std::string, std::vector<std::string>>> impersonate_extra;
};

// Inputs to resolution. The environment is passed in, not read behind the caller's back, so
// tests can describe any situation; environment_load_options() fills it from the process.
struct LoadOptions {
  std::optional<std::string> kubeconfig;      // --kubeconfig: only this file, which must exist
  std::optional<std::string> context;         // --context
  std::optional<std::string> namespace_name;  // -n/--namespace

  std::optional<std::string> kubeconfig_env;  // $KUBECONFIG, split on ':'
  std::string home;                           // $HOME, for ~/.kube/config

  // In-cluster service account configuration, used only when no kubeconfig is found.
  std::optional<std::string> service_host;   // $KUBERNETES_SERVICE_HOST
  std::optional<std::string> service_port;   // $KUBERNETES_SERVICE_PORT
  std::optional<std::string> pod_namespace;  // $POD_NAMESPACE
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

LoadOptions environment_load_options();

// Resolves the configuration. Every error is Errc::config and names the file, the context
// and the field at fault, e.g.
//   kubeconfig /x/config: context "prod": user "admin": client-key: cannot read /x/k.pem: No such file or directory
// (several problems with the selected user and cluster are reported together, "; "-separated,
// as kubectl's validation does).
//
// As in kubectl, credentials and TLS settings are only filled in for an https server: for a
// plain-http one (kubectl proxy) they stay empty. Without any kubeconfig (or with only empty
// ones), the in-cluster service account is used when KUBERNETES_SERVICE_HOST/PORT are set.
Result<RestConfig> load_rest_config(const LoadOptions& options);

// The context names of the kubeconfig files `options` selects (merged as load_rest_config
// merges them), and the current-context; nothing is resolved or validated beyond parsing, so
// completion and per-context settings work with a kubeconfig whose credentials are broken.
struct ContextNames {
  std::vector<std::string> names;
  std::string current;
};
Result<ContextNames> kubeconfig_contexts(const LoadOptions& options);

}  // namespace gpuctl::kube
