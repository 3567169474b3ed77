#include "gpuctl/ops/completion/names.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "gpuctl/kube/paths.hpp"
#include "gpuctl/util/atomic_file.hpp"
#include "gpuctl/util/sha256.hpp"

namespace gpuctl::ops {
namespace {

// Completion wants the first screenful quickly, not every name of a 10,000-node cluster.
constexpr int kMaxNames = 5000;

std::string path_for(NameSource source, const std::string& namespace_name) {
  switch (source) {
    case NameSource::nodes:
    case NameSource::node_label_keys: return kube::paths::nodes();
    case NameSource::namespaces: return kube::paths::namespaces();
    case NameSource::jobs: return kube::paths::jobs(namespace_name);
  }
  return {};
}

const char* source_name(NameSource source) {
  switch (source) {
    case NameSource::nodes: return "nodes";
    case NameSource::namespaces: return "namespaces";
    case NameSource::jobs: return "jobs";
    case NameSource::node_label_keys: return "node-label-keys";
  }
  return "";
}

}  // namespace

Result<std::vector<std::string>> list_names(kube::Client& client, NameSource source,
                                            const std::string& namespace_name) {
  kube::ListOptions options;
  options.metadata_only = true;
  options.from_cache = true;  // the watch cache: a slightly stale name is fine for completion
  options.limit = kMaxNames;
  options.fields =
      source == NameSource::node_label_keys ? kube::Projection{"metadata.labels"} : kube::Projection{"metadata.name"};
  std::set<std::string> names;
  kube::ListPageSink sink;
  sink.on_items = [&](std::vector<nlohmann::json>& items) -> Result<void> {
    for (const auto& item : items) {
      const auto& metadata = item.value("metadata", nlohmann::json::object());
      if (source == NameSource::node_label_keys) {
        const auto& labels = metadata.value("labels", nlohmann::json::object());
        if (labels.is_object()) {
          for (const auto& [key, value] : labels.items()) names.insert(key);
        }
      } else if (metadata.contains("name") && metadata["name"].is_string()) {
        names.insert(metadata["name"].get<std::string>());
      }
    }
    return {};
  };
  sink.on_restart = [&] { names.clear(); };
  GPUCTL_TRY(client.list_pages(path_for(source, namespace_name), options, sink));
  return std::vector<std::string>(names.begin(), names.end());
}

std::string name_cache_key(const kube::RestConfig& config, NameSource source, const std::string& namespace_name) {
  std::string where = fmt::format("{}\n{}\n{}\n{}\n{}", config.server, config.context, config.user, source_name(source),
                                  source == NameSource::jobs ? namespace_name : "");
  return fmt::format("{}-{}", source_name(source), util::sha256_hex(where).substr(0, 32));
}

std::optional<std::vector<std::string>> read_cached_names(const NameCache& cache, const std::string& key,
                                                          std::chrono::system_clock::time_point now) {
  const std::string path = cache.dir + "/" + key;
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  // Another user's file, or one others may write, could feed words into this user's shell.
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) return std::nullopt;
  const auto written = std::chrono::system_clock::from_time_t(st.st_mtime);
  if (now < written || now - written > cache.ttl) return std::nullopt;
  std::ifstream in(path);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

Result<void> write_cached_names(const NameCache& cache, const std::string& key, const std::vector<std::string>& names) {
  // Each folder on the way is made private; existing ones are left as they are.
  for (std::size_t at = cache.dir.find('/', 1);; at = cache.dir.find('/', at + 1)) {
    const std::string part = cache.dir.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      return fail(Errc::io, fmt::format("cannot create {}: {}", part, std::strerror(errno)));
    }
    if (at == std::string::npos) break;
  }
  std::string text;
  for (const auto& name : names) {
    // Names from the server never hold a newline (DNS names, label keys); one that did would
    // split into two words, so it is left out.
    if (name.find('\n') == std::string::npos) text += name + "\n";
  }
  return util::write_file_atomically(cache.dir + "/" + key, text, 0600);
}

}  // namespace gpuctl::ops
