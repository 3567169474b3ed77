// The checks of GPUs published as DRA devices (issue 19), node by node: devices the driver's
// health check or a DeviceTaintRule tainted (dra-device-tainted), pools the scheduler leaves out
// (dra-pool-incomplete) and nodes whose GPUs the device plugin offers a second time
// (dra-double-advertised). The claims' checks are in checks_dra_claims.cpp.
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "check_support.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using namespace support;
using gpu::XidAction;

// The keys NVIDIA's DRA driver writes from its NVML health check (device_health.go).
constexpr std::string_view kXidTaint = "gpu.nvidia.com/xid";
constexpr std::string_view kGpuLostTaint = "gpu.nvidia.com/gpu-lost";
constexpr std::string_view kUnmonitoredTaint = "gpu.nvidia.com/unmonitored";

// What one taint means for its GPU: the severity, the words, and NVIDIA's action when an Xid
// (or a lost GPU, which only a reboot brings back) decides it.
struct TaintVerdict {
  Severity severity = Severity::error;
  std::string why;
  std::optional<XidAction> action;
  int xid = 0;
};

std::optional<int> xid_code(const std::string& value) {
  int code = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), code);
  if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  return code;
}

bool needs_reset_or_reboot(XidAction action) {
  return action == XidAction::reset_gpu || action == XidAction::restart_bm || action == XidAction::check_mechanicals ||
         action == XidAction::contact_support;
}

TaintVerdict xid_verdict(const DraDeviceTaint& taint) {
  auto code = xid_code(taint.value);
  const gpu::XidInfo* info = code ? gpu::find_xid(*code) : nullptr;
  if (info == nullptr) {
    return {taint.blocks() ? Severity::error : Severity::info,
            fmt::format("Xid {}, which gpuctl's catalogue does not hold", taint.value), std::nullopt, code.value_or(0)};
  }
  std::string why =
      fmt::format("Xid {} ({}): NVIDIA's action {}", info->code, info->meaning, gpu::to_string(info->action));
  if (!taint.blocks())
    return {Severity::info, why + "; an application fault the driver only notes", info->action, info->code};
  Severity severity = needs_reset_or_reboot(info->action) ? Severity::critical : Severity::error;
  return {severity, std::move(why), info->action, info->code};
}

TaintVerdict judge(const DraDeviceTaint& taint) {
  if (taint.key == kXidTaint) return xid_verdict(taint);
  if (taint.key == kGpuLostTaint) {
    if (!taint.blocks()) return {Severity::info, "the GPU was lost (effect None: still allocatable)", std::nullopt, 0};
    return {Severity::critical,
            "the GPU is lost (fell off the bus or stopped answering NVML): only a reboot brings it back",
            XidAction::restart_bm, 0};
  }
  if (taint.key == kUnmonitoredTaint)
    return {Severity::info, "the driver cannot watch this GPU's health: its Xid errors go unseen", std::nullopt, 0};
  if (!taint.blocks())
    return {Severity::info, "a warning only (effect None): the device can still be allocated", {}, 0};
  return {Severity::error, fmt::format("effect {}: the device cannot be allocated", taint.effect), std::nullopt, 0};
}

std::string taint_text(const DraDeviceTaint& t) {
  return t.value.empty() ? fmt::format("{}:{}", t.key, t.effect) : fmt::format("{}={}:{}", t.key, t.value, t.effect);
}

// "gpu-a/gpu-0", the name `gpuctl taint --device` takes; the pool for devices of no one node.
std::string device_ref(const DraDevice& d) { return (d.node.empty() ? d.pool : d.node) + "/" + d.name; }

std::string taint_origin(const DraDeviceTaint& t) {
  return t.rule.empty() ? "by the driver" : fmt::format("by DeviceTaintRule {}", t.rule);
}

Evidence taint_evidence(const DraDevice& d, const DraDeviceTaint& t) {
  std::string source = t.rule.empty()
                           ? fmt::format("ResourceSlice of pool {} ({}) device {} taint", d.pool, d.driver, d.name)
                           : fmt::format("DeviceTaintRule {}", t.rule);
  return {std::move(source), taint_text(t), t.time_added};
}

