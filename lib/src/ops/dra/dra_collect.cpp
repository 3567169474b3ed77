// Reading the DRA objects of a cluster: one discovery request, then each list once, in parallel,
// whatever the number of nodes. A cluster without resource.k8s.io/v1 (before 1.34, or with DRA
// turned off) has no DRA devices, which is no error.
#include <future>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

struct Served {
  bool v1 = false;
  std::string taint_rule_version;
};

// resource.k8s.io/v1's resources (one GET; 404: no DRA here), then, only when v1 does not serve
// devicetaintrules, the group's other versions, preferred first, until one does (v1beta2 in 1.36,
// v1alpha3 before).
Result<Served> discover(kube::Client& client) {
  Served served;
  auto v1 = client.get(kube::paths::group_version_discovery(kResourceApiVersion));
  if (!v1) {
    if (v1.error().is_not_found()) return served;
    return std::unexpected(v1.error());
  }
  served.v1 = true;
  auto serves_rules = [](const json& resources) {
    for (const auto& r : kube::array_field(resources, "resources")) {
      if (kube::string_field(r, "name") == "devicetaintrules") return true;
    }
    return false;
  };
  if (serves_rules(*v1)) {
    served.taint_rule_version = "v1";
    return served;
  }
  GPUCTL_TRY_ASSIGN(json group, client.get(kube::paths::group_discovery(kResourceApiGroup)));
  for (const auto& v : kube::array_field(group, "versions")) {
    std::string version = kube::string_field(v, "version");
    if (version == "v1") continue;
    auto resources = client.get(kube::paths::group_version_discovery(kube::string_field(v, "groupVersion")));
    if (!resources) {
      if (resources.error().is_not_found()) continue;
      return std::unexpected(resources.error());
    }
    if (serves_rules(*resources)) {
      served.taint_rule_version = version;
      break;
    }
  }
  return served;
}

using Items = std::vector<json>;

// A list that may be refused: a 403 is a warning (the counts it feeds are incomplete), other
// errors end the read.
Result<Items> read_list(kube::Client& client, const std::string& path, const kube::ListOptions& options,
                        std::string_view what, std::vector<std::string>& warnings) {
  auto listed = client.list(path, options);
  if (!listed) {
    if (listed.error().is_forbidden()) {
      warnings.emplace_back(what);
      return Items{};
    }
    return std::unexpected(listed.error());
  }
  return std::move(listed->items);
}

std::string resource_path(std::string_view group_version, std::string_view plural, bool namespaced = false) {
  return kube::paths::resources(group_version, plural, namespaced);
}

}  // namespace

Result<DraInventory> collect_dra(kube::Client& client, const DraReadOptions& options) {
  GPUCTL_TRY_ASSIGN(Served served, discover(client));
  if (!served.v1) return DraInventory{};
  kube::ListOptions list;
  list.from_cache = options.from_cache;
  const std::string v1(kResourceApiVersion);
  // Each list on its own thread (the slices are the largest); warnings per list, merged after.
  std::vector<std::string> w_slices, w_claims, w_classes, w_rules;
  auto slices = std::async(std::launch::async, [&] {
    return read_list(client, resource_path(v1, "resourceslices"), list, "resourceslices", w_slices);
  });
  auto claims = std::async(std::launch::async, [&]() -> Result<Items> {
    if (!options.claims) return Items{};
    return read_list(client, resource_path(v1, "resourceclaims", true), list, "resourceclaims", w_claims);
  });
  auto classes = std::async(std::launch::async, [&]() -> Result<Items> {
    if (!options.classes) return Items{};
    return read_list(client, resource_path(v1, "deviceclasses"), list, "deviceclasses", w_classes);
  });
  Result<Items> rules = Items{};
  if (options.taint_rules && !served.taint_rule_version.empty()) {
    std::string gv = fmt::format("{}/{}", kResourceApiGroup, served.taint_rule_version);
    rules = read_list(client, resource_path(gv, "devicetaintrules"), list, "devicetaintrules", w_rules);
  }
  auto slices_read = slices.get();
  auto claims_read = claims.get();
  auto classes_read = classes.get();
  GPUCTL_TRY(slices_read);
  GPUCTL_TRY(claims_read);
  GPUCTL_TRY(classes_read);
  GPUCTL_TRY(rules);
  DraInventory inventory = build_dra_inventory(*slices_read, *claims_read, *classes_read, *rules);
  inventory.taint_rule_version = served.taint_rule_version;
  std::vector<std::string> refused;
  for (auto* w : {&w_slices, &w_claims, &w_classes, &w_rules}) refused.insert(refused.end(), w->begin(), w->end());
  if (!refused.empty()) {
    // One line, as a read-only identity without rights on resource.k8s.io sees it every time.
    inventory.warnings.push_back(
        fmt::format("DRA objects not read ({} forbidden): GPUs published through DRA are left out of these counts",
                    fmt::join(refused, ", ")));
  }
  return inventory;
}

}  // namespace gpuctl::ops
