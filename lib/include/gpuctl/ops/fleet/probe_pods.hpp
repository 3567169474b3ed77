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
inline constexpr std::string_view kProbePodNodeLabel = "probe.gpuctl.io/node";          // the node probed
// Who made the pod (user@host, pid and start time): for an admin who finds a leftover.
inline constexpr std::string_view kProbePodOwnerAnnotation = "probe.gpuctl.io/owner";
// One run of `--via pod`: its pods carry the run's id, so each poll lists only its own pods.
inline constexpr std::string_view kProbePodRunLabel = "probe.gpuctl.io/run";
// The node probed, always (a label value holds only some node names).
inline constexpr std::string_view kProbePodNodeAnnotation = "probe.gpuctl.io/node";
inline constexpr std::string_view kProbeContainerName = "probe";
// Set in an unprivileged probe pod: the probe script skips the kernel log and the Fabric Manager
// check, which it cannot see from there (gpu/probe.cpp).
inline constexpr std::string_view kProbeUnprivilegedEnv = "GPUCTL_PROBE_UNPRIVILEGED";
// The kubelet stops a probe pod this long after gpuctl's own deadline (activeDeadlineSeconds),
// so a pod gpuctl could not delete (killed, network gone) still ends.
inline constexpr std::chrono::seconds kProbePodDeadlineSlack{30};

struct PodProbeOptions {
  std::string namespace_name = "gpuctl-system";
  // A small, widely mirrored image with a POSIX shell.
  std::string image = "busybox:1.36";
  std::string image_pull_policy;                // "" : the cluster's default (IfNotPresent for tags)
  std::vector<std::string> image_pull_secrets;  // secret names in namespace_name
  std::string runtime_class = "nvidia";         // "" : none (a cluster whose default runtime is NVIDIA's)
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
  // Who runs gpuctl, for the owner annotation ("user@host pid=N"); empty: made from the process.
  std::string owner;
  // How often this run's pods are listed (one list for all pods in flight).
  std::chrono::milliseconds poll_interval{500};
  // The run's id (label kProbePodRunLabel); empty: a random one per read().
  std::string run_id;
};

// Pure: the probe pod for one node, exactly as it is sent (name from generateName is left to the
// server). Tests and --dry-run read it.
nlohmann::json build_probe_pod(const std::string& node, const PodProbeOptions& options);

// What one probe pod's status says, read without I/O from the pod as listed.
enum class ProbePodStage {
  waiting,   // not running yet (Pending: scheduling, pulling, creating the container)
  running,   // the container runs
  finished,  // the container terminated: its log is the transcript
  stuck,     // it will never run the probe: outcome and message say why
};
struct ProbePodVerdict {
  ProbePodStage stage = ProbePodStage::waiting;
  // stuck: image_pull_failed, unschedulable (the kubelet refused it), probe_failed (the container
  // could not be created or started).
  std::string outcome;
  // stuck: why; waiting: what it waits for ("ContainerCreating", the waiting reason and message),
  // for the not_started message at the deadline; finished: the terminated reason and message
  // when the container ended abnormally.
  std::string message;
  int exit_code = -1;  // finished: the container's exit code
};
ProbePodVerdict classify_probe_pod(const nlohmann::json& pod);

std::unique_ptr<NodeSource> make_pod_source(kube::Client& client, PodProbeOptions options);

// `gpuctl gpus --via pod --cleanup`: every probe pod left in the namespace (by gpuctl's labels)
// deleted; the names of those deleted.
Result<std::vector<std::string>> cleanup_probe_pods(kube::Client& client, const std::string& namespace_name);

}  // namespace gpuctl::ops