std::string pods_of(const DraClaim& claim) {
  std::vector<std::string> pods;
  for (const auto& p : claim.reserved_for) pods.push_back(p.namespace_name + "/" + p.name);
  return pods.empty() ? "no pod yet" : fmt::format("pod(s) {}", first_few(pods));
}

// Who still holds the device, for the summary: "" when nobody does.
std::string holder_text(const DraClaim* holder, const DraDeviceTaint& worst, const std::string& claims_unread) {
  if (!claims_unread.empty()) return "; who holds it is not known (resourceclaims could not be read)";
  if (holder == nullptr) return "";
  std::string who = fmt::format("claim {}/{} ({})", holder->namespace_name, holder->name, pods_of(*holder));
  if (worst.effect == "NoExecute") return fmt::format("; held by {}, which NoExecute evicts", who);
  if (worst.blocks()) return fmt::format("; still held by {}: {} does not evict them", who, worst.effect);
  return fmt::format("; held by {}", who);
}

std::vector<std::string> action_remedy(const DraDevice& d, const TaintVerdict& v, const std::string& reason) {
  const std::string& node = d.node;
  const std::string gpu = d.uuid.empty() ? d.name : d.uuid;
  const std::string drain = fmt::format("gpuctl drain {} --ignore-daemonsets --reason '{}'", node, reason);
  const std::string verify = fmt::format("gpuctl uncordon {} --verify", node);
  switch (*v.action) {
    case XidAction::reset_gpu:
      return {fmt::format("ssh {} sudo nvidia-smi -r -i {}   (once no pod holds it)", node, gpu)};
    case XidAction::restart_bm: return {drain, fmt::format("ssh {} sudo reboot", node), verify};
    case XidAction::check_mechanicals:
      return {drain, fmt::format("ssh {} sudo nvidia-smi -q -d POWER,TEMPERATURE -i {}", node, gpu),
              "check the GPU's power cables, cooling and seating"};
    case XidAction::contact_support:
      return {fmt::format("gpuctl cordon {} --reason '{}'", node, reason),
              fmt::format("ssh {} sudo nvidia-bug-report.sh", node), "open a case with NVIDIA or the vendor (RMA)"};
    case XidAction::update_swfw:
      return {drain, fmt::format("update {}'s NVIDIA driver and GPU firmware", node), verify};
    case XidAction::ignore:
    case XidAction::restart_app: break;
  }
  return {};
}

