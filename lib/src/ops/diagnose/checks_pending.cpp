// gpu-pods-pending: GPU pods the scheduler cannot place, each with its cause in numbers, the way
// an admin would work it out: larger than any node ever holds, no node it may use (selector,
// taint, cordon), no free GPUs now, or a claim that is not bound; and GPU Jobs whose pods the
// ResourceQuota admission plugin refuses to create.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "check_support.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/common/placement_blockers.hpp"
#include "gpuctl/ops/dra/dra_extended.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;

// A pending pod younger than this without the scheduler's verdict may just not be scheduled yet.
constexpr std::chrono::minutes kUnjudgedGrace{5};

struct Cause {
  Severity severity = Severity::error;
  std::string text;
  std::vector<std::string> remedy;
};

std::int64_t amount(const std::map<std::string, std::int64_t>& by_node, const std::string& node) {
  auto it = by_node.find(node);
  return it == by_node.end() ? 0 : it->second;
}

// One resource's allocatable and requested amounts per node, read once per check run: a cluster
// with many pending pods would otherwise parse every pod's requests again for each of them.
struct Room {
  std::map<std::string, std::int64_t> allocatable;  // by node name, nodes without the resource left out
  std::map<std::string, std::int64_t> used;         // by the non-terminal pods bound to each node
};

// A resource a DeviceClass serves through DRA (extendedResourceName): on nodes that do not
// advertise it, the room is the class's healthy devices there and the use the devices claims hold
// (the pods' requests are served by those claims, so they are not counted again). Returns the
// nodes whose room is DRA's.
std::set<std::string> add_dra_room(const Snapshot& snapshot, const std::string& resource, Room& room) {
  std::set<std::string> nodes;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return nodes;
  for (const auto& [node, dra] : dra_extended_room(*inventory, resource)) {
    if (amount(room.allocatable, node) > 0) continue;  // the device plugin serves it there
    nodes.insert(node);
    room.allocatable[node] += dra.devices;
    room.used[node] += dra.held;
  }
  return nodes;
}

class Rooms {
 public:
  explicit Rooms(const Snapshot& snapshot) : snapshot_(snapshot) {}
  const Room& of(const std::string& resource) {
    auto [it, added] = rooms_.try_emplace(resource);
    if (!added) return it->second;
    for (const auto& node : snapshot_.list(Source::nodes)) {
      auto list = kube::parse_resource_list(kube::field_at(node, {"status", "allocatable"}));
      if (auto q = list.find(resource); q != list.end())
        it->second.allocatable[kube::name_of(node)] = q->second.value();
    }
    const std::set<std::string> dra_nodes = add_dra_room(snapshot_, resource, it->second);
    for (const auto& pod : snapshot_.list(Source::pods)) {
      std::string node = string_field(field(pod, "spec"), "nodeName");
      if (node.empty() || kube::pod_is_terminal(pod) || dra_nodes.count(node)) continue;
      auto requests = kube::pod_requests(pod);
      if (auto q = requests.find(resource); q != requests.end()) it->second.used[node] += q->second.value();
    }
    return it->second;
  }

 private:
  const Snapshot& snapshot_;
  std::map<std::string, Room> rooms_;
};

bool waits_for_scheduler(const Snapshot& snapshot, const json& pod) {
  if (string_field(field(pod, "status"), "phase") != "Pending") return false;
  if (!string_field(field(pod, "spec"), "nodeName").empty()) return false;
  for (const auto& c : kube::array_field(field(pod, "status"), "conditions")) {
    if (string_field(c, "type") == "PodScheduled" && string_field(c, "status") == "False") return true;
  }
  auto created = util::parse_rfc3339(string_field(field(pod, "metadata"), "creationTimestamp"));
  return created && snapshot.now - *created > kUnjudgedGrace;
}

// A toleration that names the taint's key but differs in value or effect: the usual typo.
std::string near_miss(const json& spec, const kube::Taint& taint) {
  for (const auto& t : kube::tolerations_of(spec)) {
    if (string_field(t, "key") != taint.key || kube::tolerates(t, taint)) continue;
    return fmt::format("; its toleration for {} has value \"{}\" effect \"{}\" (operator {}): that is the mistake",
                       taint.key, string_field(t, "value"), string_field(t, "effect"),
                       string_field(t, "operator").empty() ? "Equal" : string_field(t, "operator"));
  }
  return "";
}

