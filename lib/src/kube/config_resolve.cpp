// From a merged kubeconfig to a RestConfig, in the order kubectl checks things:
// context selection (clientcmd DirectClientConfig.ClientConfig), validation of the selected
// user and cluster (ConfirmUsable), then what rest.Config.TransportConfig and
// transport.TLSConfigFor refuse (exec apiVersion, auth-provider, CA with insecure, PEM data; in
// config_credentials.cpp).
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/transport.hpp"
#include "kube/config_internal.hpp"

namespace gpuctl::kube::detail {

// "kubeconfig F: context "c": p1; p2" (grouped by file when entries come from several).
Error combine(const std::vector<Problem>& problems, const std::string& context) {
  std::vector<std::string> files;
  for (const auto& p : problems) {
    if (std::find(files.begin(), files.end(), p.file) == files.end()) files.push_back(p.file);
  }
  std::string message;
  for (const auto& f : files) {
    if (!message.empty()) message += "; ";
    message += fmt::format("kubeconfig {}: context \"{}\": ", f, context);
    bool first = true;
    for (const auto& p : problems) {
      if (p.file != f) continue;
      if (!first) message += "; ";
      message += p.text;
      first = false;
    }
  }
  return fail(Errc::config, message).error();
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// clientcmd parseProxyURL on top of Go's url.Parse scheme rules.
std::optional<std::string> proxy_url_problem(const std::string& url) {
  std::string scheme;
  bool has_scheme = false;
  for (std::size_t i = 0; i < url.size(); ++i) {
    char ch = url[i];
    if (std::isalpha(static_cast<unsigned char>(ch))) continue;
    if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '.') {
      if (i == 0) break;
      continue;
    }
    if (ch == ':') {
      if (i == 0) return fmt::format("could not parse: {}", url);  // missing protocol scheme
      scheme = lower(url.substr(0, i));
      has_scheme = true;
    }
    break;
  }
  if (!has_scheme && url.substr(0, url.find('/')).find(':') != std::string::npos) {
    return fmt::format("could not parse: {}", url);  // a colon in the first path segment
  }
  if (scheme != "http" && scheme != "https" && scheme != "socks5") {
    return fmt::format("unsupported scheme \"{}\", must be http, https, or socks5", scheme);
  }
  return std::nullopt;
}

// The server URL as the HTTP client should use it: scheme lower-cased, no query or fragment,
// no trailing slash. Like rest.DefaultServerURL, a server without a scheme is plain http.
Result<std::string> normalize_server(const std::string& server) {
  std::string scheme = "http";
  std::string rest = server;
  auto pos = server.find("://");
  if (pos != std::string::npos) {
    scheme = lower(server.substr(0, pos));
    rest = server.substr(pos + 3);
    if (scheme != "http" && scheme != "https") {
      return fail(Errc::config, fmt::format("server: unsupported protocol scheme \"{}\" in \"{}\" (want https://)",
                                            scheme, redact_url(server)));
    }
  }
  rest = rest.substr(0, rest.find_first_of("?#"));
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) return fail(Errc::config, fmt::format("server: no host in \"{}\"", redact_url(server)));
  return scheme + "://" + rest;
}

