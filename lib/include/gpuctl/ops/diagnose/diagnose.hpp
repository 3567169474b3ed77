#pragma once
// gpuctl diagnose (issue 15): the cluster's GPU failures, found, explained and ranked. Checks are
// data, like submit's pre-flight table: each has a stable id, a title, the layer of a GPU node it
// judges, the lists it needs and a pure function from one gathered snapshot to findings. The
// snapshot is read once, whatever the number of checks; a list that could not be read (RBAC, an
// error) skips the checks that need it, with the reason, and never stops the others.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/gpu/xid.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::diagnose {

enum class Severity { info, warning, error, critical };
std::string_view to_string(Severity severity);
// "critical", "error", "warning" or "info"; nullopt otherwise.
std::optional<Severity> parse_severity(std::string_view text);

// The layers of a GPU node, in the order an admin rules them out: the first failing one is the
// node's verdict ("gpu-7: first failing layer: device plugin"). The node's own layers come first
// (what ssh and nvidia-smi show: reachable, the driver loaded and answering, every GPU present,
// no fatal Xid or ECC error), then what Kubernetes shows.
enum class Layer {
  reachable,
  driver,
  gpus_present,
  gpu_errors,
  node,
  network,
  device_plugin,
  gpus_registered,
  gpus_healthy,
  gpu_pods,
  workload
};
std::string_view to_string(Layer layer);

// What the snapshot holds; a check names the ones it reads. Most are lists. plugin_pods are the
// pods of the device plugin DaemonSets (read after daemon_sets, whatever -n says), plugin_logs
// their recent logs and job_logs the last lines of failed GPU Jobs' pods (read after those), each
// {namespace, pod, container, node, previous, text, error}; server_version is GET /version (one
// item), api_groups the discovery document GET /apis (one item). node_probes are the GPU nodes
// probed over ssh (gpuctl gpus' probe), held in Snapshot::probes, not in a list. dra is what
// resource.k8s.io holds (ResourceSlices, ResourceClaims, DeviceClasses, DeviceTaintRules), read
// by ops::collect_dra into Snapshot::dra; a cluster that does not serve it reads as an inventory
// with served == false, about which the DRA checks have nothing to say.
enum class Source {
  nodes,
  pods,
  events,
  pvcs,
  pvs,
  storage_classes,
  quotas,
  limit_ranges,
  jobs,
  daemon_sets,
  plugin_pods,
  plugin_logs,
  job_logs,
  server_version,
  api_groups,
  node_probes,
  dra
};
std::string_view to_string(Source source);

struct ObjectRef {
  std::string kind;  // Node, Pod, Job, PersistentVolumeClaim, ...
  std::string namespace_name;
  std::string name;
};

// What proves a finding: the exact condition, event, log line or field, where it came from and when.
struct Evidence {
  std::string source;  // "node gpu-7 condition Ready", "event FailedMount", "pod log nvidia-device-plugin-x"
  std::string text;    // verbatim
  std::string time;    // RFC 3339, "" when the source has none
};

struct Finding {
  std::string check;  // the check's id
  Severity severity = Severity::warning;
  ObjectRef object;
  std::string node;     // the node it concerns, "" when none
  std::string summary;  // one line, with the numbers
  std::vector<Evidence> evidence;
  std::vector<std::string> remedy;  // commands to run, with the real names filled in
};

// The knobs the checks read (flags of `gpuctl diagnose`); the defaults are the documented ones.
struct Settings {
  std::chrono::seconds since{3600};  // --since: events and logs within this window count
  int restart_threshold = 5;         // restart-storm: a container restarted at least this often
  // jobs-not-cleaned: finished GPU Jobs older than this (gpuctl jobs clean --older-than's unit)
  std::chrono::seconds jobs_older_than{24 * 3600};
  // --device-plugin-selector: a label selector naming the device plugin DaemonSets; "" means the
  // names and labels NVIDIA's static manifest, Helm chart and GPU Operator use.
  std::string device_plugin_selector;
  int gpu_memory_threshold_percent = 90;  // --gpu-memory-threshold: gpu-memory-high above this
  gpu::XidPolicy xid;                     // the repeat rules of xid-errors
};

