// Decoding one kubeconfig file (clientcmd's Load + LoadFromFile + ResolveLocalPaths):
// YAML -> Kubeconfig, with *-data fields base64-decoded, v1beta1 exec defaults applied and
// relative paths resolved against the file's folder. yaml-cpp stays inside this file.
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/yaml_scalar.hpp"
#include "kube/config_internal.hpp"
#include "kube/yaml_tree.hpp"

namespace gpuctl::kube::detail {
namespace {

using YAML::Node;

// Error context while decoding one file: "kubeconfig PATH: WHERE: FIELD: problem".
struct Decoder {
  const std::string& path;
  std::string base_dir;

  std::unexpected<Error> bad(const std::string& where, std::string_view field, const std::string& problem) const {
    std::string msg = "kubeconfig " + path + ": ";
    if (!where.empty()) msg += where + ": ";
    if (!field.empty()) msg += std::string(field) + ": ";
    return fail(Errc::config, msg + problem);
  }
};

std::string kind_of(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return fmt::format("\"{}\"", shown_in_error(n.Scalar()));
    default: return "nothing";
  }
}

bool absent(const Node& n) { return !n || n.IsNull(); }

Result<std::string> get_string(const Decoder& d, const Node& parent, const char* key, const std::string& where) {
  const Node n = parent[key];
  if (absent(n)) return std::string();
  if (!n.IsScalar()) return d.bad(where, key, "expected a string, got " + kind_of(n));
  return n.Scalar();
}

Result<bool> get_bool(const Decoder& d, const Node& parent, const char* key, const std::string& where) {
  const Node n = parent[key];
  if (absent(n)) return false;
  bool value = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, value)) {
    return d.bad(where, key, "expected true or false, got " + kind_of(n));
  }
  return value;
}

Result<std::vector<std::string>> string_list(const Decoder& d, const Node& n, const std::string& field,
                                             const std::string& where) {
  std::vector<std::string> out;
  if (absent(n)) return out;
  if (!n.IsSequence()) return d.bad(where, field, "expected a list of strings, got " + kind_of(n));
  for (std::size_t i = 0; i < n.size(); ++i) {
    const Node item = n[i];
    if (absent(item)) {
      out.emplace_back();
    } else if (item.IsScalar()) {
      out.push_back(item.Scalar());
    } else {
      return d.bad(where, fmt::format("{}[{}]", field, i), "expected a string, got " + kind_of(item));
    }
  }
  return out;
}

Result<std::vector<std::string>> get_string_list(const Decoder& d, const Node& parent, const char* key,
                                                 const std::string& where) {
  return string_list(d, parent[key], key, where);
}

// A mapping (or nothing): what a nested object such as clusters[].cluster must be.
Result<Node> get_map(const Decoder& d, const Node& parent, const char* key, const std::string& where) {
  const Node n = parent[key];
  if (absent(n)) return Node(YAML::NodeType::Map);
  if (!n.IsMap()) return d.bad(where, key, "expected a mapping, got " + kind_of(n));
  return n;
}

Result<std::string> get_base64(const Decoder& d, const Node& parent, const char* key, const std::string& where) {
  GPUCTL_TRY_ASSIGN(std::string text, get_string(d, parent, key, where));
  auto decoded = base64_decode(text);
  if (!decoded) return d.bad(where, key, decoded.error().message);
  return *decoded;
}

// YAML -> JSON as sigs.k8s.io/yaml converts it: plain scalars are typed (null, bool, number),
// quoted ones stay strings. check_yaml_tree has bounded the depth and size of every document
// before it gets here.
nlohmann::json to_json(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return n.Tag() == "?" ? kubeconfig_plain_scalar(n.Scalar()) : nlohmann::json(n.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const auto& item : n) array.push_back(to_json(item));
      return array;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& kv : n) object[kv.first.as<std::string>()] = to_json(kv.second);
      return object;
    }
    default: return nullptr;
  }
}

// The name of entry i of a named list, and how errors refer to it.
struct Named {
  std::string name;
  std::string where;
};

Result<Named> entry_name(const Decoder& d, const Node& item, const char* list, const char* singular, std::size_t i) {
  std::string index = fmt::format("{}[{}]", list, i);
  if (!item.IsMap())
    return d.bad(index, "", "expected a mapping with name and " + std::string(singular) + ", got " + kind_of(item));
  GPUCTL_TRY_ASSIGN(std::string name, get_string(d, item, "name", index));
  return Named{name, fmt::format("{} \"{}\"", singular, shown_in_error(name))};
}

