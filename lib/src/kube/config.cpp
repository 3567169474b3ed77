// load_rest_config: which files (clientcmd ClientConfigLoadingRules), merging them, and the
// fallback to the in-cluster service account (DeferredLoadingClientConfig).
#include <algorithm>
#include <cstdlib>
#include <unordered_set>

#include <fmt/format.h>

#include "kube/config_internal.hpp"

namespace gpuctl::kube {
namespace detail {

Kubeconfig merge_kubeconfigs(std::vector<Kubeconfig> files) {
  Kubeconfig merged;
  // Names taken so far, in sets: searching the merged lists per entry was quadratic (40,000
  // clusters took seconds).
  std::unordered_set<std::string> clusters;
  std::unordered_set<std::string> users;
  std::unordered_set<std::string> contexts;
  for (auto& file : files) {
    for (auto& c : file.clusters) {
      if (clusters.insert(c.name).second) merged.clusters.push_back(std::move(c));
    }
    for (auto& u : file.users) {
      if (users.insert(u.name).second) merged.users.push_back(std::move(u));
    }
    for (auto& c : file.contexts) {
      if (contexts.insert(c.name).second) merged.contexts.push_back(std::move(c));
    }
    if (merged.current_context.empty() && !file.current_context.empty()) {
      merged.current_context = file.current_context;
      merged.current_context_origin = file.current_context_origin;
    }
    merged.has_other_settings = merged.has_other_settings || file.has_other_settings;
  }
  return merged;
}

}  // namespace detail

namespace {

using detail::Kubeconfig;

std::optional<std::string> non_empty(const std::optional<std::string>& value) {
  if (value && !value->empty()) return value;
  return std::nullopt;
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// $KUBECONFIG split on ':' without empty entries or repeats (filepath.SplitList + deduplicate).
std::vector<std::string> split_kubeconfig_env(const std::string& value) {
  std::vector<std::string> files;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find(':', start);
    if (end == std::string::npos) end = value.size();
    std::string item = value.substr(start, end - start);
    if (!item.empty() && std::find(files.begin(), files.end(), item) == files.end()) files.push_back(item);
    start = end + 1;
  }
  return files;
}

// Nothing to connect to from kubeconfig files: the service account if this looks like a pod,
// else an error that says what was looked at.
Result<RestConfig> without_kubeconfig(const LoadOptions& options, const std::string& looked_at) {
  if (non_empty(options.context)) {
    return fail(Errc::config, fmt::format("context \"{}\" does not exist (--context): no kubeconfig found ({})",
                                          *options.context, looked_at));
  }
  if (non_empty(options.service_host) || non_empty(options.service_port)) return detail::in_cluster_config(options);
  return fail(Errc::config,
              fmt::format("no configuration: set KUBECONFIG, use --kubeconfig, or create ~/.kube/config ({}; "
                          "not in a pod either: KUBERNETES_SERVICE_HOST is not set)",
                          looked_at));
}

// The kubeconfig files to read, in order, and which setting named them.
std::pair<std::vector<std::string>, std::string> candidate_files(const LoadOptions& options) {
  if (non_empty(options.kubeconfig)) return {{*options.kubeconfig}, "--kubeconfig"};
  if (auto list = non_empty(options.kubeconfig_env)) return {split_kubeconfig_env(*list), "KUBECONFIG"};
  if (!options.home.empty()) return {{options.home + "/.kube/config"}, "~/.kube/config"};
  return {{}, ""};
}

}  // namespace

Result<ContextNames> kubeconfig_contexts(const LoadOptions& options) {
  std::vector<Kubeconfig> loaded;
  for (const auto& path : candidate_files(options).first) {
    GPUCTL_TRY_ASSIGN(std::optional<Kubeconfig> config, detail::read_kubeconfig_file(path));
    if (config) loaded.push_back(std::move(*config));
  }
  Kubeconfig merged = detail::merge_kubeconfigs(std::move(loaded));
  ContextNames names;
  for (const auto& c : merged.contexts) names.names.push_back(c.name);
  names.current = merged.current_context;
  return names;
}

LoadOptions environment_load_options() {
  LoadOptions o;
  o.kubeconfig_env = non_empty(env("KUBECONFIG"));
  o.home = env("HOME").value_or("");
  o.service_host = non_empty(env("KUBERNETES_SERVICE_HOST"));
  o.service_port = non_empty(env("KUBERNETES_SERVICE_PORT"));
  o.pod_namespace = non_empty(env("POD_NAMESPACE"));
  return o;
}

Result<RestConfig> load_rest_config(const LoadOptions& options) {
  const auto [candidates, source] = candidate_files(options);
  const bool explicit_file = non_empty(options.kubeconfig).has_value();

  std::vector<Kubeconfig> loaded;
  std::vector<std::string> loaded_paths;
  std::vector<std::string> missing;
  for (const auto& path : candidates) {
    GPUCTL_TRY_ASSIGN(std::optional<Kubeconfig> config, detail::read_kubeconfig_file(path));
    if (!config) {
      // An explicit file must exist; missing files in a list are skipped, as kubectl does.
      if (explicit_file)
        return fail(Errc::config,
                    fmt::format("kubeconfig {}: cannot read: No such file or directory (--kubeconfig)", path));
      missing.push_back(path);
      continue;
    }
    loaded.push_back(std::move(*config));
    loaded_paths.push_back(path);
  }

  Kubeconfig merged = detail::merge_kubeconfigs(std::move(loaded));
  if (merged.empty()) {
    std::string looked_at;
    if (candidates.empty()) {
      looked_at = "KUBECONFIG and HOME are not set";
    } else if (!loaded_paths.empty()) {
      looked_at = fmt::format("{} has no clusters, users or contexts", fmt::join(loaded_paths, ", "));
    } else if (source == "KUBECONFIG") {
      looked_at = fmt::format("KUBECONFIG lists {}, none of which exists", fmt::join(missing, ", "));
    } else {
      looked_at = fmt::format("{} does not exist", fmt::join(missing, ", "));
    }
    return without_kubeconfig(options, looked_at);
  }
  return detail::resolve_rest_config(merged, options, loaded_paths);
}

}  // namespace gpuctl::kube
