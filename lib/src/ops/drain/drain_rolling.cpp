// Rolling maintenance: K nodes out at a time, each drained, its maintenance command run, waited
// for until Ready and uncordoned before the next one goes out.
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
    CordonRequest request;
    request.cordon = false;
    auto change =
        apply_node_edit(client, std::string_view(node), [&](const json& n) { return plan_cordon(n, request); }, {});
    if (change.outcome == ChangeOutcome::failed) {
      r.uncordon = "failed: " + (change.error ? change.error->message : change.summary);
      return fail_with("uncordon " + r.uncordon);
    }
    r.uncordon = "uncordoned";
    rolling_progress(o, node, "uncordoned");
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