// One read of the cluster. `now` is when it was read, so ages in findings are reproducible.
struct Snapshot {
  std::chrono::system_clock::time_point now;
  Settings settings;
  std::map<Source, std::vector<nlohmann::json>> lists;
  std::map<Source, std::string> unavailable;             // why a list could not be read ("forbidden: ...")
  std::map<Source, std::string> not_wanted;              // what the caller chose not to read, and how ("--no-ssh")
  std::map<std::string, NodeProbe, std::less<>> probes;  // Source::node_probes, by node name
  std::string probes_via;           // where node_probes came from: "ssh", "pod", "prometheus" ("" when not read)
  std::optional<DraInventory> dra;  // Source::dra; nullopt when not read

  // The list, or an empty one when it was not read.
  const std::vector<nlohmann::json>& list(Source source) const;
};

struct Check {
  std::string_view id;     // kebab-case, stable: --check, --skip, suppressions and JSON use it
  std::string_view title;  // what it looks for, one line
  Layer layer;
  std::vector<Source> needs;
  Severity severity;  // the default severity of its findings
  std::vector<Finding> (*run)(const Snapshot&);
  // Read when they can be: the check still runs without them, saying less (gpu-pods-pending
  // names an unbound claim only when PVCs are readable).
  std::vector<Source> uses_if_readable = {};
  // A node-side check the DCGM exporter's metrics can answer (--via prometheus); the others need
  // nvidia-smi on the node (a driver that does not load, warnings, NVLink state) and are skipped
  // with that reason when the node data came from Prometheus, never passed.
  bool from_metrics = false;
};

// Every check, in the order they run and are listed.
const std::vector<Check>& checks();
const Check* find_check(std::string_view id);

