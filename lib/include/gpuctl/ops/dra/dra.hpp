#pragma once
// GPUs as Dynamic Resource Allocation devices (resource.k8s.io/v1): what the DRA driver publishes
// in ResourceSlices, what ResourceClaims hold, what DeviceTaintRules quarantine, and the counting
// rules the scheduler applies (only complete pools of their newest generation; a device with a
// NoSchedule or NoExecute taint is not allocatable). Everything here is pure over the objects;
// `collect_dra` reads them (a few cluster-wide lists, whatever the number of nodes).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu) and the names it publishes.
inline constexpr std::string_view kNvidiaDraDriver = "gpu.nvidia.com";
inline constexpr std::string_view kResourceApiGroup = "resource.k8s.io";
inline constexpr std::string_view kResourceApiVersion = "resource.k8s.io/v1";
// The annotation the scheduler puts on the claim it makes for a pod's DRA-backed extended
// resource request (a plain nvidia.com/gpu served by a device class with extendedResourceName).
inline constexpr std::string_view kExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim";

// The device's `type` attribute as the NVIDIA driver writes it.
enum class DraDeviceType { gpu, mig, vfio, other };
std::string_view to_string(DraDeviceType type);

// A taint on one device: written by the driver into the slice, or by a DeviceTaintRule.
struct DraDeviceTaint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, NoExecute or None
  std::string time_added;
  std::string rule;  // the DeviceTaintRule's name; "" when the driver wrote it into the slice
  // NoSchedule and NoExecute make the device unavailable; None is a warning only.
  bool blocks() const { return effect == "NoSchedule" || effect == "NoExecute"; }
};

// One device of a complete pool of its newest generation.
struct DraDevice {
  std::string driver;
  std::string pool;
  std::string node;  // spec.nodeName of its slice; "" for devices not local to one node
  std::string name;  // gpu-0, gpu-0-mig-1g.5gb-0
  DraDeviceType type = DraDeviceType::other;
  std::string product;      // productName
  std::string profile;      // MIG profile (1g.5gb); "" for full GPUs
  std::string uuid;         // GPU-... or MIG-...
  std::string parent_uuid;  // a MIG device's GPU
  std::int64_t memory_bytes = 0;
  nlohmann::json attributes = nlohmann::json::object();  // as in the slice: name -> {string|int|bool|version: v}
  nlohmann::json capacity = nlohmann::json::object();    // name -> {value: quantity}
  std::vector<DraDeviceTaint> taints;

  bool unhealthy() const;  // a blocking taint
  // The attribute's value in `domain` (an unqualified name in the slice belongs to the driver's
  // domain), as the JSON of its typed field; nullptr when absent.
  const nlohmann::json* attribute(std::string_view domain, std::string_view attribute_name) const;
};

// Device identity: (driver, pool, device), as an allocation result names it.
struct DraDeviceId {
  std::string driver;
  std::string pool;
  std::string device;
  auto operator<=>(const DraDeviceId&) const = default;
};

struct DraClaimRequest {
  std::string name;
  std::string device_class;
  std::string allocation_mode;  // ExactCount or All
  std::int64_t count = 1;
  std::vector<std::string> selectors;  // CEL expressions
};

// A pod a claim is reserved for (status.reservedFor, resource pods).
struct DraPodRef {
  std::string namespace_name;
  std::string name;
  auto operator<=>(const DraPodRef&) const = default;
};

struct DraClaim {
  std::string namespace_name;
  std::string name;
  std::string created_at;
  bool extended_resource = false;  // made by the scheduler for an nvidia.com/gpu request
  std::string owner_pod;           // the pod that owns it (claims made from a template), "" if none
  std::vector<DraClaimRequest> requests;
  bool allocated = false;
  std::vector<DraDeviceId> devices;  // status.allocation.devices.results
  std::vector<DraPodRef> reserved_for;
};

struct DraDeviceClass {
  std::string name;
  std::vector<std::string> selectors;  // CEL expressions
  std::string extended_resource_name;  // spec.extendedResourceName, e.g. nvidia.com/gpu
};