Result<Node> named_list(const Decoder& d, const Node& root, const char* key) {
  const Node n = root[key];
  if (absent(n)) return Node(YAML::NodeType::Sequence);
  if (!n.IsSequence()) return d.bad("", key, "expected a list, got " + kind_of(n));
  return n;
}

Result<void> decode_clusters(const Decoder& d, const Node& root, Kubeconfig& out) {
  GPUCTL_TRY_ASSIGN(Node list, named_list(d, root, "clusters"));
  std::unordered_set<std::string> seen;  // a set, not a search per entry: 40,000 entries stay fast
  for (std::size_t i = 0; i < list.size(); ++i) {
    GPUCTL_TRY_ASSIGN(Named named, entry_name(d, list[i], "clusters", "cluster", i));
    if (!seen.insert(named.name).second) return d.bad(named.where, "", "defined twice in clusters");
    const std::string& w = named.where;
    GPUCTL_TRY_ASSIGN(Node c, get_map(d, list[i], "cluster", w));
    KcCluster cl;
    cl.name = named.name;
    cl.origin = d.path;
    GPUCTL_TRY_ASSIGN(cl.server, get_string(d, c, "server", w));
    GPUCTL_TRY_ASSIGN(cl.tls_server_name, get_string(d, c, "tls-server-name", w));
    GPUCTL_TRY_ASSIGN(cl.insecure_skip_tls_verify, get_bool(d, c, "insecure-skip-tls-verify", w));
    GPUCTL_TRY_ASSIGN(std::string ca_file, get_string(d, c, "certificate-authority", w));
    cl.certificate_authority = resolve_against(ca_file, d.base_dir);
    GPUCTL_TRY_ASSIGN(cl.certificate_authority_data, get_base64(d, c, "certificate-authority-data", w));
    GPUCTL_TRY_ASSIGN(cl.proxy_url, get_string(d, c, "proxy-url", w));
    GPUCTL_TRY_ASSIGN(cl.disable_compression, get_bool(d, c, "disable-compression", w));
    const Node extensions = c["extensions"];
    if (!absent(extensions)) {
      if (!extensions.IsSequence()) return d.bad(w, "extensions", "expected a list, got " + kind_of(extensions));
      for (std::size_t e = 0; e < extensions.size(); ++e) {
        const Node ext = extensions[e];
        if (!ext.IsMap()) return d.bad(w, fmt::format("extensions[{}]", e), "expected a mapping, got " + kind_of(ext));
        GPUCTL_TRY_ASSIGN(std::string ext_name, get_string(d, ext, "name", w));
        if (ext_name == kExecClusterExtension) cl.exec_extension_json = to_json(ext["extension"]).dump();
      }
    }
    out.clusters.push_back(std::move(cl));
  }
  return {};
}

Result<std::optional<ExecConfig>> decode_exec(const Decoder& d, const Node& user, const std::string& w) {
  const Node n = user["exec"];
  if (absent(n)) return std::optional<ExecConfig>();
  if (!n.IsMap()) return d.bad(w, "exec", "expected a mapping, got " + kind_of(n));
  std::string where = w + ": exec";
  ExecConfig exec;
  GPUCTL_TRY_ASSIGN(exec.api_version, get_string(d, n, "apiVersion", where));
  GPUCTL_TRY_ASSIGN(exec.command, get_string(d, n, "command", where));
  // Only a command with a '/' is a path; a bare name is looked up in PATH when it runs.
  if (exec.command.find('/') != std::string::npos) exec.command = resolve_against(exec.command, d.base_dir);
  GPUCTL_TRY_ASSIGN(exec.args, get_string_list(d, n, "args", where));
  const Node env = n["env"];
  if (!absent(env)) {
    if (!env.IsSequence()) return d.bad(where, "env", "expected a list, got " + kind_of(env));
    for (std::size_t i = 0; i < env.size(); ++i) {
      if (!env[i].IsMap()) return d.bad(where, fmt::format("env[{}]", i), "expected a mapping with name and value");
      std::string item = fmt::format("{}: env[{}]", where, i);
      ExecEnvVar var;
      GPUCTL_TRY_ASSIGN(var.name, get_string(d, env[i], "name", item));
      GPUCTL_TRY_ASSIGN(var.value, get_string(d, env[i], "value", item));
      exec.env.push_back(std::move(var));
    }
  }
  GPUCTL_TRY_ASSIGN(exec.interactive_mode, get_string(d, n, "interactiveMode", where));
  GPUCTL_TRY_ASSIGN(exec.provide_cluster_info, get_bool(d, n, "provideClusterInfo", where));
  GPUCTL_TRY_ASSIGN(exec.install_hint, get_string(d, n, "installHint", where));
  // clientcmd v1 defaulting (SetDefaults_ExecConfig): the older versions default to
  // IfAvailable; v1 must say what it wants.
  if (exec.interactive_mode.empty() && (exec.api_version == kExecApiV1beta1 || exec.api_version == kExecApiV1alpha1)) {
    exec.interactive_mode = "IfAvailable";
  }
  return std::optional<ExecConfig>(std::move(exec));
}

