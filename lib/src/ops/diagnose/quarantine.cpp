// Acting on the node-side findings: the verification before a node goes back into service and the
// quarantine of the GPU nodes found broken, with its circuit breaker (quarantine.hpp).
#include "gpuctl/ops/diagnose/quarantine.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/util/utf8.hpp"

namespace gpuctl::ops::diagnose {

using json = nlohmann::json;

namespace {

std::string finding_line(const Finding& f) { return fmt::format("{}: {}", f.check, f.summary); }

// The worst finding as the reason, and how many more there are (kept whole however long the first).
std::string reason_of(const std::vector<std::string>& lines) {
  std::string head = lines.empty() ? std::string() : bounded_reason(lines.front());
  if (lines.size() <= 1) return head;
  std::string more = fmt::format(" (+{} more)", lines.size() - 1);
  const std::size_t room = kCordonReasonMaxBytes - more.size();
  if (head.size() > room) {
    std::string_view cut = std::string_view(head).substr(0, room - 3);
    head = std::string(cut.substr(0, util::valid_utf8_prefix(cut))) + "...";
  }
  return head + more;
}

NodeVerification verdict(const std::string& node, VerifyResult result, std::string why, const NodeProbe& probe) {
  return {node, result, bounded_reason(why), {}, probe.outcome};
}

}  // namespace

NodeVerification verify_probe(const json& node, const NodeProbe& probe, const Settings& settings) {
  const std::string name = kube::name_of(node);
  if (!is_gpu_node(node)) return {name, VerifyResult::passed, "", {}, ""};
  if (probe.outcome == "interrupted") return verdict(name, VerifyResult::unverified, "interrupted", probe);
  if (!probe.report) {
    return verdict(name, VerifyResult::unverified,
                   fmt::format("ssh could not run the probe on {} ({}){}{}", name, probe.outcome,
                               probe.message.empty() ? "" : ": ", probe.message),
                   probe);
  }
  NodeVerification v{name, VerifyResult::passed, "", {}, probe.outcome};
  for (const auto& f : critical_node_findings(node, probe, settings)) v.findings.push_back(finding_line(f));
  if (!v.findings.empty()) {
    v.result = VerifyResult::failed;
    v.reason = reason_of(v.findings);
    return v;
  }
  const gpu::NodeGpuReport& report = *probe.report;
  if (report.status == gpu::ProbeStatus::failed && report.kind == gpu::NvsmiErrorKind::nvidia_smi_missing) {
    return verdict(name, VerifyResult::unverified,
                   fmt::format("nvidia-smi is not on {}'s PATH, so its GPUs cannot be checked over ssh", name), probe);
  }
  if (report.status == gpu::ProbeStatus::failed) {
    return verdict(name, VerifyResult::failed,
                   fmt::format("nvidia-smi fails on {} ({}): {}", name, gpu::to_string(report.kind), report.message),
                   probe);
  }
  if (report.status == gpu::ProbeStatus::partial) {
    return verdict(
        name, VerifyResult::failed,
        fmt::format("{} of {} GPUs of {} answer in nvidia-smi ({}): {}", report.gpus.size(),
                    report.gpus.size() + report.failed_gpus.size(), name, gpu::to_string(report.kind), report.message),
        probe);
  }
  return v;
}

std::vector<NodeVerification> verify_nodes(const std::vector<json>& nodes, const VerifyOptions& options) {
  std::vector<NodeVerification> out(nodes.size());
  std::vector<json> gpu_nodes;
  std::vector<std::size_t> index;  // gpu_nodes[j] is nodes[index[j]]
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (is_gpu_node(nodes[i])) {
      gpu_nodes.push_back(nodes[i]);
      index.push_back(i);
    } else {
      out[i] = verify_probe(nodes[i], {}, options.settings);
    }
  }
  if (gpu_nodes.empty()) return out;
  Result<std::vector<NodeProbe>> probes = fail(Errc::internal, "no way to reach the nodes over ssh was given");
  if (options.runner != nullptr) {
    probes = probe_nodes(*options.runner, probe_targets(gpu_nodes, options.address_rule), options.probe);
  }
  for (std::size_t j = 0; j < gpu_nodes.size(); ++j) {
    if (probes) {
      out[index[j]] = verify_probe(gpu_nodes[j], (*probes)[j], options.settings);
    } else {
      NodeProbe none;
      none.outcome = "ssh_error";
      none.message = probes.error().message;
      out[index[j]] = verify_probe(gpu_nodes[j], none, options.settings);
    }
  }
  return out;
}