// The label values the nodes that could hold the pod have, for the keys of its placement none
// of them satisfies.
std::string closest_labels(const json& spec, const std::vector<const json*>& candidates) {
  std::vector<std::string> parts;
  for (auto& label : unmatched_labels(spec, candidates)) {
    if (label.nodes_without > 0) label.values.push_back("(none)");
    std::sort(label.values.begin(), label.values.end());
    parts.push_back(fmt::format("{}={}", label.key, first_few(label.values, 4)));
  }
  return parts.empty() ? "" : fmt::format("; those nodes have {}", fmt::join(parts, ", "));
}

std::optional<Cause> no_node_may_take(const json& spec, const std::string& resource, std::int64_t n,
                                      const std::vector<const json*>& candidates) {
  const PlacementBlockers blockers = placement_blockers(spec, candidates);
  if (!blockers.admitting.empty()) return std::nullopt;
  std::vector<std::string> parts;
  std::string extra;
  if (!blockers.unmatched.empty()) {
    parts.push_back(
        fmt::format("{} do not match its placement ({})", blockers.unmatched.size(), kube::describe_placement(spec)));
    extra += closest_labels(spec, candidates);
  }
  for (const auto& tainted : blockers.taints) {
    parts.push_back(fmt::format("{} have taint {}, which it does not tolerate", tainted.nodes.size(),
                                kube::to_string(tainted.taint)));
    extra += near_miss(spec, tainted.taint);
  }
  if (!blockers.cordoned.empty()) parts.push_back(fmt::format("{} are cordoned", blockers.cordoned.size()));
  return Cause{Severity::error,
               fmt::format("of the {} node(s) with {} {} allocatable, {}{}", candidates.size(), n, resource,
                           fmt::join(parts, ", "), extra),
               {}};
}

std::optional<Cause> claim_not_bound(const Snapshot& snapshot, const json& pod) {
  for (const auto& volume : kube::array_field(field(pod, "spec"), "volumes")) {
    std::string claim = string_field(field(volume, "persistentVolumeClaim"), "claimName");
    if (claim.empty()) continue;
    const json* found = nullptr;
    for (const auto& pvc : snapshot.list(Source::pvcs)) {
      if (kube::name_of(pvc) == claim && kube::namespace_of(pvc) == kube::namespace_of(pod)) found = &pvc;
    }
    std::string phase = found ? string_field(field(*found, "status"), "phase") : "missing";
    if (phase == "Bound") continue;
    return Cause{Severity::error,
                 fmt::format("it waits for claim {} ({})", claim, phase),
                 {fmt::format("kubectl describe pvc -n {} {}", kube::namespace_of(pod), claim)}};
  }
  return std::nullopt;
}

// Why `pod` (asking for `n` of `resource` per pod) cannot be placed.
Cause pending_cause(const Snapshot& snapshot, const Room& room, const json& pod, const std::string& resource,
                    std::int64_t n) {
  const json& spec = field(pod, "spec");
  const json* largest = nullptr;
  std::int64_t largest_alloc = 0;
  std::vector<const json*> candidates;
  for (const auto& node : snapshot.list(Source::nodes)) {
    std::int64_t alloc = amount(room.allocatable, kube::name_of(node));
    if (largest == nullptr || alloc > largest_alloc) largest = &node, largest_alloc = alloc;
    if (alloc >= n) candidates.push_back(&node);
  }
  if (candidates.empty()) {
    std::string biggest = largest == nullptr || largest_alloc == 0
                              ? fmt::format("no node offers {}", resource)
                              : fmt::format("the largest node offers {} ({})", largest_alloc, kube::name_of(*largest));
    return {Severity::error,
            fmt::format("it asks for {} {} per pod and {}: it can never run", n, resource, biggest),
            {"gpuctl nodes"}};
  }
  if (auto cause = no_node_may_take(spec, resource, n, candidates)) return *cause;
  std::int64_t total_free = 0, best = 0;
  std::string best_node;
  std::size_t eligible = 0;
  for (const json* node : candidates) {
    if (kube::placement_exclusion(spec, *node)) continue;
    ++eligible;
    std::string name = kube::name_of(*node);
    std::int64_t free = amount(room.allocatable, name) - amount(room.used, name);
    total_free += std::max<std::int64_t>(free, 0);
    if (free > best) best = free, best_node = name;
  }
  if (best < n) {
    return {Severity::warning,
            fmt::format("no {} free now: the {} node(s) it may use have {} free in total, at most {} on one node{}",
                        resource, eligible, total_free, best, best_node.empty() ? "" : " (" + best_node + ")"),
            {"gpuctl nodes", "gpuctl jobs -A"}};
  }
  if (auto cause = claim_not_bound(snapshot, pod)) return *cause;
  return {Severity::warning,
          fmt::format("{} {} are free on {}; the scheduler's reason is in the evidence", best, resource, best_node),
          {}};
}

