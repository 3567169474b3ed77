// `gpuctl gpus --via pod --cleanup`: the probe pods an earlier run left (gpuctl killed, the API
// server gone before the delete), found by gpuctl's labels and deleted.
#include <nlohmann/json.hpp>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/util/cancel.hpp"
#include "probe_pods_internal.hpp"

namespace gpuctl::ops {

Result<std::vector<std::string>> cleanup_probe_pods(kube::Client& client, const std::string& namespace_name) {
  PodProbeOptions options;
  options.namespace_name = namespace_name;
  kube::ListOptions list;
  list.label_selector = detail::probe_pod_selector();
  list.metadata_only = true;  // names are all it needs
  auto pods = client.list(kube::paths::pods(namespace_name), list);
  if (!pods && pods.error().is_forbidden()) return fail(detail::forbidden_error(pods.error(), options, "list pods"));
  GPUCTL_TRY(pods);
  std::vector<std::string> deleted;
  for (const auto& pod : pods->items) {
    const std::string name = kube::name_of(pod);
    util::CleanupScope cleanup;  // a clean-up interrupted halfway still finishes what it started
    auto gone = client.remove(kube::paths::pod(namespace_name, name), nlohmann::json{{"gracePeriodSeconds", 0}});
    if (!gone && gone.error().is_not_found()) continue;  // gone meanwhile (its own run deleted it)
    if (!gone && gone.error().is_forbidden())
      return fail(detail::forbidden_error(gone.error(), options, "delete pods"));
    GPUCTL_TRY(gone);
    deleted.push_back(name);
  }
  return deleted;
}

}  // namespace gpuctl::ops
