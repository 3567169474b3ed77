#pragma once
// `--via pod` (issue 21): the fixed probe script of gpu/probe.hpp run in one short-lived pod per
// node, pinned with spec.nodeName (no scheduler), tolerating every taint, nvidia-smi taken from
// the host through the NVIDIA container runtime (so the pod holds no GPU), read back from the
// pod's log and deleted; at most `fanout` pods in flight, each node bounded by `deadline`.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// The labels every probe pod carries (and `--cleanup` selects by).
inline constexpr std::string_view kProbePodAppLabel = "app.kubernetes.io/name";
inline constexpr std::string_view kProbePodAppValue = "gpuctl-probe";
inline constexpr std::string_view kProbePodManagedBy = "app.kubernetes.io/managed-by";  // = gpuctl
inline constexpr std::string_view kProbePodNodeLabel = "probe.gpuctl.io/node";           // the node probed
// Who made the pod (user@host, pid and start time): for an admin who finds a leftover.
inline constexpr std::string_view kProbePodOwnerAnnotation = "probe.gpuctl.io/owner";

struct PodProbeOptions {
  std::string namespace_name = "gpuctl-system";
  // A small, widely mirrored image with a POSIX shell.
  std::string image = "busybox:1.36";
  std::string image_pull_policy;                 // "" : the cluster's default (IfNotPresent for tags)
  std::vector<std::string> image_pull_secrets;   // secret names in namespace_name
  std::string runtime_class = "nvidia";          // "" : none (a cluster whose default runtime is NVIDIA's)
  // The NVIDIA container runtime's convention: every GPU visible, the utility driver capability
  // (nvidia-smi, NVML), no GPU requested from the scheduler.
  std::vector<std::pair<std::string, std::string>> env = {{"NVIDIA_VISIBLE_DEVICES", "all"},
                                                          {"NVIDIA_DRIVER_CAPABILITIES", "utility"}};
  // The kernel-log part of the probe needs a privileged pod (with the host's PID namespace for
  // the Fabric Manager check); without it the probe's kernel step is skipped.
  bool privileged = false;
  int fanout = 32;
  // Per node, from the create to the log read: a pod not finished by then is deleted and the
  // node reported timed_out (with what its log had printed so far).
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};
  std::size_t output_cap = 8 * 1024 * 1024;
  // Who runs gpuctl, for the owner annotation ("user@host pid=N").
  std::string owner;
};

// Pure: the probe pod for one node, exactly as it is sent (name from generateName is left to the
// server). Tests and --dry-run read it.
nlohmann::json build_probe_pod(const std::string& node, const PodProbeOptions& options);

std::unique_ptr<NodeSource> make_pod_source(kube::Client& client, PodProbeOptions options);

// `gpuctl gpus --via pod --cleanup`: every probe pod left in the namespace (by gpuctl's labels)
// deleted; the names of those deleted.
Result<std::vector<std::string>> cleanup_probe_pods(kube::Client& client, const std::string& namespace_name);

}  // namespace gpuctl::ops
