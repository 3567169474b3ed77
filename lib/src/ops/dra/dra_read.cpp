// Reading DRA objects (resource.k8s.io/v1) into the model of dra.hpp: devices as a slice lists
// them, claims with their allocation, device classes and taint rules. Wrong types read as absent
// (kube::field and friends never throw), so a hostile object is a device without a product, not
// a crash.
#include <algorithm>

#include <fmt/format.h>

#include "dra_internal.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/quantity.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

std::string_view to_string(DraDeviceType type) {
  switch (type) {
    case DraDeviceType::gpu: return "gpu";
    case DraDeviceType::mig: return "mig";
    case DraDeviceType::vfio: return "vfio";
    case DraDeviceType::other: break;
  }
  return "other";
}

bool DraDevice::unhealthy() const {
  for (const auto& t : taints) {
    if (t.blocks()) return true;
  }
  return false;
}

const json* DraDevice::attribute(std::string_view domain, std::string_view attribute_name) const {
  // The slice writes the driver's own attributes unqualified ("productName") and others
  // qualified ("resource.kubernetes.io/pciBusID"); CEL always names the domain.
  std::string qualified = fmt::format("{}/{}", domain, attribute_name);
  for (std::string_view key : {std::string_view(qualified), domain == driver ? attribute_name : std::string_view()}) {
    if (key.empty()) continue;
    auto it = attributes.find(std::string(key));
    if (it == attributes.end() || !it->is_object() || it->empty()) continue;
    return &it->begin().value();
  }
  return nullptr;
}

namespace dra_internal {

std::string attribute_text(const json& attributes, std::string_view name) {
  const json& a = kube::field(attributes, name);
  for (auto kind : {"string", "version"}) {
    if (auto s = kube::string_field(a, kind); !s.empty()) return s;
  }
  return {};
}

DraDeviceType device_type_of(std::string_view type) {
  if (type == "gpu") return DraDeviceType::gpu;
  if (type == "mig") return DraDeviceType::mig;
  if (type == "vfio") return DraDeviceType::vfio;
  return DraDeviceType::other;
}

DraDeviceTaint read_taint(const json& taint) {
  return {kube::string_field(taint, "key"),
          kube::string_field(taint, "value"),
          kube::string_field(taint, "effect"),
          kube::string_field(taint, "timeAdded"),
          {}};
}

DraDevice read_device(const json& device, const SliceHead& slice) {
  DraDevice d;
  d.driver = slice.driver;
  d.pool = slice.pool;
  d.node = slice.node;
  d.name = kube::string_field(device, "name");
  if (const json& a = kube::field(device, "attributes"); a.is_object()) d.attributes = a;
  if (const json& c = kube::field(device, "capacity"); c.is_object()) d.capacity = c;
  d.type = device_type_of(attribute_text(d.attributes, "type"));
  d.product = attribute_text(d.attributes, "productName");
  d.profile = attribute_text(d.attributes, "profile");
  d.uuid = attribute_text(d.attributes, "uuid");
  d.parent_uuid = attribute_text(d.attributes, "parentUUID");
  std::string memory = kube::string_field(kube::field(d.capacity, "memory"), "value");
  if (auto q = kube::Quantity::parse(memory)) d.memory_bytes = q->value();
  for (const auto& t : kube::array_field(device, "taints")) d.taints.push_back(read_taint(t));
  return d;
}

SliceHead read_slice_head(const json& slice) {
  const json& spec = kube::field(slice, "spec");
  const json& pool = kube::field(spec, "pool");
  SliceHead head;
  head.name = kube::name_of(slice);
  head.driver = kube::string_field(spec, "driver");
  head.node = kube::string_field(spec, "nodeName");
  head.pool = kube::string_field(pool, "name");
  head.generation = kube::integer_field(pool, "generation").value_or(0);
  head.slice_count = kube::integer_field(pool, "resourceSliceCount").value_or(0);
  return head;
}

std::vector<std::string> cel_selectors(const json& selectors) {
  std::vector<std::string> out;
  if (!selectors.is_array()) return out;
  for (const auto& s : selectors) {
    out.push_back(kube::string_field(kube::field(s, "cel"), "expression"));
  }
  return out;
}

}  // namespace dra_internal