Result<void> decode_users(const Decoder& d, const Node& root, Kubeconfig& out) {
  GPUCTL_TRY_ASSIGN(Node list, named_list(d, root, "users"));
  std::unordered_set<std::string> seen;  // a set, not a search per entry: 40,000 entries stay fast
  for (std::size_t i = 0; i < list.size(); ++i) {
    GPUCTL_TRY_ASSIGN(Named named, entry_name(d, list[i], "users", "user", i));
    if (!seen.insert(named.name).second) return d.bad(named.where, "", "defined twice in users");
    const std::string& w = named.where;
    GPUCTL_TRY_ASSIGN(Node u, get_map(d, list[i], "user", w));
    KcUser user;
    user.name = named.name;
    user.origin = d.path;
    GPUCTL_TRY_ASSIGN(std::string cert_file, get_string(d, u, "client-certificate", w));
    user.client_certificate = resolve_against(cert_file, d.base_dir);
    GPUCTL_TRY_ASSIGN(user.client_certificate_data, get_base64(d, u, "client-certificate-data", w));
    GPUCTL_TRY_ASSIGN(std::string key_file, get_string(d, u, "client-key", w));
    user.client_key = resolve_against(key_file, d.base_dir);
    GPUCTL_TRY_ASSIGN(user.client_key_data, get_base64(d, u, "client-key-data", w));
    GPUCTL_TRY_ASSIGN(user.token, get_string(d, u, "token", w));
    GPUCTL_TRY_ASSIGN(std::string token_file, get_string(d, u, "tokenFile", w));
    user.token_file = resolve_against(token_file, d.base_dir);
    GPUCTL_TRY_ASSIGN(user.impersonate, get_string(d, u, "as", w));
    GPUCTL_TRY_ASSIGN(user.impersonate_uid, get_string(d, u, "as-uid", w));
    GPUCTL_TRY_ASSIGN(user.impersonate_groups, get_string_list(d, u, "as-groups", w));
    const Node extra = u["as-user-extra"];
    if (!absent(extra)) {
      if (!extra.IsMap()) return d.bad(w, "as-user-extra", "expected a mapping of lists, got " + kind_of(extra));
      for (const auto& kv : extra) {
        std::string key = kv.first.as<std::string>();
        GPUCTL_TRY_ASSIGN(std::vector<std::string> values, string_list(d, kv.second, "as-user-extra." + key, w));
        user.impersonate_extra.emplace_back(std::move(key), std::move(values));
      }
    }
    GPUCTL_TRY_ASSIGN(user.username, get_string(d, u, "username", w));
    GPUCTL_TRY_ASSIGN(user.password, get_string(d, u, "password", w));
    const Node provider = u["auth-provider"];
    if (!absent(provider)) {
      if (!provider.IsMap()) return d.bad(w, "auth-provider", "expected a mapping, got " + kind_of(provider));
      GPUCTL_TRY_ASSIGN(std::string provider_name, get_string(d, provider, "name", w + ": auth-provider"));
      user.auth_provider = std::move(provider_name);
    }
    GPUCTL_TRY_ASSIGN(user.exec, decode_exec(d, u, w));
    out.users.push_back(std::move(user));
  }
  return {};
}