// What a DeviceTaintRule selects and the taint it adds. Selectors gpuctl cannot evaluate (CEL
// that is not in the subset of dra_cel.hpp) leave the rule `unresolved`.
struct DraTaintRule {
  std::string name;
  std::string driver;  // "" matches every driver
  std::string pool;
  std::string device;
  std::string device_class;
  std::vector<std::string> selectors;
  DraDeviceTaint taint;
  std::int64_t devices_matched = 0;  // devices of the inventory it taints
  std::string unresolved;            // why some devices could not be judged (a CEL form gpuctl does not evaluate)
};

// A pool that does not count: some of its slices of the newest generation are missing, or two
// slices disagree on the pool's size, or the same device is published twice.
struct DraPoolProblem {
  std::string driver;
  std::string pool;
  std::string node;
  std::string problem;  // one line
};

struct DraInventory {
  bool served = false;             // resource.k8s.io/v1 is served
  std::string taint_rule_version;  // the version serving devicetaintrules ("" when none)
  std::vector<DraDevice> devices;  // sorted by node, driver, pool, name
  std::vector<DraClaim> claims;
  std::vector<DraDeviceClass> classes;
  std::vector<DraTaintRule> taint_rules;
  std::vector<DraPoolProblem> pool_problems;
  // Lists that could not be read (a 403 on resourceclaims): the counts they feed are incomplete.
  std::vector<std::string> warnings;

  // Allocated device -> index of the claim holding it in `claims`; build_dra_inventory fills it
  // (and index_claims after claims change), so holder() stays cheap at 40,000 devices.
  std::map<DraDeviceId, std::size_t> claim_of_device;
  void index_claims();
  // The claim holding a device, or nullptr.
  const DraClaim* holder(const DraDeviceId& id) const;
};

// Pure: the inventory from the listed objects. Slices of incomplete or inconsistent pools are
// left out and named in pool_problems; taint rules are applied to the devices they select.
DraInventory build_dra_inventory(const std::vector<nlohmann::json>& slices, const std::vector<nlohmann::json>& claims,
                                 const std::vector<nlohmann::json>& classes,
                                 const std::vector<nlohmann::json>& taint_rules);

DraClaim read_claim(const nlohmann::json& claim);
DraDeviceClass read_device_class(const nlohmann::json& device_class);
DraTaintRule read_taint_rule(const nlohmann::json& rule);

// A ResourceClaim a pod uses, as the pod alone says it.
struct PodClaimRef {
  std::string name;  // "" when the claim from a template has not been made yet
  std::string
      how;  // "spec.resourceClaims[gpus]", "from template gpu-template", "made for its extended resource request"
};
// The claims the pod names, those made for it from its templates (status.resourceClaimStatuses)
// and the one the scheduler made for its DRA-backed extended resource request, each once.
std::vector<PodClaimRef> pod_claim_refs(const nlohmann::json& pod);

// One node's counts of one kind of device: full GPUs of a product, or MIG devices of a profile.
struct DraCount {
  DraDeviceType type = DraDeviceType::gpu;
  std::string product;
  std::string profile;  // MIG only
  std::int64_t capacity = 0;
  std::int64_t unhealthy = 0;       // a blocking taint
  std::int64_t used = 0;            // allocated to a claim
  std::int64_t used_unhealthy = 0;  // allocated and tainted (counted in both)
  std::int64_t free() const { return capacity - unhealthy - (used - used_unhealthy); }
};

// node -> its counts, full GPUs first, then MIG profiles by name. Only gpu and mig devices of
// NVIDIA's driver count (vfio passthrough devices are the same GPUs again).
std::map<std::string, std::vector<DraCount>> dra_counts_by_node(const DraInventory& inventory);

struct DraReadOptions {
  bool claims = true;       // resourceclaims in every namespace (cluster-wide list rights)
  bool classes = true;      // deviceclasses
  bool taint_rules = true;  // devicetaintrules, where some version serves them
  bool from_cache = false;
};

// Discovery (is resource.k8s.io/v1 served? which version serves devicetaintrules?), then the
// lists, in parallel. A cluster without the API is `served == false` and no error; a list the
// server refuses (403) is a warning and an empty list.
Result<DraInventory> collect_dra(kube::Client& client, const DraReadOptions& options = {});

// The `dra` part of gpuctl's schemas: a device as JSON (driver, pool, node, name, type,
// product, profile, uuid, taints, and the claim and pods holding it).
nlohmann::json to_json(const DraDevice& device, const DraClaim* holder);

}  // namespace gpuctl::ops