Finding pending_finding(const Snapshot& snapshot, Rooms& rooms, const EventIndex& index, const json& pod) {
  std::string resource;
  std::int64_t n = 0;
  for (const auto& [name, q] : kube::pod_requests(pod)) {
    if (is_nvidia_resource(name) && q.value() > n) resource = name, n = q.value();
  }
  Cause cause = pending_cause(snapshot, rooms.of(resource), pod, resource, n);
  std::string age;
  if (auto created = util::parse_rfc3339(string_field(field(pod, "metadata"), "creationTimestamp"))) {
    age = " for " + util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(snapshot.now - *created));
  }
  Finding f = object_finding("gpu-pods-pending", cause.severity, "Pod", pod,
                             fmt::format("{} pending{}: {}", pod_ref(pod), age, cause.text));
  for (const auto& c : kube::array_field(field(pod, "status"), "conditions")) {
    if (string_field(c, "type") == "PodScheduled" && !string_field(c, "message").empty()) {
      f.evidence.push_back({fmt::format("pod {} condition PodScheduled", pod_ref(pod)),
                            fmt::format("{}: {}", string_field(c, "reason"), string_field(c, "message")),
                            string_field(c, "lastTransitionTime")});
    }
  }
  const auto& events = index.about("Pod", kube::namespace_of(pod), kube::name_of(pod));
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (string_field(**it, "reason") == "FailedScheduling") {
      f.evidence.push_back(event_evidence(**it));
      break;
    }
  }
  f.remedy = {fmt::format("kubectl describe pod -n {} {}", kube::namespace_of(pod), kube::name_of(pod))};
  f.remedy.insert(f.remedy.end(), cause.remedy.begin(), cause.remedy.end());
  return f;
}

bool names_gpu(const AdmissionDenial& denial) {
  for (const auto& item : denial.items) {
    if (item.resource.find("nvidia.com/") != std::string::npos) return true;
  }
  for (const auto& r : denial.resources) {
    if (r.find("nvidia.com/") != std::string::npos) return true;
  }
  return denial.detail.find("nvidia.com/") != std::string::npos;
}

}  // namespace

std::vector<Finding> check_gpu_pods_pending(const Snapshot& snapshot) {
  std::vector<Finding> out;
  std::optional<Rooms> rooms;
  std::optional<EventIndex> events;
  for (const auto& pod : snapshot.list(Source::pods)) {
    // Its nvidia.com/* request in numbers; a pod waiting for DRA claims is dra-claim-unallocated's.
    if (gpu_request(pod) <= 0 || !waits_for_scheduler(snapshot, pod)) continue;
    if (!rooms) rooms.emplace(snapshot), events.emplace(snapshot);
    out.push_back(pending_finding(snapshot, *rooms, *events, pod));
  }
  // Jobs whose pods are never created: the Job controller's FailedCreate events carry the refusal.
  std::map<std::string, const json*> latest;
  for (const auto& event : snapshot.list(Source::events)) {
    const json& involved = field(event, "involvedObject");
    if (string_field(involved, "kind") != "Job" || string_field(event, "reason") != "FailedCreate") continue;
    auto denial = parse_admission_denial(string_field(event, "message"));
    if (!denial || !names_gpu(*denial)) continue;
    std::string key = string_field(involved, "namespace") + "/" + string_field(involved, "name");
    if (!latest.count(key) || event_time(*latest[key]) <= event_time(event)) latest[key] = &event;
  }
  for (const auto& [key, event] : latest) {
    const json& involved = field(*event, "involvedObject");
    std::string ns = string_field(involved, "namespace");
    auto denial = parse_admission_denial(string_field(*event, "message"));
    Finding f;
    f.check = "gpu-pods-pending";
    f.severity = Severity::error;
    f.object = {"Job", ns, string_field(involved, "name")};
    f.summary = fmt::format("job {} cannot create its pods: {}", key, describe(*denial));
    f.evidence.push_back(event_evidence(*event));
    f.remedy = {fmt::format("gpuctl quota -n {}", ns), fmt::format("gpuctl jobs -n {}", ns)};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
