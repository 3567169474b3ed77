#pragma once
// What the checks share (private to lib/src/ops/diagnose): how a finding about a node or a pod is
// built, which pods are GPU pods, and how events are read and quoted as evidence.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/gpu/cuda_compat.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"

namespace gpuctl::ops::diagnose::support {

// The JSON readers every check uses (`using namespace support;` brings them in).
using json = nlohmann::json;
using kube::field;
using kube::field_at;
using kube::string_field;

Finding node_finding(std::string_view check, Severity severity, const std::string& node, std::string summary);
// A finding about a namespaced object (Pod, Job, PersistentVolumeClaim, ...).
Finding object_finding(std::string_view check, Severity severity, std::string kind, const nlohmann::json& object,
                       std::string summary);

// "a, b, c and 4 more".
std::string first_few(const std::vector<std::string>& names, std::size_t shown = 3);

// The pod's nvidia.com/* requests added up (its effective request: max(init, sum of app containers)).
std::int64_t gpu_request(const nlohmann::json& pod);
// Asks for nvidia.com/* or uses DRA claims (spec.resourceClaims, or the claim the scheduler made
// for its extended resource): where GPUs are DRA devices, a pod's GPUs are in its claims. A claim
// for another kind of device counts too: the pod alone does not say which devices it holds.
bool is_gpu_pod(const nlohmann::json& pod);
// "ns/name".
std::string pod_ref(const nlohmann::json& pod);
// "ns/name" of the non-terminal GPU pods, by the node they are bound to: one walk of the pods.
std::map<std::string, std::vector<std::string>> gpu_pods_by_node(const Snapshot& snapshot);
// The pod's Job, from its ownerReferences; "" when a Job does not own it.
std::string owning_job(const nlohmann::json& pod);

// The snapshot's nodes by name, built once per check so that looking one up per pod stays cheap
// at thousands of nodes.
std::map<std::string, const nlohmann::json*, std::less<>> nodes_by_name(const Snapshot& snapshot);

// The event's last time: series.lastObservedTime, lastTimestamp, eventTime, then
// firstTimestamp, then metadata.creationTimestamp (the kubelet and the scheduler write different ones).
std::string event_time(const nlohmann::json& event);
// Its count: series.count, else count, else 1.
std::int64_t event_count(const nlohmann::json& event);
// The snapshot's events (already cut to --since by gather) by involvedObject, in list order:
// built once per check, so finding one object's events does not walk every event again.
class EventIndex {
 public:
  explicit EventIndex(const Snapshot& snapshot);
  const std::vector<const nlohmann::json*>& about(std::string_view kind, std::string_view namespace_name,
                                                  std::string_view name) const;

 private:
  std::map<std::string, std::vector<const nlohmann::json*>, std::less<>> by_object_;
};
// "event FailedMount from kubelet on gpu-7 (x12)" + the message verbatim + the time.
Evidence event_evidence(const nlohmann::json& event);
// The node an event was reported from: source.host, else reportingInstance.
std::string event_host(const nlohmann::json& event);

// A log line read with timestamps=true: {the RFC 3339 time the kubelet added, the line as the
// container wrote it}; {"", line} when it carries no time.
std::pair<std::string, std::string> split_timestamp(std::string_view line);
// Calls `each` with every line of `text` (without its newline).
void for_each_line(std::string_view text, const std::function<void(std::string_view)>& each);

}  // namespace gpuctl::ops::diagnose::support

namespace gpuctl::ops::diagnose::support {

// Is this DaemonSet the GPU device plugin? With `selector` (a parsed label selector, --device-
// plugin-selector) only its labels decide; else looks_like_device_plugin (gpu_vocabulary).
bool is_device_plugin(const nlohmann::json& daemon_set, const nlohmann::json* selector);
// The DaemonSet's spec.selector.matchLabels as a label selector string ("k=v,k2=v2"); "" when none.
std::string selector_string(const nlohmann::json& daemon_set);
// Is the pod owned by this controller (ownerReferences kind and name)?
bool owned_by(const nlohmann::json& pod, std::string_view kind, std::string_view name);

}  // namespace gpuctl::ops::diagnose::support