bool quarantines(const Finding& finding) {
  if (finding.severity != Severity::critical || finding.node.empty()) return false;
  const Check* check = find_check(finding.check);
  if (check == nullptr) return false;
  // The node-side checks that read only the node and its probe: critical_node_findings' set.
  const auto& needs = check->needs;
  bool node_only =
      std::all_of(needs.begin(), needs.end(), [](Source s) { return s == Source::nodes || s == Source::node_probes; });
  return node_only && std::find(needs.begin(), needs.end(), Source::node_probes) != needs.end();
}

Result<QuarantineLimit> parse_quarantine_limit(std::string_view text) {
  QuarantineLimit limit;
  limit.percent = text.ends_with('%');
  std::string_view digits = limit.percent ? text.substr(0, text.size() - 1) : text;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), limit.value);
  bool ok = !digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && limit.value >= 1 &&
            (!limit.percent || limit.value <= 100);
  if (!ok) {
    return fail(Errc::invalid_argument,
                fmt::format("--max-quarantine \"{}\": a number of nodes (at least 1) or a percentage of the GPU nodes "
                            "from 1% to 100%, such as 10%",
                            text));
  }
  return limit;
}

std::size_t quarantine_limit(const QuarantineLimit& limit, std::size_t gpu_nodes) {
  if (!limit.percent) return static_cast<std::size_t>(limit.value);
  return std::max<std::size_t>(1, gpu_nodes * static_cast<std::size_t>(limit.value) / 100);
}

std::string to_string(const QuarantineLimit& limit) {
  return limit.percent ? fmt::format("{}%", limit.value) : fmt::format("{}", limit.value);
}

QuarantinePlan plan_quarantine(const Snapshot& snapshot, const std::vector<Finding>& findings,
                               const QuarantineLimit& limit) {
  QuarantinePlan plan;
  std::map<std::string, const json*> gpu_nodes;
  for (const auto& node : snapshot.list(Source::nodes)) {
    if (is_gpu_node(node)) gpu_nodes.emplace(kube::name_of(node), &node);
  }
  plan.gpu_nodes = gpu_nodes.size();
  plan.limit = quarantine_limit(limit, plan.gpu_nodes);
  std::map<std::string, std::vector<std::string>> lines;  // by node, in the report's order (worst first)
  for (const auto& f : findings) {
    if (quarantines(f) && gpu_nodes.count(f.node)) lines[f.node].push_back(finding_line(f));
  }
  for (auto& [name, found] : lines) {
    const json& node = *gpu_nodes.at(name);
    QuarantineTarget target{name, reason_of(found), std::move(found), ""};
    if (kube::node_unschedulable(node)) {
      target.cordon_reason = kube::annotation_of(node, kCordonReasonAnnotation).value_or("");
      plan.already_cordoned.push_back(std::move(target));
    } else {
      plan.cordon.push_back(std::move(target));
    }
  }
  plan.tripped = plan.cordon.size() > plan.limit;
  return plan;
}

std::vector<NodeChange> apply_quarantine(kube::Client& client, const QuarantinePlan& plan, const CordonRequest& record,
                                         const ApplyOptions& options) {
  std::vector<NodeChange> changes;
  if (plan.tripped) return changes;
  for (const auto& target : plan.cordon) {
    CordonRequest request = record;
    request.cordon = true;
    request.reason = target.reason;
    request.replace_record = false;  // cordoned by someone meanwhile: their record stands
    auto planner = [&](const json& node) { return plan_cordon(node, request); };
    changes.push_back(apply_node_edit(client, std::string_view(target.node), planner, options));
  }
  return changes;
}

}  // namespace gpuctl::ops::diagnose
