#pragma once
// Acting on the node-side findings (issue 16). Verification: before a node goes back into service
// (uncordon --verify, drain --rolling --verify) its GPUs are probed over ssh and judged by
// critical_node_findings; a node that fails stays cordoned with the finding as its reason.
// Quarantine (diagnose --quarantine): the GPU nodes with critical node-side findings are cordoned
// through the cordon planner (ops/nodes), never more than a limit at once: when more qualify, a
// fleet-wide false alarm is likelier than that many broken nodes, and none is cordoned.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::diagnose {

// ---- Verification -------------------------------------------------------------------------------

// One node judged on its probe, pure. In order:
// - not a GPU node (is_gpu_node): passed, nothing to verify (the probe is not read);
// - interrupted, ssh could not reach it or the probe never started, or the probe ran but nvidia-smi
//   is not on the node (GPU Operator driver containers): unverified, with why;
// - a critical finding of critical_node_findings: failed, its "check: summary" as the reason
//   (" (+N more)" when there are several);
// - no GPU answered, or only some did (also on a NotReady node, where driver-broken is only an
//   error): failed, with nvidia-smi's failure;
// - else passed.
NodeVerification verify_probe(const nlohmann::json& node, const NodeProbe& probe, const Settings& settings);

struct VerifyOptions {
  ssh::Runner* runner = nullptr;  // how nodes are reached; null: every GPU node is unverified
  ssh::AddressRule address_rule;  // --ssh-host-from
  ProbeOptions probe;             // --fanout, progress
  Settings settings;              // what the checks read (--since for Xid events, ...)
};

// Probes the GPU nodes at once (gpuctl gpus' probe, bounded fan-out) and judges each
// (verify_probe); results in the nodes' order. A fan-out that cannot run at all makes every GPU
// node unverified with its error.
std::vector<NodeVerification> verify_nodes(const std::vector<nlohmann::json>& nodes, const VerifyOptions& options);

// ---- Quarantine ---------------------------------------------------------------------------------

// The rule, pure: a finding quarantines its node when it is critical and comes from a node-side
// check that reads only the node and its probe (the checks critical_node_findings runs:
// driver-broken, xid-errors, ecc-errors, fabric-manager-down, ...). An unreachable node is never
// quarantined (node-unreachable is an error: ssh failing says nothing of the GPUs).
bool quarantines(const Finding& finding);

// --max-quarantine: a number of nodes, or a percentage of the GPU nodes in the snapshot.
struct QuarantineLimit {
  int value = 10;
  bool percent = true;
};
// "3" (at least 1) or "10%" (1% to 100%); Errc::invalid_argument otherwise.
Result<QuarantineLimit> parse_quarantine_limit(std::string_view text);
// The most nodes one run may cordon: a count as given; a percentage of `gpu_nodes` rounded
// down, and at least 1.
std::size_t quarantine_limit(const QuarantineLimit& limit, std::size_t gpu_nodes);
std::string to_string(const QuarantineLimit& limit);  // "3", "10%"

struct QuarantineTarget {
  std::string node;
  std::string reason;                 // bounded_reason of its worst qualifying finding, as for verification
  std::vector<std::string> findings;  // "check: summary" of every qualifying finding
  std::string cordon_reason;          // already cordoned: the gpuctl.io/cordon-reason there, if any
};

struct QuarantinePlan {
  std::vector<QuarantineTarget> cordon;            // to cordon now, by name
  std::vector<QuarantineTarget> already_cordoned;  // qualify but are cordoned already: left alone
  std::size_t gpu_nodes = 0;                       // GPU nodes in the snapshot
  std::size_t limit = 0;                           // quarantine_limit
  bool tripped = false;                            // more to cordon than `limit`: none is cordoned
};

// Pure: the GPU nodes of the snapshot with findings that quarantine them (the report's findings,
// so suppressed ones and checks not run count for nothing), split by whether they are cordoned.
// Only the nodes to cordon count towards the limit.
QuarantinePlan plan_quarantine(const Snapshot& snapshot, const std::vector<Finding>& findings,
                               const QuarantineLimit& limit);

// Cordons the plan's nodes through the cordon planner (plan_cordon, read by name, one
// resourceVersion-guarded patch each, retried on conflicts), each with its reason and `record`'s
// by and at; a node cordoned meanwhile keeps its record ("unchanged"). Writes nothing when the
// breaker tripped.
std::vector<NodeChange> apply_quarantine(kube::Client& client, const QuarantinePlan& plan, const CordonRequest& record,
                                         const ApplyOptions& options);

}  // namespace gpuctl::ops::diagnose
