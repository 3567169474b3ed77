#include "gpuctl/ops/nodes/nodes.hpp"

#include <algorithm>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/protobuf.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/util/time.hpp"
#include "nodes_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

std::string label_or_empty(const json& node, std::string_view key) { return kube::label_of(node, key).value_or(""); }

// GPU Feature Discovery writes both the newer *-version.full labels and the older split ones.
std::string driver_version_of(const json& node) {
  if (auto full = kube::label_of(node, "nvidia.com/cuda.driver-version.full")) return *full;
  auto major = label_or_empty(node, "nvidia.com/cuda.driver.major");
  if (major.empty()) return {};
  auto minor = label_or_empty(node, "nvidia.com/cuda.driver.minor");
  auto rev = label_or_empty(node, "nvidia.com/cuda.driver.rev");
  std::string v = major;
  if (!minor.empty()) v += "." + minor;
  if (!rev.empty()) v += "." + rev;
  return v;
}

std::string cuda_version_of(const json& node) {
  if (auto full = kube::label_of(node, "nvidia.com/cuda.runtime-version.full")) return *full;
  auto major = label_or_empty(node, "nvidia.com/cuda.runtime.major");
  if (major.empty()) return {};
  auto minor = label_or_empty(node, "nvidia.com/cuda.runtime.minor");
  return minor.empty() ? major : major + "." + minor;
}

std::int64_t count_of(const kube::ResourceList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? 0 : it->second.value();
}

// Conditions that mean trouble when True (Ready is reported on its own).
bool is_problem_condition(const kube::NodeCondition& c) {
  static const std::vector<std::string_view> bad = {"NetworkUnavailable", "MemoryPressure", "DiskPressure",
                                                    "PIDPressure"};
  return c.status == "True" && std::find(bad.begin(), bad.end(), c.type) != bad.end();
}

// Requests of the non-terminal pods, summed per node.
struct NodeUse {
  kube::ResourceList requested;
  std::int64_t gpu_pods = 0;
  std::set<std::string> gpu_pod_keys;  // "namespace/name", joined with the DRA claims' pods on DRA nodes
};

// node name -> what its pods request of nvidia.com/*, folded in pod by pod (page by page when
// listing); a pod gpuctl cannot read is named in `skipped` and not counted.
struct PodTally {
  std::unordered_map<std::string, NodeUse> use;
  std::vector<std::string> skipped;
  std::size_t seen = 0;  // pods folded in so far, for naming one without a name

  void add(const json& pod) {
    std::size_t index = seen++;
    if (auto problem = kube::pod_shape_problem(pod); !problem.empty()) {
      skipped.push_back(fmt::format("{} not counted: {}", kube::object_label("pod", pod, index), problem));
      return;
    }
    if (kube::pod_is_terminal(pod)) return;
    std::string node_name = kube::string_field(kube::field(pod, "spec"), "nodeName");
    if (node_name.empty()) return;
    kube::ResourceList requests = kube::pod_requests(pod);
    NodeUse& u = use[node_name];
    bool holds_gpu = false;
    for (const auto& [name, q] : requests) {
      if (!is_nvidia_resource(name)) continue;
      u.requested[name] += q;
      if (!q.is_zero()) holds_gpu = true;
    }
    if (!holds_gpu) return;
    ++u.gpu_pods;
    u.gpu_pod_keys.insert(kube::namespace_of(pod) + "/" + kube::name_of(pod));
  }
};

// Capacity, allocatable and used of every nvidia.com/* resource the node has or its pods request:
// nvidia.com/gpu in info.gpus (always named, even when absent), the others (MIG) in
// info.other_resources, by name.
void count_resources(const json& status, const NodeUse& u, NodeGpuInfo& info) {
  kube::ResourceList capacity = kube::parse_resource_list(kube::field(status, "capacity"));
  kube::ResourceList allocatable = kube::parse_resource_list(kube::field(status, "allocatable"));
  std::vector<std::string> names;
  for (const auto& [name, q] : capacity)
    if (is_nvidia_resource(name)) names.push_back(name);
  for (const auto& [name, q] : allocatable)
    if (is_nvidia_resource(name)) names.push_back(name);
  for (const auto& [name, q] : u.requested) names.push_back(name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    ResourceCount rc{name, count_of(capacity, name), count_of(allocatable, name), count_of(u.requested, name)};
    if (name == kGpuResource) {
      info.gpus = rc;
    } else {
      info.other_resources.push_back(rc);
    }
  }
  info.gpus.name = std::string(kGpuResource);
}