DraClaim read_claim(const json& claim) {
  using dra_internal::cel_selectors;
  DraClaim c;
  c.namespace_name = kube::namespace_of(claim);
  c.name = kube::name_of(claim);
  const json& meta = kube::field(claim, "metadata");
  c.created_at = kube::string_field(meta, "creationTimestamp");
  c.extended_resource = kube::annotation_of(claim, kExtendedResourceClaimAnnotation) == "true";
  for (const auto& owner : kube::array_field(meta, "ownerReferences")) {
    if (kube::string_field(owner, "kind") == "Pod") c.owner_pod = kube::string_field(owner, "name");
  }
  for (const auto& r : kube::array_field(kube::field(kube::field(claim, "spec"), "devices"), "requests")) {
    const json& exactly = kube::field(r, "exactly");
    DraClaimRequest req;
    req.name = kube::string_field(r, "name");
    req.device_class = kube::string_field(exactly, "deviceClassName");
    req.allocation_mode = kube::string_field(exactly, "allocationMode");
    if (req.allocation_mode.empty()) req.allocation_mode = "ExactCount";
    req.count = kube::integer_field(exactly, "count").value_or(1);
    req.selectors = cel_selectors(kube::field(exactly, "selectors"));
    // firstAvailable: the first alternative stands for the request (the scheduler's first try).
    if (req.device_class.empty()) {
      const json& first = kube::array_field(r, "firstAvailable");
      if (!first.empty()) {
        req.device_class = kube::string_field(first[0], "deviceClassName");
        req.count = kube::integer_field(first[0], "count").value_or(1);
        req.selectors = cel_selectors(kube::field(first[0], "selectors"));
      }
    }
    c.requests.push_back(std::move(req));
  }
  const json& status = kube::field(claim, "status");
  const json& allocation = kube::field(status, "allocation");
  c.allocated = allocation.is_object();
  for (const auto& r : kube::array_field(kube::field(allocation, "devices"), "results")) {
    c.devices.push_back(
        {kube::string_field(r, "driver"), kube::string_field(r, "pool"), kube::string_field(r, "device")});
  }
  for (const auto& ref : kube::array_field(status, "reservedFor")) {
    if (kube::string_field(ref, "resource") != "pods") continue;
    c.reserved_for.push_back({c.namespace_name, kube::string_field(ref, "name")});
  }
  return c;
}

DraDeviceClass read_device_class(const json& device_class) {
  const json& spec = kube::field(device_class, "spec");
  return {kube::name_of(device_class), dra_internal::cel_selectors(kube::field(spec, "selectors")),
          kube::string_field(spec, "extendedResourceName")};
}

DraTaintRule read_taint_rule(const json& rule) {
  const json& spec = kube::field(rule, "spec");
  const json& selector = kube::field(spec, "deviceSelector");
  DraTaintRule r;
  r.name = kube::name_of(rule);
  r.driver = kube::string_field(selector, "driver");
  r.pool = kube::string_field(selector, "pool");
  r.device = kube::string_field(selector, "device");
  r.device_class = kube::string_field(selector, "deviceClassName");
  r.selectors = dra_internal::cel_selectors(kube::field(selector, "selectors"));
  r.taint = dra_internal::read_taint(kube::field(spec, "taint"));
  r.taint.rule = r.name;
  if (r.taint.time_added.empty())
    r.taint.time_added = kube::string_field(kube::field(rule, "metadata"), "creationTimestamp");
  return r;
}

namespace {

void add_claim(std::vector<PodClaimRef>& out, std::string name, std::string how) {
  bool known =
      !name.empty() && std::any_of(out.begin(), out.end(), [&](const PodClaimRef& c) { return c.name == name; });
  if (!known) out.push_back({std::move(name), std::move(how)});
}

}  // namespace

std::vector<PodClaimRef> pod_claim_refs(const json& pod) {
  std::vector<PodClaimRef> out;
  const json& status = kube::field(pod, "status");
  for (const auto& entry : kube::array_field(kube::field(pod, "spec"), "resourceClaims")) {
    std::string entry_name = kube::string_field(entry, "name");
    if (std::string claim = kube::string_field(entry, "resourceClaimName"); !claim.empty()) {
      add_claim(out, claim, fmt::format("spec.resourceClaims[{}]", entry_name));
      continue;
    }
    std::string made;
    for (const auto& s : kube::array_field(status, "resourceClaimStatuses")) {
      if (kube::string_field(s, "name") == entry_name) made = kube::string_field(s, "resourceClaimName");
    }
    add_claim(out, made, fmt::format("from template {}", kube::string_field(entry, "resourceClaimTemplateName")));
  }
  std::string ext = kube::string_field(kube::field(status, "extendedResourceClaimStatus"), "resourceClaimName");
  if (!ext.empty()) add_claim(out, ext, "made for its extended resource request");
  return out;
}

}  // namespace gpuctl::ops
