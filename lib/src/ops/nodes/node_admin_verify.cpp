// Going back into service only when healthy (uncordon --verify, drain --rolling --verify): the
// planner that uncordons a node that passed and keeps one that failed cordoned with the finding as
// its reason, the writes, and the reason text gpuctl records.
#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/util/utf8.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

std::string_view to_string(VerifyResult result) {
  switch (result) {
    case VerifyResult::passed: return "passed";
    case VerifyResult::failed: return "failed";
    case VerifyResult::unverified: return "unverified";
  }
  return "unverified";
}

namespace {

// `text` as valid UTF-8: each byte that starts no valid character becomes '?'.
std::string valid_utf8(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    std::size_t good = util::valid_utf8_prefix(text);
    out.append(text.substr(0, good));
    if (good == text.size()) break;
    out.push_back('?');
    text.remove_prefix(good + 1);
  }
  return out;
}

}  // namespace

std::string bounded_reason(std::string_view text) {
  std::string one_line;
  bool blank = false;
  for (char c : valid_utf8(text)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == ' ') {
      blank = !one_line.empty();
      continue;
    }
    if (blank) one_line.push_back(' ');
    blank = false;
    one_line.push_back(c);
  }
  if (one_line.size() <= kCordonReasonMaxBytes) return one_line;
  std::string_view head(one_line.data(), kCordonReasonMaxBytes - 3);
  head = head.substr(0, util::valid_utf8_prefix(head));  // never half a character
  return std::string(head) + "...";
}

Result<NodeEdit> plan_verified_uncordon(const json& node, const NodeVerification& verification,
                                        const CordonRequest& record) {
  switch (verification.result) {
    case VerifyResult::passed: {
      CordonRequest uncordon;
      uncordon.cordon = false;
      return plan_cordon(node, uncordon);
    }
    case VerifyResult::failed: {
      CordonRequest keep = record;
      keep.cordon = true;
      keep.reason = verification.reason;
      keep.replace_record = true;
      return plan_cordon(node, keep);
    }
    case VerifyResult::unverified: break;
  }
  NodeEdit edit;
  edit.summary = "left as it is";
  return edit;
}

namespace {

// What a node that did not pass became, for its error line: "not uncordoned: <why>; <what was done>".
std::string not_uncordoned(const json& node, const NodeVerification& v, const NodeChange& change, DryRun dry_run) {
  const bool was_cordoned = kube::node_unschedulable(node);
  if (v.result == VerifyResult::unverified) {
    return fmt::format("not uncordoned: could not verify it: {}; {}", v.reason,
                       was_cordoned ? "it stays cordoned, its record unchanged" : "it was left schedulable, as it was");
  }
  std::string done;
  if (change.outcome == ChangeOutcome::failed) {
    done = fmt::format("recording why failed too: {}", change.error ? change.error->message : "unknown error");
  } else {
    done = fmt::format("it {} cordoned with that reason", dry_run == DryRun::client
                                                              ? (was_cordoned ? "would stay" : "would be")
                                                              : (was_cordoned ? "stays" : "is now"));
  }
  return fmt::format("not uncordoned: {}; {}", v.reason, done);
}

}  // namespace

std::vector<NodeChange> uncordon_verified(kube::Client& client, const std::vector<json>& nodes,
                                          const std::vector<NodeVerification>& verifications,
                                          const CordonRequest& record, const ApplyOptions& options) {
  std::vector<NodeChange> changes;
  for (const auto& node : nodes) {
    const std::string name = kube::name_of(node);
    NodeVerification v{name, VerifyResult::unverified, "gpuctl did not verify this node", {}, ""};
    for (const auto& candidate : verifications) {
      if (candidate.node == name) v = candidate;
    }
    auto planner = [&](const json& n) { return plan_verified_uncordon(n, v, record); };
    NodeChange change = apply_node_edit(client, node, planner, options);
    if (v.result != VerifyResult::passed) {
      Error e;
      e.code = Errc::process;  // the node's own probe (a child process over ssh) kept it out
      e.message = not_uncordoned(node, v, change, options.dry_run);
      change.outcome = ChangeOutcome::failed;
      change.error = std::move(e);
    }
    change.verification = std::move(v);
    changes.push_back(std::move(change));
  }
  return changes;
}

json to_json(const NodeVerification& v) {
  return {{"result", to_string(v.result)}, {"reason", v.reason}, {"findings", v.findings}, {"probe", v.probe}};
}

}  // namespace gpuctl::ops
