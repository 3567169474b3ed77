#pragma once
// What restore's run and its --verify share: one kind's live objects read with one list, and an
// archived object's REST path.
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/backup/backup.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::restore_detail {

using LiveKey = std::pair<std::string, std::string>;  // (namespace, name)
using LiveObjects = std::map<LiveKey, nlohmann::json>;

// One kind's objects as the cluster holds them now (in `namespace_name` for a namespaced kind,
// when given), by (namespace, name); nullopt when the cluster does not serve the kind at that
// apiVersion.
Result<std::optional<LiveObjects>> list_live(kube::Client& client, const BackupKind& kind,
                                             const std::string& api_version, const std::string& namespace_name);

// The archived object's apiVersion, and its REST path at that version.
std::string api_version_of(const BackupObject& object);
std::string api_path_of(const BackupObject& object);

}  // namespace gpuctl::ops::restore_detail