// One node's row: identity, state, GPU counts, taints and cordon record, versions, problems, age.
NodeGpuInfo node_info(const json& node, bool gpu_node, const NodeUse& u, std::chrono::system_clock::time_point now) {
  NodeGpuInfo info;
  info.gpu_node = gpu_node;
  info.name = kube::name_of(node);
  info.readiness = kube::node_readiness(node);
  info.schedulable = !kube::node_unschedulable(node);
  std::tie(info.product, info.product_label) = gpu_product_of(node);

  const json& status = kube::field(node, "status");
  info.gpu_pods = u.gpu_pods;
  count_resources(status, u, info);

  info.taints = kube::node_taints(node);
  auto reason = kube::annotation_of(node, kCordonReasonAnnotation);
  auto by = kube::annotation_of(node, kCordonByAnnotation);
  auto at = kube::annotation_of(node, kCordonAtAnnotation);
  if (reason || by || at) info.cordon = CordonRecord{reason.value_or(""), by.value_or(""), at.value_or("")};
  info.driver_version = driver_version_of(node);
  info.cuda_version = cuda_version_of(node);
  for (auto& c : kube::node_conditions(node)) {
    if (is_problem_condition(c)) info.problem_conditions.push_back(std::move(c));
  }
  info.internal_ip = kube::node_address(node, "InternalIP");
  info.kubelet_version = kube::string_field(kube::field(status, "nodeInfo"), "kubeletVersion");
  info.created_at = kube::string_field(kube::field(node, "metadata"), "creationTimestamp");
  if (auto created = util::parse_rfc3339(info.created_at)) {
    info.age_seconds = std::chrono::duration_cast<std::chrono::seconds>(now - *created).count();
  }
  return info;
}

// (product, resource) -> row; nvidia.com/gpu sorts before nvidia.com/mig-* by name.
using ProductRows = std::map<std::pair<std::string, std::string>, ProductSummary>;

// Adds a GPU node's counts to its product's rows, one per resource.
void add_to_products(const NodeGpuInfo& info, ProductRows& products) {
  auto add = [&](const ResourceCount& rc) {
    ProductSummary& p = products[{info.product, rc.name}];
    // A product served by both mechanisms on different nodes: one row, both named.
    if (p.nodes > 0 && p.source != rc.source && p.source.find(rc.source) == std::string::npos) {
      p.source = fmt::format("{},{}", kSourceDevicePlugin, kSourceDra);
    } else if (p.nodes == 0) {
      p.source = rc.source;
    }
    p.product = info.product;
    p.resource = rc.name;
    ++p.nodes;
    p.capacity = kube::saturating_add(p.capacity, rc.capacity);
    p.allocatable = kube::saturating_add(p.allocatable, rc.allocatable);
    p.used = kube::saturating_add(p.used, rc.used);
    p.free = kube::saturating_add(p.free, rc.free());
  };
  add(info.gpus);
  for (const auto& rc : info.other_resources) add(rc);
}

