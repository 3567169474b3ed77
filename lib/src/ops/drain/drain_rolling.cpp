// Rolling maintenance: K nodes out at a time, each drained, its maintenance command run, waited
// for until Ready, verified (--verify) and uncordoned before the next one goes out.
#include <algorithm>
#include <atomic>
#include <sstream>

#include <fmt/format.h>

#include "drain_internal.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/parallel.hpp"
#include "gpuctl/util/process.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

using drain_detail::Clock;
using drain_detail::interrupted_by;
using drain_detail::seconds_text;
using drain_detail::stop_requested;

void rolling_progress(const RollingOptions& o, const std::string& node, const std::string& message) {
  if (o.drain.on_progress) o.drain.on_progress({node, message, 0});
}

// Uncordons the node, verified first when asked (a node that does not pass stays cordoned, saying
// why). Returns the failure; "" when the node is back in service.
std::string back_in_service(kube::Client& client, const std::string& node, const RollingOptions& o, RollingResult& r) {
  NodeVerification v{node, VerifyResult::passed, "", {}, ""};
  if (o.verify) {
    rolling_progress(o, node, "verifying its GPUs over ssh");
    auto current = client.get(kube::paths::node(node));
    if (!current) {
      r.uncordon = "failed: " + current.error().message;
      return "uncordon " + r.uncordon;
    }
    auto verdicts = o.verify({*current});
    v = verdicts.empty() ? NodeVerification{node, VerifyResult::unverified, "no verdict", {}, ""} : verdicts.front();
    r.verify = std::string(to_string(v.result));
    rolling_progress(o, node, v.reason.empty() ? "verify: " + r.verify : "verify: " + r.verify + ": " + v.reason);
  }
  CordonRequest record = o.drain.cordon;  // who, for a failed verification's reason
  record.at = util::format_rfc3339(std::chrono::system_clock::now());
  auto change = apply_node_edit(client, std::string_view(node),
                                [&](const json& n) { return plan_verified_uncordon(n, v, record); }, {});
  const std::string error = change.error ? change.error->message : change.summary;
  if (v.result == VerifyResult::unverified) {
    return fmt::format("not uncordoned: could not verify it: {}; it stays cordoned", v.reason);
  }
  if (v.result == VerifyResult::failed) {
    return change.outcome == ChangeOutcome::failed
               ? fmt::format("not uncordoned: {}; recording why failed: {}", v.reason, error)
               : fmt::format("not uncordoned: {}; it stays cordoned with that reason", v.reason);
  }
  if (change.outcome == ChangeOutcome::failed) {
    r.uncordon = "failed: " + error;
    return "uncordon " + r.uncordon;
  }
  r.uncordon = "uncordoned";
  rolling_progress(o, node, "uncordoned");
  return "";
}

void maintain(kube::Client& client, const std::string& node, const RollingOptions& o, RollingResult& r) {
  auto fail_with = [&](std::string what) { r.ok = false, r.drain.message = std::move(what); };
  // Interrupted between steps: the node is drained and stays cordoned; a re-run takes it again.
  auto interrupted = [&](std::string& step, const char* when) {
    step = "interrupted";
    r.interrupted = true;
    fail_with(fmt::format("{} {}; the node stays cordoned (re-run to continue)", interrupted_by(), when));
  };
  if (!o.exec.empty()) {
    util::ProcessOptions po;
    po.argv = {"/bin/sh", "-c", o.exec, "sh", node};
    po.extra_env = {{"GPUCTL_NODE", node}};
    po.timeout = o.exec_timeout;
    rolling_progress(o, node, "running the maintenance command");
    auto pr = util::run_process(po);
    if (pr && pr->interrupted) return interrupted(r.exec, "during the maintenance command (it was stopped)");
    if (!pr || !pr->success()) {
      r.exec = "failed: " + (pr ? util::describe_outcome(*pr) : pr.error().message);
      std::istringstream lines(pr ? pr->stdout_text : "");
      for (std::string line; std::getline(lines, line);) rolling_progress(o, node, "exec: " + line);
      return fail_with("maintenance command " + r.exec.substr(8));
    }
    std::istringstream lines(pr->stdout_text);
    for (std::string line; std::getline(lines, line);) rolling_progress(o, node, "exec: " + line);
    r.exec = "ok";
  }
  if (o.wait_ready.count() > 0) {
    rolling_progress(o, node, "waiting for Ready");
    auto deadline = Clock::now() + o.wait_ready;
    while (true) {
      if (stop_requested(o.drain)) return interrupted(r.ready, "while waiting for Ready");
      auto n = client.get(kube::paths::node(node));
      if (n && kube::node_readiness(*n) == "Ready") {
        r.ready = "ready";
        break;
      }
      if (Clock::now() >= deadline) {
        r.ready = "not ready after " + seconds_text(o.wait_ready);
        return fail_with("node " + r.ready);
      }
      if (o.drain.sleep) {
        o.drain.sleep(o.poll_interval);
      } else {
        util::sleep_unless_cancelled(o.poll_interval);
      }
    }
  }
  if (o.uncordon) {
    if (stop_requested(o.drain)) return interrupted(r.uncordon, "before the uncordon");
    if (auto failure = back_in_service(client, node, o, r); !failure.empty()) return fail_with(std::move(failure));
  }
  r.ok = true;
}

}  // namespace

std::vector<RollingResult> rolling_maintenance(kube::Client& client, const std::vector<json>& nodes,
                                               const RollingOptions& options) {
  std::vector<RollingResult> results(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    results[i].drain.node = kube::name_of(nodes[i]);
    results[i].not_started = true;
  }
  // K workers: each takes the next node as soon as its own is back in service, so at most K
  // nodes are out at any moment and a slow node does not hold the others back. After a failure
  // no new node is started (unless continue_on_error); nodes already out are finished.
  std::atomic<bool> stop{false};
  util::parallel_for(
      nodes.size(), std::max(1, options.max_unavailable),
      [&](std::size_t i) {
        RollingResult& r = results[i];
        r.not_started = false;
        r.drain = drain_node(client, nodes[i], options.drain);
        r.interrupted = r.drain.outcome == DrainOutcome::interrupted;
        if (r.drain.outcome == DrainOutcome::drained) maintain(client, r.drain.node, options, r);
        if (!r.ok && !options.continue_on_error) stop = true;
      },
      [&] { return !stop && !stop_requested(options.drain); });
  return results;
}

}  // namespace gpuctl::ops
