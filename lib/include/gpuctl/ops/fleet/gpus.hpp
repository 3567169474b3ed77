#pragma once
// The live GPU view behind `gpuctl gpus` and `gpuctl nodes --live`: every chosen GPU node probed
// over ssh (the fixed probe script of gpu/probe.hpp, bounded fan-out, a hard deadline per
// host), joined with what Kubernetes says about the node: allocatable and used GPUs, and which
// pods hold them. A node that does not answer is a result with a classified reason, never an
// error of the whole run.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/gpu/probe.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ssh/runner.hpp"
#include "gpuctl/ssh/ssh.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

class NodeSource;  // node_source.hpp

// One node reached (or not) over ssh.
struct NodeProbe {
  std::string node;
  std::string address;
  // "ok", "partial", "inforom_corrupted" (every GPU answered, one with that warning), an
  // ssh::HostOutcome name other than ok (unreachable, auth_failed,
  // host_key_mismatch, timed_out, ssh_missing, ssh_error, no_address), or an nvidia-smi
  // failure kind (driver_not_loaded, driver_library_mismatch, gpu_lost, ...). Through a probe
  // pod (via "pod") also: timed_out, image_pull_failed, not_started, unschedulable,
  // admission_refused, probe_failed, interrupted. From Prometheus (via "prometheus") also: stale
  // (the newest samples are older than the threshold), no_exporter (no series for the node).
  std::string outcome;
  std::string message;  // one line; empty when ok
  // Where the data came from: "ssh", "pod" or "prometheus" (to_string(Via), node_source.hpp).
  std::string via = "ssh";
  // Prometheus: when the node's newest sample was taken (unix seconds).
  std::optional<std::int64_t> sampled_at_unix_s;
  // When ssh worked and the probe ran (also when it then hung: outcome timed_out, truncated).
  std::optional<gpu::NodeGpuReport> report;
  int exit_code = -1;
  std::chrono::milliseconds duration{0};
  // Its GPUs answered: all (ok, or inforom_corrupted: all, with nvidia-smi's warning), or some.
  bool answered() const { return outcome == "ok" || outcome == "partial" || outcome == "inforom_corrupted"; }
};

struct ProbeTarget {
  std::string node;
  std::string address;  // empty: the address could not be found (address_error says why)
  std::string address_error;
};

struct ProbeOptions {
  int fanout = 32;
  std::size_t output_cap = 8 * 1024 * 1024;
  // Progress: called as each host finishes, with (done, total).
  std::function<void(std::size_t, std::size_t)> on_progress;
};

// Probes every target through `runner` at once (bounded by fanout); results in target order.
// Targets without an address are reported no_address and never reach the runner.
Result<std::vector<NodeProbe>> probe_nodes(ssh::Runner& runner, const std::vector<ProbeTarget>& targets,
                                           const ProbeOptions& options);

// Where ssh reaches each node (--ssh-host-from's rule), or why it cannot. Pure.
std::vector<ProbeTarget> probe_targets(const std::vector<nlohmann::json>& nodes, const ssh::AddressRule& rule);

// Reads one finished run of the probe into a NodeProbe. A run killed at its deadline after the
// probe started keeps outcome timed_out and gets the report of what it printed. Pure.
NodeProbe read_probe_run(const ProbeTarget& target, const ssh::HostRun& run);

// Identical failures across nodes, grouped as `dshbak -c` groups identical output.
struct FailureGroup {
  std::string outcome;
  std::string message;
  std::vector<std::string> nodes;
};
std::vector<FailureGroup> group_failures(const std::vector<NodeProbe>& probes);

// A pod holding nvidia.com/* resources on a node.
struct GpuPod {
  std::string namespace_name;
  std::string name;
  std::map<std::string, std::int64_t> resources;  // nvidia.com/gpu: 2
};