void validate_user(const KcUser& u, std::vector<Problem>& out) {
  auto add = [&](const std::string& text) { out.push_back({u.origin, fmt::format("user \"{}\": {}", u.name, text)}); };
  const bool has_cert = !u.client_certificate.empty() || !u.client_certificate_data.empty();
  const bool has_key = !u.client_key.empty() || !u.client_key_data.empty();
  if (!u.client_certificate.empty() && !u.client_certificate_data.empty()) {
    add("client-certificate-data and client-certificate are both specified (kubectl refuses this too): keep one");
  }
  if (!u.client_key.empty() && !u.client_key_data.empty()) {
    add("client-key-data and client-key are both specified (kubectl refuses this too): keep one");
  }
  if (has_cert && !has_key)
    add("client-key-data or client-key must be specified to use the clientCert authentication method");
  if (has_key && !has_cert) add("client-certificate-data or client-certificate must be specified to use client-key");
  if (!u.client_certificate.empty()) {
    if (auto p = open_problem(u.client_certificate))
      add(fmt::format("client-certificate: cannot read {}: {}", u.client_certificate, *p));
  }
  if (!u.client_key.empty()) {
    if (auto p = open_problem(u.client_key)) add(fmt::format("client-key: cannot read {}: {}", u.client_key, *p));
  }
  if (u.exec) {
    const ExecConfig& e = *u.exec;
    if (u.auth_provider) add("auth-provider cannot be provided in combination with an exec plugin: keep one");
    if (e.command.empty()) add("exec.command must be specified to use an exec credential plugin");
    if (e.api_version.empty()) add("exec.apiVersion must be specified to use an exec credential plugin");
    for (std::size_t i = 0; i < e.env.size(); ++i) {
      if (e.env[i].name.empty()) add(fmt::format("exec.env[{}].name must be specified", i));
    }
    if (e.interactive_mode.empty()) {
      add("exec.interactiveMode must be specified to use an exec credential plugin (Never, IfAvailable or Always)");
    } else if (e.interactive_mode != "Never" && e.interactive_mode != "IfAvailable" && e.interactive_mode != "Always") {
      add(fmt::format("exec.interactiveMode: invalid interactiveMode \"{}\" (want Never, IfAvailable or Always)",
                      e.interactive_mode));
    }
  }
  std::vector<std::string> methods;
  if (!u.token.empty()) methods.emplace_back("token");
  if (!u.username.empty() || !u.password.empty()) methods.emplace_back("basicAuth");
  if (methods.size() > 1) {
    add(fmt::format("more than one authentication method found; found [{}], only one is allowed",
                    fmt::join(methods, " ")));
  }
  if ((!u.impersonate_uid.empty() || !u.impersonate_groups.empty() || !u.impersonate_extra.empty()) &&
      u.impersonate.empty()) {
    add("as-uid, as-groups and as-user-extra need as: requesting uid, groups or user-extra without impersonating a "
        "user");
  }
}

void validate_cluster(const KcCluster& c, std::vector<Problem>& out) {
  auto add = [&](const std::string& text) {
    out.push_back({c.origin, fmt::format("cluster \"{}\": {}", c.name, text)});
  };
  if (c.server.empty()) add("server: no server defined");
  if (!c.proxy_url.empty()) {
    if (auto p = proxy_url_problem(c.proxy_url))
      add(fmt::format("proxy-url: invalid 'proxy-url' \"{}\": {}", redact_url(c.proxy_url), *p));
  }
  if (!c.certificate_authority.empty() && !c.certificate_authority_data.empty()) {
    add("certificate-authority-data and certificate-authority are both specified (kubectl refuses this too): keep one");
  }
  if (!c.certificate_authority.empty()) {
    if (auto p = open_problem(c.certificate_authority)) {
      add(fmt::format("certificate-authority: cannot read {}: {}", c.certificate_authority, *p));
    }
  }
}

// "available contexts: a, b", or how many there are when the list would be long.
std::string available(const char* what, const std::vector<std::string>& names) {
  constexpr std::size_t kShort = 10;
  if (names.empty()) return fmt::format("no {} are defined", what);
  if (names.size() > kShort) {
    return fmt::format("{} {} are defined (list them with kubectl config get-{})", names.size(), what, what);
  }
  std::vector<std::string> shown;
  for (const auto& n : names) shown.push_back(n.empty() ? "\"\"" : n);
  return fmt::format("available {}: {}", what, fmt::join(shown, ", "));
}

template <class T>
std::vector<std::string> names_of(const std::vector<T>& entries) {
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.name);
  return names;
}

// The context named by --context, else the current context.
Result<const KcContext*> select_context(const Kubeconfig& kc, const LoadOptions& options,
                                        const std::string& all_files) {
  const std::vector<std::string> context_names = names_of(kc.contexts);
  const bool from_flag = options.context && !options.context->empty();
  const std::string context_name = from_flag ? *options.context : kc.current_context;
  if (context_name.empty()) {
    return fail(Errc::config, fmt::format("{}: no context selected: current-context is not set and --context was not "
                                          "given ({})",
                                          all_files, available("contexts", context_names)));
  }
  const KcContext* ctx = kc.find_context(context_name);
  if (ctx == nullptr) {
    if (from_flag) {
      return fail(Errc::config, fmt::format("{}: context \"{}\" does not exist (--context); {}", all_files,
                                            context_name, available("contexts", context_names)));
    }
    return fail(Errc::config,
                fmt::format("kubeconfig {}: current-context \"{}\" does not exist; {}", kc.current_context_origin,
                            context_name, available("contexts", context_names)));
  }
  return ctx;
}

struct ClusterAndUser {
  const KcCluster* cluster = nullptr;
  const KcUser* user = nullptr;
};

