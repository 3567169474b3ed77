#pragma once
// Private to lib/src/kube/config*.cpp and exec_credential.cpp: the kubeconfig file model
// (clientcmd's api.Config after decoding), and the steps of load_rest_config.
//
//   config_parse.cpp     YAML text -> Kubeconfig (one file, relative paths resolved)
//   config.cpp           the file list, merging, load_rest_config, environment_load_options
//   config_resolve.cpp   context selection, validation, Kubeconfig -> RestConfig
//   config_incluster.cpp the in-cluster service account
//   config_text.cpp      base64, file reading and message helpers
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/config.hpp"

namespace gpuctl::kube::detail {

inline constexpr std::string_view kExecApiV1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view kExecApiV1beta1 = "client.authentication.k8s.io/v1beta1";
inline constexpr std::string_view kExecApiV1alpha1 = "client.authentication.k8s.io/v1alpha1";
inline constexpr std::string_view kExecClusterExtension = "client.authentication.k8s.io/exec";
inline constexpr std::string_view kCredentialPluginDocs =
    "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins";

// clusters[].cluster. *_data fields hold decoded bytes; file paths are absolute.
struct KcCluster {
  std::string name;
  std::string origin;  // the file that defined it
  std::string server;
  std::string tls_server_name;
  bool insecure_skip_tls_verify = false;
  std::string certificate_authority;
  std::string certificate_authority_data;
  std::string proxy_url;
  bool disable_compression = false;
  std::string exec_extension_json;  // extensions["client.authentication.k8s.io/exec"], as JSON
};

// users[].user.
struct KcUser {
  std::string name;
  std::string origin;
  std::string client_certificate;
  std::string client_certificate_data;
  std::string client_key;
  std::string client_key_data;
  std::string token;
  std::string token_file;
  std::string username;
  std::string password;
  std::string impersonate;
  std::string impersonate_uid;
  std::vector<std::string> impersonate_groups;
  std::vector<std::pair<std::string, std::vector<std::string>>> impersonate_extra;
  std::optional<std::string> auth_provider;  // auth-provider.name
  std::optional<ExecConfig> exec;            // interactiveMode already defaulted for v1beta1
};

// contexts[].context.
struct KcContext {
  std::string name;
  std::string origin;
  std::string cluster;
  std::string user;
  std::string namespace_name;
};

struct Kubeconfig {
  std::vector<KcCluster> clusters;
  std::vector<KcUser> users;
  std::vector<KcContext> contexts;
  std::string current_context;
  std::string current_context_origin;
  // preferences.colors or extensions: the file is not "empty" in clientcmd's sense.
  bool has_other_settings = false;

  const KcCluster* find_cluster(std::string_view name) const;
  const KcUser* find_user(std::string_view name) const;
  const KcContext* find_context(std::string_view name) const;
  // clientcmdapi.IsConfigEmpty: nothing that could select a server.
  bool empty() const;
};

// Decodes one kubeconfig. `path` names the file in errors, is recorded as every entry's
// origin, and its folder anchors relative certificate-authority, client-certificate,
// client-key, tokenFile and exec.command (only when the command contains a '/') paths.
// Empty text is an empty config, as in clientcmd.Load.
Result<Kubeconfig> parse_kubeconfig(std::string_view yaml, const std::string& path);

// Reads and parses one file; nullopt when it does not exist (ENOENT).
Result<std::optional<Kubeconfig>> read_kubeconfig_file(const std::string& path);

// clientcmd's merge: in clusters, users and contexts the first file that defines a name wins
// wholesale; current-context comes from the first file that sets it.
Kubeconfig merge_kubeconfigs(std::vector<Kubeconfig> files);

// Selection, validation and the RestConfig for a non-empty merged kubeconfig.
Result<RestConfig> resolve_rest_config(const Kubeconfig& config, const LoadOptions& options,
                                       const std::vector<std::string>& files);

// The in-cluster service account configuration.
Result<RestConfig> in_cluster_config(const LoadOptions& options);

// --- helpers (config_text.cpp) ---

// Go's base64.StdEncoding: \r and \n are skipped; errors read
// "illegal base64 data at input byte N" as in Go.
Result<std::string> base64_decode(std::string_view text);
std::string base64_encode(std::string_view bytes);

// The whole file, or an Errc::config error "cannot read PATH: <strerror>" (with the errno
// in *error_number when given).
Result<std::string> read_text_file(const std::string& path, int* error_number = nullptr);
// Whether the file can be opened for reading; the strerror text when it cannot.
std::optional<std::string> open_problem(const std::string& path);

// The folder of `path`, made absolute against the current directory.
std::string absolute_dir_of(const std::string& path);
// `path` joined to `base` unless it is empty or absolute.
std::string resolve_against(const std::string& path, const std::string& base);

// clientcmd's cleanANSIEscapeCodes: control characters other than \t..\r become U+XXXX.
std::string clean_control_characters(std::string_view text);

std::string trim(std::string_view text);
// Whether text holds a PEM block ("-----BEGIN ").
bool looks_like_pem(std::string_view text);

// Shared by config_resolve.cpp and config_credentials.cpp.

// One thing wrong with the selected user or cluster: the file that defined the entry, and
// `user "u": field: problem`.
struct Problem {
  std::string file;
  std::string text;
};

// "kubeconfig F: context "c": p1; p2" (grouped by file when entries come from several).
Error combine(const std::vector<Problem>& problems, const std::string& context);

// Credentials: token, client certificate, basic auth, exec (rest's user identification).
Result<void> add_user_identification(const KcUser& user, const KcCluster& cluster, RestConfig& rc);

// TLS: the CA, insecure-skip-tls-verify, tls-server-name and the client key pair
// (transport.TLSConfigFor).
Result<void> add_tls(const KcUser& user, const KcCluster& cluster, RestConfig& rc);

}  // namespace gpuctl::kube::detail
