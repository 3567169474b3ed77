#pragma once
// The GPU inventory behind `gpuctl nodes`: per node, what Kubernetes says about its GPUs
// (product, capacity, allocatable, requested by pods, free, unhealthy), and a summary per
// product. Built from exactly two paginated lists (nodes, non-terminal pods), whatever the
// cluster size.
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

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

struct ResourceCount {
  std::string name;  // e.g. "nvidia.com/mig-1g.5gb"
  std::int64_t capacity = 0;
  std::int64_t allocatable = 0;
  std::int64_t used = 0;  // requested by non-terminal pods bound to the node
  std::int64_t free() const { return allocatable > used ? kube::saturating_sub(allocatable, used) : 0; }
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

  std::int64_t unhealthy() const {
    return gpus.capacity > gpus.allocatable ? kube::saturating_sub(gpus.capacity, gpus.allocatable) : 0;
  }
};

// One row of the summary: a product and one of its resources. Whole GPUs (nvidia.com/gpu) come
// first; MIG and other nvidia.com/* resources get rows of their own, so a MIG-partitioned fleet
// (no whole GPUs left) still shows what it offers. A product's whole-GPU row is left out when
// none of its nodes has whole GPUs but it offers other resources.
struct ProductSummary {
  std::string product;  // "" for GPU nodes with no product label
  std::string resource = std::string(kGpuResource);
  std::int64_t nodes = 0;  // nodes of this product that offer this resource
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
};

struct NodeInventoryOptions {
  std::string label_selector;
  bool include_non_gpu_nodes = false;  // --all
  bool from_cache = false;             // read lists from the watch cache
};

// Pure: the inventory from node and pod objects. `now` fixes the ages.
NodeInventory build_node_inventory(const std::vector<nlohmann::json>& nodes, const std::vector<nlohmann::json>& pods,
                                   bool include_non_gpu_nodes, std::chrono::system_clock::time_point now);

// The fields the inventory reads of nodes and of pods; lists for it decode only these.
const kube::Projection& inventory_node_fields();
const kube::Projection& inventory_pod_fields();

// Lists nodes and non-terminal bound pods (two paginated lists) and builds the inventory.
Result<NodeInventory> collect_node_inventory(kube::Client& client, const NodeInventoryOptions& options);

// Sort keys accepted by sort_nodes (and --sort-by).
const std::vector<std::string_view>& node_sort_keys();
// Sorts in place; ties keep name order. Returns an invalid_argument error for an unknown key.
Result<void> sort_nodes(std::vector<NodeGpuInfo>& nodes, std::string_view key);

// gpuctl's stable output schema (apiVersion gpuctl.io/v1alpha1, kind GPUNodeList).
nlohmann::json to_json(const NodeInventory& inventory);

}  // namespace gpuctl::ops