// The checks' own functions, for tests and callers. Each reads only its `needs`.
//
// node-not-ready (critical): a GPU node whose Ready condition is False or Unknown, how long since
// it changed, and the GPU pods stranded there (needs nodes, pods).
std::vector<Finding> check_node_not_ready(const Snapshot& snapshot);
// node-network-unavailable (error): NetworkUnavailable=True on a GPU node: pods placed there hang.
std::vector<Finding> check_node_network_unavailable(const Snapshot& snapshot);
// node-pressure (warning): MemoryPressure, DiskPressure or PIDPressure True on a GPU node.
std::vector<Finding> check_node_pressure(const Snapshot& snapshot);
// gpu-unhealthy-devices (error): allocatable below capacity for an nvidia.com/* resource: the
// device plugin marked GPUs unhealthy.
std::vector<Finding> check_gpu_unhealthy_devices(const Snapshot& snapshot);
// device-plugin-missing (critical): a node that looks like a GPU node (a GPU product label or
// nvidia.com/gpu.present=true) but advertises no nvidia.com/* capacity: the plugin never registered.
// Nodes whose GPUs NVIDIA's DRA driver publishes (Source::dra, when readable) are left out.
std::vector<Finding> check_device_plugin_missing(const Snapshot& snapshot);
// gpu-allocation-failed (error): GPU pods the kubelet refused at admission (UnexpectedAdmissionError,
// "Allocate failed due to ..."), per node, with the cause read from the message (pods, events).
std::vector<Finding> check_gpu_allocation_failed(const Snapshot& snapshot);
// gpu-pods-pending (error; warning when only no GPUs are free now): GPU pods the scheduler cannot
// place, with the cause in numbers, and GPU Jobs whose pods quota refuses (nodes, pods, events).
std::vector<Finding> check_gpu_pods_pending(const Snapshot& snapshot);
// oom-killed (warning): containers of GPU pods whose last termination was OOMKilled, with the limit.
std::vector<Finding> check_oom_killed(const Snapshot& snapshot);
// restart-storm (warning): GPU pods' containers restarted at least settings.restart_threshold
// times, crash-looping now or last terminated within settings.since.
std::vector<Finding> check_restart_storm(const Snapshot& snapshot);
// pvc-unbound (error): claims Pending (which of class, size, access mode or selector keeps every
// PV away, or the provisioner) or Lost, with the pods waiting on them; parallel GPU Jobs sharing a
// ReadWriteOnce claim (warning).
std::vector<Finding> check_pvc_unbound(const Snapshot& snapshot);
// volume-mount-failed (error): FailedMount / FailedAttachVolume events of GPU pods, grouped by
// cause and NFS export (server unreachable, export missing, access denied, client missing, ...).
std::vector<Finding> check_volume_mount_failed(const Snapshot& snapshot);
// device-plugin-unhealthy (critical): GPU nodes without a device plugin pod (but those whose GPUs
// are DRA devices only) and why (the DaemonSet's placement or tolerations), plugin pods not Ready,
// crash-looping or restarting; a rollout stuck half-way and plugin versions that differ across
// nodes (warnings).
std::vector<Finding> check_device_plugin_unhealthy(const Snapshot& snapshot);
// device-plugin-log-errors (error): known failure lines in the plugin pods' recent logs
// (registration, NVML, strategy, no devices), quoted with their time.
std::vector<Finding> check_device_plugin_log_errors(const Snapshot& snapshot);
// gpu-job-failed (error): GPU Jobs failed within --since, with the GPU cause read from the failed
// pods' termination messages and the last lines of their logs.
std::vector<Finding> check_gpu_job_failed(const Snapshot& snapshot);
// jobs-not-cleaned (info): per namespace, finished GPU Jobs older than settings.jobs_older_than
// (a day) without ttlSecondsAfterFinished.
std::vector<Finding> check_jobs_not_cleaned(const Snapshot& snapshot);
// gpu-node-untainted (warning): GPU nodes without the NoSchedule taint the rest of their pool has;
// pods that use no GPU on GPU nodes, counted per namespace.
std::vector<Finding> check_gpu_node_untainted(const Snapshot& snapshot);
// gpu-taint-untolerated (warning): a GPU pool taint that no GPU pod or Job template tolerates.
std::vector<Finding> check_gpu_taint_untolerated(const Snapshot& snapshot);
// quota-not-enforced (warning): nvidia.com/* quota keys Kubernetes never enforces (gpuctl quota's findings).
std::vector<Finding> check_quota_not_enforced(const Snapshot& snapshot);
// quota-exhausted (warning): namespaces at a GPU quota's limit with workloads held back.
std::vector<Finding> check_quota_exhausted(const Snapshot& snapshot);
// kubelet-version-skew (error; warning for mixed pools): GPU nodes' kubelets newer than the API
// server or more than 3 minor versions behind; pools running several kubelet versions.
std::vector<Finding> check_kubelet_version_skew(const Snapshot& snapshot);
// driver-too-old-for-cuda (error): GPU pods whose container needs a newer CUDA (NVIDIA_REQUIRE_CUDA,
// CUDA_VERSION, the image tag) than the driver of their node (GFD's labels) gives.
std::vector<Finding> check_driver_too_old_for_cuda(const Snapshot& snapshot);
// monitoring-missing (info): no metrics.k8s.io API, no DCGM exporter DaemonSet.
std::vector<Finding> check_monitoring_missing(const Snapshot& snapshot);