Result<void> decode_contexts(const Decoder& d, const Node& root, Kubeconfig& out) {
  GPUCTL_TRY_ASSIGN(Node list, named_list(d, root, "contexts"));
  std::unordered_set<std::string> seen;  // a set, not a search per entry: 40,000 entries stay fast
  for (std::size_t i = 0; i < list.size(); ++i) {
    GPUCTL_TRY_ASSIGN(Named named, entry_name(d, list[i], "contexts", "context", i));
    if (!seen.insert(named.name).second) return d.bad(named.where, "", "defined twice in contexts");
    GPUCTL_TRY_ASSIGN(Node c, get_map(d, list[i], "context", named.where));
    KcContext ctx;
    ctx.name = named.name;
    ctx.origin = d.path;
    GPUCTL_TRY_ASSIGN(ctx.cluster, get_string(d, c, "cluster", named.where));
    GPUCTL_TRY_ASSIGN(ctx.user, get_string(d, c, "user", named.where));
    GPUCTL_TRY_ASSIGN(ctx.namespace_name, get_string(d, c, "namespace", named.where));
    out.contexts.push_back(std::move(ctx));
  }
  return {};
}

Result<Kubeconfig> decode(const Decoder& d, const Node& root) {
  Kubeconfig out;
  if (absent(root)) return out;  // only comments: an empty config
  if (!root.IsMap())
    return d.bad("", "", "not a kubeconfig: expected a mapping at the top level, got " + kind_of(root));
  GPUCTL_TRY_ASSIGN(std::string kind, get_string(d, root, "kind", ""));
  if (!kind.empty() && kind != "Config")
    return d.bad("", "kind", fmt::format("\"{}\" is not a kubeconfig (want kind: Config)", shown_in_error(kind)));
  GPUCTL_TRY_ASSIGN(std::string api_version, get_string(d, root, "apiVersion", ""));
  if (!api_version.empty() && api_version != "v1") {
    return d.bad("", "apiVersion", fmt::format("\"{}\" is not supported (want v1)", shown_in_error(api_version)));
  }
  GPUCTL_TRY(decode_clusters(d, root, out));
  GPUCTL_TRY(decode_users(d, root, out));
  GPUCTL_TRY(decode_contexts(d, root, out));
  GPUCTL_TRY_ASSIGN(out.current_context, get_string(d, root, "current-context", ""));
  if (!out.current_context.empty()) out.current_context_origin = d.path;
  GPUCTL_TRY_ASSIGN(Node preferences, get_map(d, root, "preferences", ""));
  GPUCTL_TRY_ASSIGN(bool colors, get_bool(d, preferences, "colors", "preferences"));
  const Node pref_ext = preferences["extensions"];
  const Node ext = root["extensions"];
  out.has_other_settings = colors || (pref_ext && pref_ext.IsSequence() && pref_ext.size() > 0) ||
                           (ext && ext.IsSequence() && ext.size() > 0);
  return out;
}

}  // namespace

const KcCluster* Kubeconfig::find_cluster(std::string_view name) const {
  for (const auto& c : clusters) {
    if (c.name == name) return &c;
  }
  return nullptr;
}
const KcUser* Kubeconfig::find_user(std::string_view name) const {
  for (const auto& u : users) {
    if (u.name == name) return &u;
  }
  return nullptr;
}
const KcContext* Kubeconfig::find_context(std::string_view name) const {
  for (const auto& c : contexts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}
bool Kubeconfig::empty() const {
  return clusters.empty() && users.empty() && contexts.empty() && current_context.empty() && !has_other_settings;
}

Result<Kubeconfig> parse_kubeconfig(std::string_view yaml, const std::string& path) {
  Decoder d{path, absolute_dir_of(path)};
  if (yaml.empty()) return Kubeconfig{};
  try {
    const Node root = YAML::Load(std::string(yaml));
    GPUCTL_TRY(check_yaml_tree(root, "kubeconfig " + path, yaml.size(), Errc::config));
    return decode(d, root);
  } catch (const YAML::DeepRecursion&) {
    return std::unexpected(yaml_too_deep("kubeconfig " + path, Errc::config));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return d.bad("", "", "yaml: " + e.msg);
    return d.bad("", "", fmt::format("yaml: line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    return d.bad("", "", e.what());
  }
}

Result<std::optional<Kubeconfig>> read_kubeconfig_file(const std::string& path) {
  int error_number = 0;
  auto text = read_text_file(path, &error_number);
  if (!text) {
    if (error_number == ENOENT) return std::optional<Kubeconfig>();
    return fail(Errc::config, fmt::format("kubeconfig {}: cannot read: {}", path, std::strerror(error_number)));
  }
  GPUCTL_TRY_ASSIGN(Kubeconfig config, parse_kubeconfig(*text, path));
  return std::optional<Kubeconfig>(std::move(config));
}

}  // namespace gpuctl::kube::detail
