// volume-claim: the claims named by the template exist, are not being deleted, and are Bound or
// will bind when the pod is scheduled.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace preflight_detail;

constexpr std::string_view kVolumeClaim = "volume-claim";

std::vector<std::string> access_modes(const json& claim) {
  std::vector<std::string> modes;
  const json& list = field(field(claim, "spec"), "accessModes");
  if (!list.is_array()) return modes;
  for (const auto& m : list) {
    if (m.is_string()) modes.push_back(m.get<std::string>());
  }
  return modes;
}

bool pod_uses_claim(const json& pod, const std::string& claim) {
  const json& volumes = field(field(pod, "spec"), "volumes");
  if (!volumes.is_array()) return false;
  return std::any_of(volumes.begin(), volumes.end(), [&](const json& v) {
    return string_field(field(v, "persistentVolumeClaim"), "claimName") == claim;
  });
}

// The unbound-claim verdict; nullopt when the claim will bind on its own.
std::optional<PreflightFinding> pending_verdict(const PreflightInput& input, const std::string& id, const json& claim,
                                                const std::string& phase) {
  const std::string cls = string_field(field(claim, "spec"), "storageClassName");
  if (phase != "Pending") {
    return refusal(kVolumeClaim, fmt::format("PersistentVolumeClaim {} is {}, not Bound: the pods would never start; "
                                             "fix or recreate the claim",
                                             id, phase));
  }
  if (cls.empty()) {
    return refusal(kVolumeClaim,
                   fmt::format("PersistentVolumeClaim {} is Pending, not Bound, and has no storage class: "
                               "it waits for a matching PersistentVolume, and so would the pods",
                               id));
  }
  if (auto it = input.storage_classes.find(cls); it != input.storage_classes.end()) {
    std::string mode = string_field(it->second, "volumeBindingMode");
    if (mode == "WaitForFirstConsumer") return std::nullopt;  // binds once a pod is scheduled
    return refusal(kVolumeClaim,
                   fmt::format("PersistentVolumeClaim {} is Pending, not Bound (storage class {} binds {}): "
                               "the pods would wait until it binds",
                               id, cls, mode.empty() ? "Immediate" : mode));
  }
  if (input.unreadable_storage_classes.contains(cls)) {
    return warning(kVolumeClaim,
                   fmt::format("PersistentVolumeClaim {} is Pending and its storage class {} could not be "
                               "read: the pods start only once it binds (at scheduling if the class is "
                               "WaitForFirstConsumer)",
                               id, cls));
  }
  return refusal(kVolumeClaim,
                 fmt::format("PersistentVolumeClaim {} is Pending and its storage class {} does not exist: "
                             "it will never bind",
                             id, cls));
}

}  // namespace

std::vector<PreflightFinding> check_volume_claims(const PreflightInput& input) {
  std::vector<PreflightFinding> out;
  const std::string ns = job_namespace(input.job);
  const json& volumes = field(pod_spec(input.job), "volumes");
  if (!volumes.is_array()) return out;

  std::set<std::string> seen;
  for (const auto& v : volumes) {
    const std::string claim_name = string_field(field(v, "persistentVolumeClaim"), "claimName");
    if (claim_name.empty() || !seen.insert(claim_name).second) continue;
    const std::string id = ns + "/" + claim_name;
    auto it = input.claims.find(claim_name);
    if (it == input.claims.end()) {
      out.push_back(
          refusal(kVolumeClaim, fmt::format("PersistentVolumeClaim {} (volume \"{}\") does not exist: the pods "
                                            "would never start; create it first or fix --volume",
                                            id, string_field(v, "name"))));
      continue;
    }
    const json& claim = it->second;
    if (!field(field(claim, "metadata"), "deletionTimestamp").is_null()) {
      out.push_back(refusal(kVolumeClaim,
                            fmt::format("PersistentVolumeClaim {} is being deleted: the pods would never start", id)));
      continue;
    }
    std::string phase = string_field(field(claim, "status"), "phase");
    if (phase.empty()) phase = "Pending";  // a claim the controller has not looked at yet
    if (phase != "Bound") {
      if (auto verdict = pending_verdict(input, id, claim, phase)) out.push_back(std::move(*verdict));
      continue;
    }

    // A single-node claim already in use: the job's pods share its node, or wait for the pod.
    if (!input.pods_listed) continue;
    const auto modes = access_modes(claim);
    auto has = [&](std::string_view m) { return std::find(modes.begin(), modes.end(), m) != modes.end(); };
    const bool once_pod = has("ReadWriteOncePod");
    const bool once_node = has("ReadWriteOnce") && !has("ReadWriteMany") && !has("ReadOnlyMany");
    if (!once_pod && !once_node) continue;
    for (const auto& pod : input.pods) {
      if (kube::namespace_of(pod) != ns || kube::pod_is_terminal(pod) || !pod_uses_claim(pod, claim_name)) continue;
      std::string node = string_field(field(pod, "spec"), "nodeName");
      std::string pod_id = ns + "/" + kube::name_of(pod);
      if (once_pod) {
        out.push_back(
            warning(kVolumeClaim, fmt::format("PersistentVolumeClaim {} is ReadWriteOncePod and already used by pod "
                                              "{}: the job's pods wait until that pod ends",
                                              id, pod_id)));
      } else {
        out.push_back(
            warning(kVolumeClaim, fmt::format("PersistentVolumeClaim {} is ReadWriteOnce and already mounted by pod "
                                              "{} on node {}: pods of this job placed on another node cannot "
                                              "attach it",
                                              id, pod_id, node.empty() ? "(unbound)" : node)));
      }
      break;
    }
  }
  return out;
}

}  // namespace gpuctl::ops