// Node side (issue 16): what ssh and the probe show (node_probes), joined with Kubernetes.
//
// node-unreachable (error): GPU nodes ssh cannot reach, classified and joined with Kubernetes:
// NotReady and timing out is a node down or cut off; Ready and unreachable a management-network
// or ssh configuration problem; NetworkUnavailable said explicitly.
std::vector<Finding> check_node_unreachable(const Snapshot& snapshot);
// driver-broken (critical when the node is Ready): nvidia-smi fails on the node or on some of its
// GPUs (driver not loaded, library mismatch, GPU lost, no devices, permissions, hung), with the
// message verbatim and the remedy for its kind.
std::vector<Finding> check_driver_broken(const Snapshot& snapshot);
// nvidia-smi-warnings (warning): what nvidia-smi warns about next to good data (infoROM corrupted).
std::vector<Finding> check_nvidia_smi_warnings(const Snapshot& snapshot);
// gpu-count-mismatch (error): GPUs nvidia-smi sees versus nvidia.com/gpu capacity versus GFD's
// nvidia.com/gpu.count label.
std::vector<Finding> check_gpu_count_mismatch(const Snapshot& snapshot);
// driver-version-skew (warning): nodes whose driver differs from the most common one of their
// product pool, with the fleet's versions and node counts (probe, else GFD labels).
std::vector<Finding> check_driver_version_skew(const Snapshot& snapshot);
// xid-errors (by NVIDIA's recommended action): Xid and SXid events of the kernel log within
// --since, per GPU and NVSwitch, classified from the catalogue (gpu/xid.hpp).
std::vector<Finding> check_xid_errors(const Snapshot& snapshot);
// ecc-errors (error; critical for a failed row remap): uncorrectable ECC errors, retired pages or
// remapped rows pending a reset, row remapping failures.
std::vector<Finding> check_ecc_errors(const Snapshot& snapshot);
// gpu-throttled (warning): hardware slowdown, thermal or power-brake clock events active, or the
// temperature within 5 C of the slowdown point.
std::vector<Finding> check_gpu_throttled(const Snapshot& snapshot);
// gpu-memory-high (warning): GPUs above settings.gpu_memory_threshold_percent of their memory,
// with the pods holding the node's GPUs.
std::vector<Finding> check_gpu_memory_high(const Snapshot& snapshot);
// gpu-idle-allocated (info): nodes whose pods hold more GPUs than were computing (utilization above
// 0%) when probed.
std::vector<Finding> check_gpu_idle_allocated(const Snapshot& snapshot);
// pcie-link-degraded (warning): a GPU's PCIe link narrower than its widest sibling's (and than it
// can be), or a lower generation than it can do at 30% load or more.
std::vector<Finding> check_pcie_link_degraded(const Snapshot& snapshot);
// nvlink-down (error): inactive NVLinks on a node whose GPUs have NVLink.
std::vector<Finding> check_nvlink_down(const Snapshot& snapshot);
// fabric-manager-down (critical): an NVSwitch system without nv-fabricmanager, or GPUs whose
// fabric registration has not completed: CUDA cannot start there.
std::vector<Finding> check_fabric_manager_down(const Snapshot& snapshot);
// persistence-mode-off (info): GPUs without persistence mode.
std::vector<Finding> check_persistence_mode_off(const Snapshot& snapshot);

// GPUs as DRA devices (issue 19): what resource.k8s.io shows (Source::dra), joined with the pods
// and nodes. A cluster without the API passes them all.
//
// dra-device-tainted (by the taint): a DRA GPU device with a taint, from the driver's health check
// in its slice (gpu.nvidia.com/xid=<code>, gpu.nvidia.com/gpu-lost, gpu.nvidia.com/unmonitored)
// or from a DeviceTaintRule: critical for a lost GPU and for Xids NVIDIA says need a reset or a
// reboot, error for other NoSchedule/NoExecute taints, info for None; with the pods still holding
// the device (NoSchedule evicts nobody).
std::vector<Finding> check_dra_device_tainted(const Snapshot& snapshot);
// dra-pool-incomplete (error): pools left out of the counts (slices missing, sizes disagreeing, a
// device published twice): that node's GPUs cannot be allocated through DRA until the driver
// republishes.
std::vector<Finding> check_dra_pool_incomplete(const Snapshot& snapshot);
// dra-claim-unallocated (error): ResourceClaims of pending pods that are not allocated (or do not
// exist), with the scheduler's reason, the claim's requests and how many free devices match them.
std::vector<Finding> check_dra_claim_unallocated(const Snapshot& snapshot);
// dra-class-matches-nothing (warning when a claim requests it, info otherwise): DeviceClasses whose
// selectors match no device; a class gpuctl cannot evaluate is info saying so, never "matches nothing".
std::vector<Finding> check_dra_class_matches_nothing(const Snapshot& snapshot);
// dra-double-advertised (warning): GPU nodes whose GPUs the device plugin advertises (nvidia.com/*)
// and NVIDIA's DRA driver publishes too: two pods can be given the same GPU.
std::vector<Finding> check_dra_double_advertised(const Snapshot& snapshot);

// One node's own health, for acting on it (uncordon --verify, drain --rolling --verify,
// diagnose --quarantine): the checks that read only the node and its probe (node-unreachable,
// driver-broken, gpu-count-mismatch, xid-errors, ecc-errors, fabric-manager-down, ...) run over a
// snapshot of this node alone; returns their findings of severity critical (what must keep a
// node out of service), worst first. Pure.
std::vector<Finding> critical_node_findings(const nlohmann::json& node, const NodeProbe& probe,
                                            const Settings& settings);

