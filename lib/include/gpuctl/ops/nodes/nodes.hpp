#pragma once
// The GPU inventory behind `gpuctl nodes`: per node, what Kubernetes says about its GPUs
// (product, capacity, allocatable, requested by pods, free, unhealthy), and a summary per
// product. The counts come from the device plugin (the node's nvidia.com/* extended resources
// and the pods' requests) or, on a node whose GPUs NVIDIA's DRA driver publishes, from its
// ResourceSlices and the claims allocated from them; never both for the same GPUs. Built from
// two paginated lists (nodes, non-terminal pods) and, where resource.k8s.io/v1 is served, the DRA
// lists of ops/dra, whatever the cluster size.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// Where a node's GPU counts come from.
inline constexpr std::string_view kSourceDevicePlugin = "devicePlugin";
inline constexpr std::string_view kSourceDra = "dra";

struct ResourceCount {
  std::string name;  // e.g. "nvidia.com/mig-1g.5gb"; DRA devices take the name the device plugin gives them
  std::int64_t capacity = 0;
  std::int64_t allocatable = 0;     // DRA: devices without a NoSchedule/NoExecute taint
  std::int64_t used = 0;            // requested by non-terminal pods bound to the node; DRA: allocated devices
  std::int64_t used_unhealthy = 0;  // DRA: allocated devices that are also tainted (in used and not allocatable)
  std::string source = std::string(kSourceDevicePlugin);
  std::int64_t free() const {
    std::int64_t healthy_used = kube::saturating_sub(used, used_unhealthy);
    return allocatable > healthy_used ? kube::saturating_sub(allocatable, healthy_used) : 0;
  }
};

// A DRA device's taint as `nodes -o wide` and the JSON show it.
struct NodeDeviceTaint {
  std::string device;
  DraDeviceTaint taint;
};

struct CordonRecord {
  std::string reason;
  std::string by;
  std::string at;  // RFC 3339
};

struct NodeGpuInfo {
  std::string name;
  std::string readiness;  // Ready, NotReady or Unknown
  bool schedulable = true;
  std::string product;                         // "" when no label names it
  std::string product_label;                   // the label key the product came from
  ResourceCount gpus;                          // nvidia.com/gpu
  std::vector<ResourceCount> other_resources;  // every other nvidia.com/* resource (MIG, shared)
  std::int64_t gpu_pods = 0;                   // non-terminal pods requesting any nvidia.com/* resource
  std::vector<kube::Taint> taints;
  std::optional<CordonRecord> cordon;
  std::string driver_version;  // from GPU Feature Discovery labels, "" when absent
  std::string cuda_version;
  std::vector<kube::NodeCondition> problem_conditions;  // pressure or network conditions that are True
  std::string internal_ip;
  std::string kubelet_version;
  std::string created_at;  // RFC 3339
  std::int64_t age_seconds = 0;
  bool gpu_node = false;
  // kSourceDevicePlugin or kSourceDra: where `gpus` and the MIG rows of other_resources come from.
  std::string source = std::string(kSourceDevicePlugin);
  // A DRA node that also advertises nvidia.com/gpu through a device plugin: the same GPUs
  // offered twice (diagnose names it); the plugin's count, kept out of every total.
  std::optional<ResourceCount> device_plugin_gpus;
  std::vector<NodeDeviceTaint> device_taints;  // DRA devices' taints, the driver's and DeviceTaintRules'

  std::int64_t unhealthy() const { return unhealthy_of(gpus); }
  static std::int64_t unhealthy_of(const ResourceCount& rc) {
    return rc.capacity > rc.allocatable ? kube::saturating_sub(rc.capacity, rc.allocatable) : 0;
  }
  // What the node offers, for the default table and the sort keys: its whole GPUs, or on a node
  // whose GPUs are all MIG-partitioned (no whole GPU left), its MIG devices summed, named
  // "nvidia.com/mig-1g.5gb" or, for several profiles, every name joined with ",".
  ResourceCount offered() const;
};

// One row of the summary: a product and one of its resources. Whole GPUs (nvidia.com/gpu) come
// first; MIG and other nvidia.com/* resources get rows of their own, so a MIG-partitioned fleet
// (no whole GPUs left) still shows what it offers. A product's whole-GPU row is left out when
// none of its nodes has whole GPUs but it offers other resources.
struct ProductSummary {
  std::string product;  // "" for GPU nodes with no product label
  std::string resource = std::string(kGpuResource);
  std::string source = std::string(kSourceDevicePlugin);  // "devicePlugin", "dra" or "devicePlugin,dra"
  std::int64_t nodes = 0;                                 // nodes of this product that offer this resource
  std::int64_t capacity = 0;
  std::int64_t allocatable = 0;
  std::int64_t used = 0;
  std::int64_t free = 0;
};

struct NodeInventory {
  std::vector<NodeGpuInfo> nodes;
  std::vector<ProductSummary> products;  // GPU nodes only, sorted by product, then resource
  // Nodes and pods left out because a field had the wrong type ("node/x skipped: ..."); the
  // command names them and exits 1.
  std::vector<std::string> skipped;
  // DRA lists that could not be read (forbidden): the counts may miss DRA GPUs; named on stderr.
  std::vector<std::string> warnings;
};

struct NodeInventoryOptions {
  std::string label_selector;
  bool include_non_gpu_nodes = false;  // --all
  bool from_cache = false;             // read lists from the watch cache
  bool dra = true;                     // read ResourceSlices and ResourceClaims where served
};

// Pure: the inventory from node and pod objects and, when given, the DRA inventory. `now` fixes
// the ages.
NodeInventory build_node_inventory(const std::vector<nlohmann::json>& nodes, const std::vector<nlohmann::json>& pods,
                                   bool include_non_gpu_nodes, std::chrono::system_clock::time_point now,
                                   const DraInventory* dra = nullptr);

// The fields the inventory reads of nodes and of pods; lists for it decode only these.
const kube::Projection& inventory_node_fields();
const kube::Projection& inventory_pod_fields();

// Lists nodes and non-terminal bound pods (two paginated lists), and the DRA objects where
// served, and builds the inventory.
// `dra_out`, when given, receives the DRA objects the counts came from (drain plans with them).
Result<NodeInventory> collect_node_inventory(kube::Client& client, const NodeInventoryOptions& options,
                                             DraInventory* dra_out = nullptr);

// Sort keys accepted by sort_nodes (and --sort-by).
const std::vector<std::string_view>& node_sort_keys();
// Sorts in place; ties keep name order. Returns an invalid_argument error for an unknown key.
Result<void> sort_nodes(std::vector<NodeGpuInfo>& nodes, std::string_view key);

// gpuctl's stable output schema (apiVersion gpuctl.io/v1alpha1, kind GPUNodeList).
nlohmann::json to_json(const NodeInventory& inventory);

}  // namespace gpuctl::ops