std::vector<std::string> taint_remedy(const DraDevice& d, const DraDeviceTaint& worst, const TaintVerdict& v,
                                      bool held) {
  std::vector<std::string> out;
  const std::string ref = device_ref(d);
  if (held && worst.effect == "NoSchedule") {
    DraDeviceTaint evicting = worst;
    evicting.effect = "NoExecute";
    out.push_back(fmt::format("gpuctl taint --device {} {}   (evicts the pods holding this GPU, only those)", ref,
                              taint_text(evicting)));
  }
  if (v.action && !d.node.empty()) {
    std::string reason = v.xid != 0 ? fmt::format("Xid {} on {}", v.xid, d.name) : fmt::format("{} lost", d.name);
    for (auto& r : action_remedy(d, v, reason)) out.push_back(std::move(r));
  }
  if (worst.key == kUnmonitoredTaint && !d.node.empty()) {
    out.push_back(fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={} | grep -i dra", d.node));
    out.push_back("read the DRA driver's kubelet plugin log there: why NVML health events are not watched");
  }
  if (!worst.rule.empty()) {
    out.push_back(fmt::format("gpuctl taint --device {} {}:{}-   (removes DeviceTaintRule {} once the GPU is fixed)",
                              ref, worst.key, worst.effect, worst.rule));
  } else if (!d.node.empty()) {
    out.push_back(fmt::format("kubectl get resourceslices --field-selector spec.nodeName={} -o yaml", d.node));
  }
  return out;
}

Finding tainted_finding(const DraInventory& inventory, const DraDevice& d, const std::string& claims_unread) {
  std::size_t worst_at = 0;
  std::vector<TaintVerdict> verdicts;
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < d.taints.size(); ++i) {
    const auto& t = d.taints[i];
    verdicts.push_back(judge(t));
    if (verdicts[i].severity > verdicts[worst_at].severity) worst_at = i;
    std::string since = t.time_added.empty() ? "" : " since " + t.time_added;
    parts.push_back(fmt::format("{} {}{}: {}", taint_text(t), taint_origin(t), since, verdicts[i].why));
  }
  const DraDeviceTaint& worst = d.taints[worst_at];
  const DraClaim* holder = inventory.holder({d.driver, d.pool, d.name});
  std::string what = d.uuid.empty() ? d.product : d.product.empty() ? d.uuid : d.uuid + ", " + d.product;
  Finding f = node_finding("dra-device-tainted", verdicts[worst_at].severity, d.node,
                           fmt::format("{}{} is tainted {}{}", device_ref(d), what.empty() ? "" : " (" + what + ")",
                                       fmt::join(parts, "; "), holder_text(holder, worst, claims_unread)));
  if (d.node.empty()) f.object = {"ResourceSlice", "", d.pool};
  for (const auto& t : d.taints) f.evidence.push_back(taint_evidence(d, t));
  if (holder != nullptr) {
    f.evidence.push_back(
        {fmt::format("ResourceClaim {}/{} status", holder->namespace_name, holder->name),
         fmt::format("allocated {}/{}/{}, reserved for {}", d.driver, d.pool, d.name, pods_of(*holder)), ""});
  }
  f.remedy = taint_remedy(d, worst, verdicts[worst_at], holder != nullptr);
  return f;
}

// The nodes of the snapshot (-l selects them); every node is in scope when they were not read.
class NodeScope {
 public:
  explicit NodeScope(const Snapshot& snapshot) {
    if (!snapshot.lists.count(Source::nodes)) return;
    names_.emplace();
    for (const auto& n : snapshot.list(Source::nodes)) names_->insert(kube::name_of(n));
  }
  bool has(const std::string& node) const { return node.empty() || !names_ || names_->count(node) > 0; }

 private:
  std::optional<std::set<std::string>> names_;
};

Finding rule_blind_finding(std::string summary) {
  Finding f;
  f.check = "dra-device-tainted";
  f.severity = Severity::info;
  f.object = {"DeviceTaintRule", "", ""};
  f.summary = std::move(summary);
  return f;
}

bool is_nvidia_gpu(const DraDevice& d) {
  return d.driver == kNvidiaDraDriver && (d.type == DraDeviceType::gpu || d.type == DraDeviceType::mig);
}

}  // namespace

