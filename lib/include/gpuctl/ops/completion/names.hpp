#pragma once
// The names shell completion offers from the cluster (nodes, namespaces, jobs, the nodes' label
// keys), read as metadata only, and a short-lived cache of them on disk so that pressing TAB
// again does not ask the API server again.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/client.hpp"

namespace gpuctl::ops {

enum class NameSource { nodes, namespaces, jobs, node_label_keys };

// The names, sorted and without repeats. `namespace_name` is read for jobs only.
Result<std::vector<std::string>> list_names(kube::Client& client, NameSource source, const std::string& namespace_name);

struct NameCache {
  std::string dir;  // e.g. ~/.cache/gpuctl/completion; made 0700 when missing
  std::chrono::seconds ttl{30};
};

// One cache entry per cluster, context, user, source and namespace: two contexts never share
// names, and the key holds no credentials (a hash of where the names came from).
std::string name_cache_key(const kube::RestConfig& config, NameSource source, const std::string& namespace_name);

// The cached names when the entry exists, is younger than the ttl at `now`, and is a plain file
// of this user's that no one else may read or write (0600); nullopt otherwise.
std::optional<std::vector<std::string>> read_cached_names(const NameCache& cache, const std::string& key,
                                                          std::chrono::system_clock::time_point now);
// Writes the entry atomically with mode 0600.
Result<void> write_cached_names(const NameCache& cache, const std::string& key, const std::vector<std::string>& names);

}  // namespace gpuctl::ops