std::vector<ProductSummary> product_summaries(ProductRows& products) {
  std::vector<ProductSummary> out;
  for (auto& [key, p] : products) {
    bool whole_gpus = key.second == kGpuResource;
    bool has_other_rows = products.upper_bound({key.first, key.second}) != products.end() &&
                          products.upper_bound({key.first, key.second})->first.first == key.first;
    // A MIG-only product: its empty whole-GPU row would only say "0 GPUs".
    if (whole_gpus && p.capacity == 0 && p.allocatable == 0 && p.used == 0 && has_other_rows) continue;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

namespace {

NodeInventory inventory_from(const std::vector<json>& nodes, PodTally tally, bool include_non_gpu_nodes,
                             std::chrono::system_clock::time_point now, const DraInventory* dra) {
  NodeInventory inventory;
  inventory.skipped = std::move(tally.skipped);
  std::unordered_map<std::string, nodes_internal::DraNodeFacts> dra_facts;
  if (dra) {
    dra_facts = nodes_internal::dra_facts_by_node(*dra);
    inventory.warnings = dra->warnings;
  }
  ProductRows products;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const json& node = nodes[i];
    if (auto problem = kube::node_shape_problem(node); !problem.empty()) {
      inventory.skipped.push_back(fmt::format("{} skipped: {}", kube::object_label("node", node, i), problem));
      continue;
    }
    auto facts = dra_facts.find(kube::name_of(node));
    bool dra_node = facts != dra_facts.end() && !facts->second.counts.empty();
    bool gpu_node = dra_node || is_gpu_node(node);
    if (!gpu_node && !include_non_gpu_nodes) continue;
    const NodeUse& use = tally.use[kube::name_of(node)];
    NodeGpuInfo info = node_info(node, gpu_node, use, now);
    if (facts != dra_facts.end()) nodes_internal::apply_dra(info, std::move(facts->second), use.gpu_pod_keys);
    if (gpu_node) add_to_products(info, products);
    inventory.nodes.push_back(std::move(info));
  }
  std::sort(inventory.nodes.begin(), inventory.nodes.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  inventory.products = product_summaries(products);
  return inventory;
}

}  // namespace

const kube::Projection& inventory_node_fields() {
  // The shape table, and the small lists the readers walk kept whole (node_taints reads a
  // taint's timeAdded, which the table does not check): what is dropped is what is large and
  // never read (managedFields, status.images, volumesAttached).
  static const kube::Projection fields(kube::node_shapes(),
                                       {"spec.taints", "status.conditions", "status.addresses", "status.nodeInfo"});
  return fields;
}

const kube::Projection& inventory_pod_fields() { return kube::pod_request_fields(); }

NodeInventory build_node_inventory(const std::vector<json>& nodes, const std::vector<json>& pods,
                                   bool include_non_gpu_nodes, std::chrono::system_clock::time_point now,
                                   const DraInventory* dra) {
  PodTally tally;
  for (const json& pod : pods) tally.add(pod);
  return inventory_from(nodes, std::move(tally), include_non_gpu_nodes, now, dra);
}

Result<NodeInventory> collect_node_inventory(kube::Client& client, const NodeInventoryOptions& options,
                                             DraInventory* dra_out) {
  // The nodes are read on a second thread while the pods are: the API server encodes both lists
  // at once (at 5,000 nodes the node list is a fifth of its work), where one after the other
  // left a core idle.
  kube::ListOptions node_list;
  node_list.label_selector = options.label_selector;
  node_list.from_cache = options.from_cache;
  node_list.fields = inventory_node_fields();
  auto nodes_read =
      std::async(std::launch::async, [&client, node_list] { return client.list(kube::paths::nodes(), node_list); });
  // The DRA objects (discovery, then slices, claims, classes and taint rules) meanwhile.
  DraReadOptions dra_options;
  dra_options.from_cache = options.from_cache;
  auto dra_read =
      std::async(std::launch::async, [&client, dra_options, wanted = options.dra]() -> Result<DraInventory> {
        if (!wanted) return DraInventory{};
        return collect_dra(client, dra_options);
      });

  // Only pods that hold resources: bound to a node and not finished. The server filters; each
  // page is folded into the per-node counts as it arrives, so memory holds one page of pods.
  kube::ListOptions pod_list;
  pod_list.field_selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";
  pod_list.from_cache = options.from_cache;
  pod_list.fields = inventory_pod_fields();
  pod_list.protobuf = &kube::proto::pod();  // half the API server's time of JSON for the largest list
  PodTally tally;
  kube::ListPageSink sink;
  sink.on_items = [&](std::vector<json>& pods) -> Result<void> {
    for (const json& pod : pods) tally.add(pod);
    return {};
  };
  sink.on_restart = [&] { tally = PodTally{}; };
  Result<kube::ListSummary> pods_read = client.list_pages(kube::paths::pods(), pod_list, sink);

  // The node list's error first: it is what a one-list tool would have said.
  auto dra = dra_read.get();
  GPUCTL_TRY_ASSIGN(kube::ListResult nodes, nodes_read.get());
  GPUCTL_TRY(pods_read);
  GPUCTL_TRY(dra);
  NodeInventory inventory = inventory_from(nodes.items, std::move(tally), options.include_non_gpu_nodes,
                                           std::chrono::system_clock::now(), &*dra);
  if (dra_out) *dra_out = std::move(*dra);
  return inventory;
}

const std::vector<std::string_view>& node_sort_keys() {
  static const std::vector<std::string_view> keys = {"name", "status", "product",   "capacity", "allocatable",
                                                     "used", "free",   "unhealthy", "age"};
  return keys;
}

Result<void> sort_nodes(std::vector<NodeGpuInfo>& nodes, std::string_view key) {
  using Less = std::function<bool(const NodeGpuInfo&, const NodeGpuInfo&)>;
  static const std::map<std::string_view, Less> orders = {
      {"name", [](const auto& a, const auto& b) { return a.name < b.name; }},
      {"status", [](const auto& a, const auto& b) { return a.readiness < b.readiness; }},
      {"product", [](const auto& a, const auto& b) { return a.product < b.product; }},
      // What the table shows: whole GPUs, or a MIG-only node's partitions.
      {"capacity", [](const auto& a, const auto& b) { return a.offered().capacity < b.offered().capacity; }},
      {"allocatable", [](const auto& a, const auto& b) { return a.offered().allocatable < b.offered().allocatable; }},
      {"used", [](const auto& a, const auto& b) { return a.offered().used < b.offered().used; }},
      {"free", [](const auto& a, const auto& b) { return a.offered().free() < b.offered().free(); }},
      {"unhealthy",
       [](const auto& a, const auto& b) {
         return NodeGpuInfo::unhealthy_of(a.offered()) < NodeGpuInfo::unhealthy_of(b.offered());
       }},
      // Oldest first, as kubectl's --sort-by=.metadata.creationTimestamp.
      {"age", [](const auto& a, const auto& b) { return a.age_seconds > b.age_seconds; }},
  };
  auto it = orders.find(key);
  if (it == orders.end()) {
    return fail(Errc::invalid_argument,
                fmt::format("--sort-by: unknown key \"{}\" (valid: {})", key, fmt::join(node_sort_keys(), ", ")));
  }
  std::stable_sort(nodes.begin(), nodes.end(), it->second);
  return {};
}

namespace {
json to_json(const ResourceCount& rc) {
  return {{"name", rc.name},
          {"source", rc.source},
          {"capacity", rc.capacity},
          {"allocatable", rc.allocatable},
          {"used", rc.used},
          {"free", rc.free()},
          {"unhealthy", NodeGpuInfo::unhealthy_of(rc)}};
}
json string_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
}  // namespace

json to_json(const NodeInventory& inventory) {
  json items = json::array();
  for (const auto& n : inventory.nodes) {
    json taints = json::array();
    for (const auto& t : n.taints) taints.push_back(kube::to_json(t));
    json conditions = json::array();
    for (const auto& c : n.problem_conditions) {
      conditions.push_back({{"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}});
    }
    json resources = json::array();
    for (const auto& r : n.other_resources) resources.push_back(to_json(r));
    json device_taints = json::array();
    for (const auto& d : n.device_taints) {
      device_taints.push_back({{"device", d.device},
                               {"key", d.taint.key},
                               {"value", d.taint.value},
                               {"effect", d.taint.effect},
                               {"rule", string_or_null(d.taint.rule)}});
    }
    json cordon = nullptr;
    if (n.cordon) cordon = {{"reason", n.cordon->reason}, {"by", n.cordon->by}, {"at", n.cordon->at}};
    items.push_back({
        {"name", n.name},
        {"status", n.readiness},
        {"schedulable", n.schedulable},
        {"gpuNode", n.gpu_node},
        {"product", string_or_null(n.product)},
        {"productLabel", string_or_null(n.product_label)},
        {"gpus",
         {{"capacity", n.gpus.capacity},
          {"allocatable", n.gpus.allocatable},
          {"used", n.gpus.used},
          {"free", n.gpus.free()},
          {"unhealthy", n.unhealthy()}}},
        {"source", n.source},
        {"devicePluginGpus", n.device_plugin_gpus ? to_json(*n.device_plugin_gpus) : json(nullptr)},
        {"deviceTaints", device_taints},
        {"resources", resources},
        {"gpuPods", n.gpu_pods},
        {"taints", taints},
        {"cordon", cordon},
        {"driverVersion", string_or_null(n.driver_version)},
        {"cudaVersion", string_or_null(n.cuda_version)},
        {"conditions", conditions},
        {"internalIP", string_or_null(n.internal_ip)},
        {"kubeletVersion", string_or_null(n.kubelet_version)},
        {"createdAt", string_or_null(n.created_at)},
        {"ageSeconds", n.age_seconds},
    });
  }
  json summary = json::array();
  for (const auto& p : inventory.products) {
    summary.push_back({{"product", string_or_null(p.product)},
                       {"resource", p.resource},
                       {"source", p.source},
                       {"nodes", p.nodes},
                       {"capacity", p.capacity},
                       {"allocatable", p.allocatable},
                       {"used", p.used},
                       {"free", p.free}});
  }
  return schema_document("GPUNodeList", {{"items", items}, {"summary", summary}});
}

}  // namespace gpuctl::ops