namespace gpuctl::ops::diagnose::support {

// --- The node side (Source::node_probes) ---

// The node's probe, nullptr when it was not probed.
const NodeProbe* probe_of(const Snapshot& snapshot, std::string_view node);
// The node's condition of this type (Ready, NetworkUnavailable, ...), nullopt when it has none.
std::optional<kube::NodeCondition> node_condition(const nlohmann::json& node, std::string_view type);
// The node's ready condition: true, false (False or Unknown), nullopt when it has none.
std::optional<bool> node_ready(const nlohmann::json& node);
// "GPU 3 (00000000:3B:00.0)", the bus id when nvidia-smi gave one.
std::string gpu_name(const gpu::GpuInfo& gpu);
// Evidence quoted from what the node source read: source "ssh gpu-7: <what>", "probe pod on
// gpu-7: <what>", or "Prometheus gpu-7: dcgm-exporter" (the metrics, whatever nvidia-smi section
// the check would read over ssh).
Evidence probe_evidence(const NodeProbe& probe, std::string_view what, std::string text, std::string time = "");
// A remedy that runs a command on the node ("ssh NODE CMD", as the checks write them), for a run
// that read the node through a probe pod or Prometheus, where ssh may not reach it: the same
// command in a node debug pod, `kubectl debug node/NODE -it --profile=sysadmin --image=busybox:1.36
// -- chroot /host CMD`. Any other remedy is returned as it is. Pure.
std::string remedy_without_ssh(const std::string& remedy, const std::string& node);
// What read the node's GPUs, for a finding's words: "nvidia-smi", or "the DCGM exporter".
std::string_view gpu_reader(const NodeProbe& probe);
// The probe's answered GPU nodes with a report, in snapshot order of the node list: (node JSON,
// probe). Nodes without a probe or whose probe gave no report are left out.
std::vector<std::pair<const nlohmann::json*, const NodeProbe*>> probed_nodes(const Snapshot& snapshot);
// The node's driver: what the probe read, else GPU Feature Discovery's labels; nullopt when neither.
std::optional<gpu::DriverVersion> node_driver(const Snapshot& snapshot, const nlohmann::json& node);
// Where node_driver read it: "ssh gpu-7: nvidia-smi" or "node gpu-7 label ...".
std::string driver_source(const Snapshot& snapshot, const std::string& node);

}  // namespace gpuctl::ops::diagnose::support

namespace gpuctl::ops::diagnose::support {

// --- GPUs as DRA devices (Source::dra) ---

// The snapshot's DRA inventory; nullptr when it was not read or the cluster does not serve
// resource.k8s.io/v1 (then the DRA checks have nothing to say).
const DraInventory* dra_of(const Snapshot& snapshot);
// Why the inventory's list of `plural` (resourceslices, resourceclaims, deviceclasses,
// devicetaintrules) could not be read: collect_dra's warning naming it (a 403), "" when it was
// read. Without the claims, who holds a device and which claims exist are not known; without the
// rules, the taints they add.
std::string dra_unread(const DraInventory& inventory, std::string_view plural);
// The nodes whose GPUs NVIDIA's DRA driver publishes (read once per check); empty when DRA was
// not read or is not served.
std::set<std::string, std::less<>> dra_gpu_nodes(const Snapshot& snapshot);
// A node whose GPUs are DRA devices only: published by the DRA driver, no nvidia.com/* resource
// advertised. No device plugin is expected there (GPU Feature Discovery's labels remain).
bool gpus_as_dra_only(const nlohmann::json& node, const std::set<std::string, std::less<>>& dra_nodes);

}  // namespace gpuctl::ops::diagnose::support