enum class CheckStatus { pass, fail, skipped };
std::string_view to_string(CheckStatus status);

struct CheckRun {
  std::string id;
  CheckStatus status = CheckStatus::pass;
  std::string skipped_because;  // the unavailable list and why, or the caller's choice ("--no-ssh")
  std::chrono::microseconds duration{0};
  bool by_request = false;  // skipped because the caller asked (--no-ssh), not for a failure
};

// A GPU node's verdict: the first layer (in Layer order) with a finding of severity error or worse
// on that node, the check that found it and its summary; every layer passed when `layer` is empty.
struct NodeVerdict {
  std::string node;
  std::optional<Layer> layer;
  std::string check;
  std::string summary;
};

// A finding an admin chose not to see (--suppress), with the rule's reason and end date.
struct SuppressedFinding {
  Finding finding;
  std::string reason;
  std::string until;  // YYYY-MM-DD, "" when the rule has no end
};

struct Report {
  std::vector<CheckRun> checks;
  std::vector<Finding> findings;      // ordered by severity (critical first), then node, then check
  std::vector<NodeVerdict> verdicts;  // one per GPU node of the snapshot, by name
  std::vector<SuppressedFinding> suppressed;
};

// Which checks run: every one unless `only` names some; never those in `skip`. Unknown ids are
// refused (Errc::invalid_argument, naming the id and `gpuctl diagnose --list-checks`).
struct Selection {
  std::vector<std::string> only;
  std::vector<std::string> skip;
};
Result<std::vector<const Check*>> select_checks(const Selection& selection);

// Pure but for the clock it reads for durations: runs the selected checks over the snapshot and
// judges every GPU node (node_verdicts).
Report run_checks(const Snapshot& snapshot, const std::vector<const Check*>& selected);
// The per-node verdicts from the findings (see NodeVerdict): GPU nodes of the snapshot, by name.
std::vector<NodeVerdict> node_verdicts(const Snapshot& snapshot, const std::vector<Finding>& findings);

// The stable schema (`-o json|yaml`): {"apiVersion": "gpuctl.io/v1alpha1", "kind":
// "DiagnoseReport", "checks": [{id, title, layer, severity, status, durationSeconds,
// skippedBecause}], "findings": [{check, severity, object{kind, namespace, name}, node, summary,
// evidence[{source, text, time}], remedy[]}], "nodes": [{node, firstFailingLayer (null when all
// pass), check, summary}], "suppressed": [{finding, reason, until}], "summary": {critical, error,
// warning, info, suppressed, checksPassed, checksFailed, checksSkipped, nodesFailing}}.
nlohmann::json to_json(const Report& report);
// `--list-checks -o json|yaml`: {"kind": "DiagnoseCheckList", "items": [{id, title, layer,
// severity, needs[]}]}.
nlohmann::json checks_to_json(const std::vector<const Check*>& listed);

// What to read: the lists the selected checks need (needed_sources), nodes by `label_selector`
// (-l), the namespaced lists of `namespace_name` ("" for every namespace).
// How the GPU nodes' data is read (Source::node_probes): the node source (ssh, probe pods or
// Prometheus, fleet/node_source.hpp) and its progress. Without a source the node-side checks are
// skipped with `disabled_because`.
struct NodeProbing {
  NodeSource* source = nullptr;
  std::string disabled_because = "--no-ssh";  // recorded in Snapshot::not_wanted
  std::function<void(std::size_t, std::size_t)> on_progress;
};

struct GatherOptions {
  std::set<Source> sources;
  std::string label_selector;
  std::string namespace_name;
  Settings settings;  // copied into the snapshot; `since` also bounds the events and logs read
  NodeProbing probing{};
};
std::set<Source> needed_sources(const std::vector<const Check*>& selected);

// One gathering pass: each needed list read once, all of them at the same time, paginated and
// projected to the fields the checks read. A list that fails (403, 404 for an API the server
// lacks, a server error) is named in Snapshot::unavailable and stops nothing. Only what stops
// every list is returned as an error: the cluster cannot be reached, or it refuses the
// credentials (401), or the local configuration is unusable.
Result<Snapshot> gather(kube::Client& client, const GatherOptions& options);

}  // namespace gpuctl::ops::diagnose