std::vector<Finding> check_dra_device_tainted(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return out;
  NodeScope scope(snapshot);
  const std::string unread = dra_unread(*inventory, "resourceclaims");
  for (const auto& d : inventory->devices) {
    if (d.taints.empty() || d.driver != kNvidiaDraDriver || !scope.has(d.node)) continue;
    out.push_back(tainted_finding(*inventory, d, unread));
  }
  // What the rules taint is not known when they cannot be read or their CEL cannot be evaluated:
  // said, so that a quiet report is not read as "no rule quarantines a GPU".
  if (std::string rules = dra_unread(*inventory, "devicetaintrules"); !rules.empty()) {
    Finding f =
        rule_blind_finding("DeviceTaintRules could not be read, so the taints they add to devices are not known");
    f.evidence.push_back({"list devicetaintrules", rules, ""});
    f.remedy = {"grant gpuctl's user list on devicetaintrules.resource.k8s.io"};
    out.push_back(std::move(f));
  }
  for (const auto& rule : inventory->taint_rules) {
    if (rule.unresolved.empty()) continue;
    Finding f = rule_blind_finding(fmt::format(
        "DeviceTaintRule {} ({}) selects devices by CEL gpuctl could not evaluate ({}): {} device(s) known to be "
        "tainted by it, others may be",
        rule.name, taint_text(rule.taint), rule.unresolved, rule.devices_matched));
    f.object = {"DeviceTaintRule", "", rule.name};
    for (const auto& cel : rule.selectors)
      f.evidence.push_back({fmt::format("DeviceTaintRule {} selector", rule.name), cel, ""});
    f.remedy = {fmt::format("kubectl get devicetaintrule {} -o yaml", rule.name)};
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_dra_pool_incomplete(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return out;
  NodeScope scope(snapshot);
  for (const auto& p : inventory->pool_problems) {
    if (!scope.has(p.node)) continue;
    std::string where = p.node.empty() ? "" : " on " + p.node;
    Finding f = node_finding(
        "dra-pool-incomplete", Severity::error, p.node,
        fmt::format("pool {} of {}{} is left out of the counts: {}; its devices cannot be allocated through DRA until "
                    "the driver republishes the pool",
                    p.pool, p.driver, where, p.problem));
    if (p.node.empty()) f.object = {"ResourceSlice", "", p.pool};
    f.evidence.push_back({fmt::format("ResourceSlices of pool {} ({})", p.pool, p.driver), p.problem, ""});
    std::string selector = fmt::format("spec.driver={}", p.driver);
    if (!p.node.empty()) selector += ",spec.nodeName=" + p.node;
    f.remedy = {fmt::format("kubectl get resourceslices --field-selector {} -o yaml", selector)};
    if (!p.node.empty()) {
      f.remedy.push_back(
          fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={} | grep -i dra", p.node));
      f.remedy.push_back("restart the DRA driver's kubelet plugin pod there: it republishes the whole pool");
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> check_dra_double_advertised(const Snapshot& snapshot) {
  std::vector<Finding> out;
  const DraInventory* inventory = dra_of(snapshot);
  if (inventory == nullptr) return out;
  std::map<std::string, std::vector<const DraDevice*>> published;  // NVIDIA GPUs and MIG devices by node
  for (const auto& d : inventory->devices) {
    if (is_nvidia_gpu(d) && !d.node.empty()) published[d.node].push_back(&d);
  }
  for (const auto& node : snapshot.list(Source::nodes)) {
    std::string name = kube::name_of(node);
    auto it = published.find(name);
    if (it == published.end()) continue;
    std::vector<std::string> advertised;
    for (const auto& [resource, q] : kube::parse_resource_list(kube::field_at(node, {"status", "capacity"}))) {
      if (is_nvidia_resource(resource) && q.value() > 0)
        advertised.push_back(fmt::format("{}={}", resource, q.value()));
    }
    if (advertised.empty()) continue;
    std::vector<std::string> names;
    for (const DraDevice* d : it->second) names.push_back(d->name);
    Finding f = node_finding(
        "dra-double-advertised", Severity::warning, name,
        fmt::format("{} advertises {} through the device plugin and publishes {} NVIDIA DRA device(s) ({}): the same "
                    "GPUs are offered twice, so a device-plugin pod and a DRA claim can be given one GPU",
                    name, fmt::join(advertised, ", "), names.size(), first_few(names)));
    f.evidence.push_back(
        {fmt::format("node {} status.capacity", name), fmt::format("{}", fmt::join(advertised, " ")), ""});
    f.evidence.push_back({fmt::format("ResourceSlices of pool {} ({})", it->second.front()->pool, kNvidiaDraDriver),
                          fmt::format("{} device(s): {}", names.size(), first_few(names, 8)), ""});
    f.remedy = {fmt::format("gpuctl nodes {}", name),
                fmt::format("kubectl get pods -A -o wide --field-selector spec.nodeName={} | grep -i nvidia", name),
                "keep one: keep the device plugin's DaemonSet off this node (its nodeSelector or affinity), or the DRA "
                "driver's GPU kubelet plugin"};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpuctl::ops::diagnose