// The context's cluster and user; a context without a user is anonymous, as in kubectl.
Result<ClusterAndUser> cluster_and_user_of(const Kubeconfig& kc, const KcContext& ctx) {
  const std::string ctx_prefix = fmt::format("kubeconfig {}: context \"{}\"", ctx.origin, ctx.name);
  if (ctx.cluster.empty()) return fail(Errc::config, ctx_prefix + ": cluster is not set");
  ClusterAndUser out;
  out.cluster = kc.find_cluster(ctx.cluster);
  if (out.cluster == nullptr) {
    return fail(Errc::config, fmt::format("{}: cluster \"{}\" does not exist; {}", ctx_prefix, ctx.cluster,
                                          available("clusters", names_of(kc.clusters))));
  }
  static const KcUser kAnonymous{};
  out.user = &kAnonymous;
  if (!ctx.user.empty()) {
    out.user = kc.find_user(ctx.user);
    if (out.user == nullptr) {
      return fail(Errc::config, fmt::format("{}: user \"{}\" does not exist; {}", ctx_prefix, ctx.user,
                                            available("users", names_of(kc.users))));
    }
  }
  return out;
}

// -n wins over the context's namespace; each must be a DNS-1123 label. A bad -n is a usage error
// (exit 2), a bad kubeconfig namespace a config error naming the context.
Result<void> set_namespace(RestConfig& rc, const KcContext& ctx, const LoadOptions& options) {
  if (options.namespace_name && !options.namespace_name->empty()) {
    // The -n flag: a usage error (exit 2), refused before anything is sent.
    if (auto problem = paths::dns_label_problem(*options.namespace_name); !problem.empty()) {
      return fail(Errc::invalid_argument, fmt::format("-n/--namespace: \"{}\" is not a valid namespace name: it {}",
                                                      *options.namespace_name, problem));
    }
    rc.namespace_name = *options.namespace_name;
  } else if (!ctx.namespace_name.empty()) {
    if (auto problem = paths::dns_label_problem(ctx.namespace_name); !problem.empty()) {
      return fail(
          Errc::config,
          fmt::format("{}: context \"{}\": namespace \"{}\" is not a valid namespace name: it {}; fix the kubeconfig",
                      ctx.origin, ctx.name, ctx.namespace_name, problem));
    }
    rc.namespace_name = ctx.namespace_name;
  }
  return {};
}

// The cluster's server, proxy and compression setting, and the user's impersonation.
Result<void> set_server_and_impersonation(RestConfig& rc, const KcContext& ctx, const KcCluster& cluster,
                                          const KcUser& user) {
  auto server = normalize_server(cluster.server);
  if (!server) {
    return fail(
        combine({{cluster.origin, fmt::format("cluster \"{}\": {}", cluster.name, server.error().message)}}, ctx.name));
  }
  rc.server = *server;
  rc.proxy_url = cluster.proxy_url;
  rc.disable_compression = cluster.disable_compression;
  if (!user.impersonate.empty()) {
    rc.impersonate_user = user.impersonate;
    rc.impersonate_uid = user.impersonate_uid;
    rc.impersonate_groups = user.impersonate_groups;
    rc.impersonate_extra = user.impersonate_extra;
  }
  return {};
}

}  // namespace

Result<RestConfig> resolve_rest_config(const Kubeconfig& kc, const LoadOptions& options,
                                       const std::vector<std::string>& files) {
  const std::string all_files = fmt::format("kubeconfig {}", fmt::join(files, ", "));
  GPUCTL_TRY_ASSIGN(const KcContext* ctx, select_context(kc, options, all_files));
  GPUCTL_TRY_ASSIGN(ClusterAndUser pair, cluster_and_user_of(kc, *ctx));
  const KcCluster& cluster = *pair.cluster;
  const KcUser& user = *pair.user;

  // Everything about the pair that kubectl's ConfirmUsable refuses, reported together.
  std::vector<Problem> problems;
  if (!ctx->user.empty()) validate_user(user, problems);
  validate_cluster(cluster, problems);
  if (!problems.empty()) return fail(combine(problems, ctx->name));

  RestConfig rc;
  rc.context = ctx->name;
  rc.cluster = cluster.name;
  rc.user = ctx->user;
  rc.origin = fmt::format("kubeconfig {}, context \"{}\"", ctx->origin, ctx->name);
  GPUCTL_TRY(set_namespace(rc, *ctx, options));
  GPUCTL_TRY(set_server_and_impersonation(rc, *ctx, cluster, user));

  // Like clientcmd, credentials and TLS settings are only used over TLS: a plain-http server
  // (kubectl proxy, a port-forward) gets neither.
  if (!rc.server.starts_with("https://")) return rc;
  GPUCTL_TRY(add_user_identification(user, cluster, rc));
  GPUCTL_TRY(add_tls(user, cluster, rc));
  return rc;
}

}  // namespace gpuctl::kube::detail
