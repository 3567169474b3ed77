#include "gpuctl/kube/discovery.hpp"

#include <nlohmann/json.hpp>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"

namespace gpuctl::kube {

Result<std::string> served_version(Client& client, std::string_view group, std::string_view resource) {
  auto versions = client.get(paths::group_discovery(group));
  if (!versions) {
    if (versions.error().is_not_found()) return std::string();
    return std::unexpected(versions.error());
  }
  for (const auto& v : array_field(*versions, "versions")) {
    GPUCTL_TRY_ASSIGN(bool served, serves(client, string_field(v, "groupVersion"), resource));
    if (served) return string_field(v, "version");
  }
  return std::string();
}

Result<bool> serves(Client& client, std::string_view group_version, std::string_view resource) {
  auto resources = client.get(paths::group_version_discovery(group_version));
  if (!resources) {
    if (resources.error().is_not_found()) return false;
    return std::unexpected(resources.error());
  }
  for (const auto& r : array_field(*resources, "resources")) {
    if (string_field(r, "name") == resource) return true;
  }
  return false;
}

}  // namespace gpuctl::kube