// A DRA device of the node and who holds it: the claim and the pods it is reserved for. Joined
// with the live GPUs by UUID (a MIG device by its parent's UUID), this says which pod has which
// GPU, exactly, which the device plugin cannot tell.
struct DraDeviceHolding {
  DraDevice device;
  std::string claim_namespace;  // "" when free
  std::string claim_name;
  bool extended_resource = false;  // the scheduler's claim for a plain nvidia.com/gpu request
  std::vector<std::string> pods;   // "namespace/name"
};

struct NodeGpuView {
  NodeGpuInfo kube;  // Kubernetes' view: product, allocatable, used, ...
  std::vector<GpuPod> pods;
  NodeProbe probe;
  std::vector<DraDeviceHolding> dra_devices;  // NVIDIA's DRA devices on the node, by name

  // The devices standing for one live GPU: the whole GPU with that UUID, or its MIG partitions.
  std::vector<const DraDeviceHolding*> dra_devices_of(std::string_view gpu_uuid) const;
};

// Pure: each node's DRA devices with their holders, by node name.
std::map<std::string, std::vector<DraDeviceHolding>> dra_holdings_by_node(const DraInventory& dra);

struct GpuView {
  std::vector<NodeGpuView> nodes;  // by name
  std::vector<FailureGroup> failures;
  // Nodes and pods left out because a field had the wrong type ("node/x skipped: ..."): named
  // on stderr, exit 1, the other nodes probed as usual.
  std::vector<std::string> skipped;
  std::vector<std::string> warnings;  // DRA lists that could not be read (forbidden)
};

// How `gpus` reads the pods of the chosen nodes: up to kPerNodePodListMax nodes, or at most a
// kPerNodeShare-th of the cluster's nodes (when names or a selector narrowed the choice), each
// node's with its own field selector (spec.nodeName=NODE, served from the watch cache's node
// index, from a few threads); else one list of every bound pod, of which only the chosen nodes'
// are kept. One node of a 5,000-node fleet: ~10 pods instead of 50,000 (8 s).
inline constexpr std::size_t kPerNodePodListMax = 32;
inline constexpr std::int64_t kPerNodeShare = 4;

struct GpuViewOptions {
  std::vector<std::string> names;  // empty: every GPU node (or the selector's)
  std::string label_selector;
  // Progress of the node source: (done, total) as each node's data is in.
  std::function<void(std::size_t, std::size_t)> on_progress;
  bool dra = true;  // read ResourceSlices and ResourceClaims where served, to say which pod has which GPU
};

// Two paginated lists (nodes, bound pods) and the DRA objects where served, then the chosen
// nodes read through `source` (ssh, probe pods or Prometheus, node_source.hpp). Names that are
// not nodes are an error naming them (nothing is probed); nodes that are not GPU nodes are probed
// all the same when named.
Result<GpuView> collect_gpu_view(kube::Client& client, NodeSource& source, const GpuViewOptions& options);

// What `gpuctl nodes --live` adds per node: the node's own word on its driver and load.
struct LiveSummary {
  std::string outcome;  // as NodeProbe::outcome
  std::string message;
  std::string via;                            // as NodeProbe::via
  std::string driver_version;                 // "" when not reported
  std::optional<double> utilization_percent;  // mean over the GPUs that reported it
  std::int64_t memory_used_mib = 0;           // sums over the GPUs that reported memory
  std::int64_t memory_total_mib = 0;
  int gpus_answered = 0;
};
LiveSummary summarize(const NodeProbe& probe);
nlohmann::json to_json(const LiveSummary& live);

// `gpuctl nodes --live -o json|yaml`: the inventory's schema (GPUNodeList) with each item's
// "live" set to its node's summary, or null for a node that was not probed (not a GPU node).
nlohmann::json to_json(const NodeInventory& inventory, const std::map<std::string, LiveSummary>& live);

nlohmann::json to_json(const DraDeviceHolding& holding);

// The stable schema: apiVersion gpuctl.io/v1alpha1, kind GPUList.
nlohmann::json to_json(const GpuView& view);

}  // namespace gpuctl::ops
