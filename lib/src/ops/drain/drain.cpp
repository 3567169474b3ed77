// The I/O half of drain: cordon, evict with retries on PDB 429s, wait with a watch, several
// nodes at once, and rolling maintenance.
#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <mutex>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/parallel.hpp"
#include "gpuctl/util/process.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string_view to_string(DrainOutcome outcome) {
  switch (outcome) {
    case DrainOutcome::drained: return "drained";
    case DrainOutcome::failed: return "failed";
    case DrainOutcome::timed_out: return "timed-out";
    case DrainOutcome::interrupted: return "interrupted";
  }
  return "failed";
}

bool EvictionSlots::try_acquire() {
  std::lock_guard guard(mutex_);
  if (free_ <= 0) return false;
  --free_;
  return true;
}

void EvictionSlots::release() {
  std::lock_guard guard(mutex_);
  ++free_;
}

Result<bool> eviction_supported(kube::Client& client) {
  GPUCTL_TRY_ASSIGN(json doc, client.get(kube::paths::core_v1_discovery()));
  for (const auto& r : kube::array_field(doc, "resources")) {
    if (kube::string_field(r, "name") == "pods/eviction" && kube::string_field(r, "kind") == "Eviction") return true;
  }
  return false;
}

namespace {

// Ctrl-C or SIGTERM (util/cancel.hpp), or the caller's own flag: start nothing new.
bool stop_requested(const DrainOptions& o) { return (o.cancel && o.cancel->load()) || util::cancelled(); }

std::string interrupted_by() {
  std::string by = util::cancel_signal_name();
  return by.empty() ? "interrupted" : "interrupted by " + by;
}

// The result of a node gpuctl did not get to.
NodeDrainResult not_started(const json& node) {
  NodeDrainResult r;
  r.node = kube::name_of(node);
  r.outcome = DrainOutcome::interrupted;
  r.cordon = "-";
  r.message = "not started: " + interrupted_by() + " (re-run to drain it)";
  return r;
}

std::string key_of(const json& pod) { return kube::namespace_of(pod) + "/" + kube::name_of(pod); }
std::string uid_of(const json& pod) { return kube::string_field(kube::field(pod, "metadata"), "uid"); }

// Which DaemonSets of these pods no longer exist (one GET per DaemonSet).
Result<std::vector<std::pair<std::string, std::string>>> missing_daemonsets(kube::Client& client,
                                                                             const std::vector<json>& pods) {
  std::vector<std::pair<std::string, std::string>> missing;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& pod : pods) {
    json c = controller_of(pod);
    if (kube::string_field(c, "kind") != "DaemonSet" || kube::pod_is_terminal(pod)) continue;
    auto key = std::make_pair(kube::namespace_of(pod), kube::string_field(c, "name"));
    if (!seen.insert(key).second) continue;
    auto ds = client.get(kube::paths::daemon_set(key.first, key.second));
    if (!ds && ds.error().is_not_found()) {
      missing.push_back(key);
    } else if (!ds) {
      return fail(ds.error().with_context("reading DaemonSet " + key.first + "/" + key.second));
    }
  }
  return missing;
}

Result<std::vector<json>> pods_on(kube::Client& client, const std::string& node, const std::string& selector,
                                  std::string* resource_version = nullptr) {
  kube::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node;
  lo.label_selector = selector;
  GPUCTL_TRY_ASSIGN(kube::ListResult list, client.list(kube::paths::pods(), lo));
  if (resource_version) *resource_version = list.resource_version;
  return list.items;
}

std::string seconds_text(milliseconds d) { return util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(d)); }

// Groups "ns/a", "ns/b" by message: "message: ns/a, ns/b; other: ns/c".
std::string grouped(const std::vector<std::pair<std::string, std::string>>& message_and_pod) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& [m, p] : message_and_pod) {
    if (!by.count(m)) order.push_back(m);
    by[m].push_back(p);
  }
  std::vector<std::string> parts;
  for (const auto& m : order) parts.push_back(fmt::format("{}: {}", m, fmt::join(by[m], ", ")));
  return fmt::format("{}", fmt::join(parts, "; "));
}

class NodeDrainer {
 public:
  NodeDrainer(kube::Client& client, const json& node, const DrainOptions& options)
      : client_(client), node_(node), o_(options), name_(kube::name_of(node)) {
    result_.node = name_;
  }

  NodeDrainResult run() {
    start_ = Clock::now();
    drain();
    result_.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start_);
    return result_;
  }

 private:
  struct Target {
    std::string ns, name, uid;
    std::string key() const { return ns + "/" + name; }
  };

  void progress(const std::string& message) {
    if (!o_.on_progress) return;
    // A pod being evicted sits in pending_ until the pass ends and in waiting_ once accepted:
    // count it once.
    std::size_t remaining = waiting_.size();
    for (const auto& t : pending_) remaining += waiting_.count(t.key()) == 0 ? 1 : 0;
    o_.on_progress({name_, message, static_cast<int>(remaining)});
  }
  void sleep(milliseconds d) {
    if (o_.sleep) {
      o_.sleep(d);
    } else {
      util::sleep_unless_cancelled(d);
    }
  }
  bool cancelled() const { return stop_requested(o_); }
  // Stops where it is: evictions already accepted stand, nothing more is sent, and the node
  // stays cordoned (one atomic patch made it so), so a re-run continues from here.
  void finish_interrupted() {
    std::size_t left = pending_.size() + waiting_.size() + failed_.size();
    finish(DrainOutcome::interrupted, fmt::format("{} with {} pod(s) still on the node; it stays cordoned (re-run to continue)",
                                                  interrupted_by(), left));
  }
  std::optional<milliseconds> left() const {
    if (o_.timeout.count() <= 0) return std::nullopt;
    auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - start_);
    return spent >= o_.timeout ? milliseconds(0) : o_.timeout - spent;
  }

  void finish(DrainOutcome outcome, std::string message) {
    result_.outcome = outcome;
    result_.message = std::move(message);
    for (const auto& t : pending_) result_.remaining.push_back(t.key());
    for (const auto& [k, t] : waiting_) result_.remaining.push_back(k);
    for (const auto& [k, m] : failed_) result_.remaining.push_back(k);
    std::sort(result_.remaining.begin(), result_.remaining.end());
    for (std::size_t i = 0; i < in_flight_; ++i) {
      if (o_.slots) o_.slots->release();
    }
    in_flight_ = 0;
  }

  void drain() {
    // 1. Cordon (idempotent: a node already cordoned is fine).
    ApplyOptions apply;
    CordonRequest request = o_.cordon;
    request.cordon = true;
    auto change = apply_node_edit(client_, node_, [&](const json& n) { return plan_cordon(n, request); }, apply);
    if (change.outcome == ChangeOutcome::failed && cancelled()) {
      // Only the read before the patch is abandoned; a patch in flight completes and succeeds.
      result_.cordon = "not cordoned";
      return finish(DrainOutcome::interrupted, interrupted_by() + " before the cordon: nothing was changed");
    }
    if (change.outcome == ChangeOutcome::failed) {
      result_.cordon = "failed";
      finish(DrainOutcome::failed, "cordon failed: " + (change.error ? change.error->message : change.summary));
      return;
    }
    result_.cordon = change.outcome == ChangeOutcome::changed ? "cordoned" : "already cordoned";
    progress(change.outcome == ChangeOutcome::changed
                 ? (request.reason.empty() ? std::string("cordoned") : fmt::format("cordoned: reason \"{}\"", request.reason))
                 : (change.summary.empty() ? std::string("already cordoned") : change.summary));

    // 2. Choose the pods.
    if (cancelled()) return finish_interrupted();
    auto pods = pods_on(client_, name_, o_.pod_selector);
    if (!pods && cancelled()) return finish_interrupted();
    if (!pods) return finish(DrainOutcome::failed, "listing pods: " + pods.error().message);
    auto missing = missing_daemonsets(client_, *pods);
    if (!missing && cancelled()) return finish_interrupted();
    if (!missing) return finish(DrainOutcome::failed, missing.error().message);
    std::vector<std::pair<std::string, std::string>> refused;
    auto now = std::chrono::system_clock::now();
    for (const auto& pod : *pods) {
      PodFacts facts;
      facts.now = now;
      json c = controller_of(pod);
      if (kube::string_field(c, "kind") == "DaemonSet") {
        auto k = std::make_pair(kube::namespace_of(pod), kube::string_field(c, "name"));
        facts.daemonset_exists = std::find(missing->begin(), missing->end(), k) == missing->end();
      }
      auto verdict = classify_pod(pod, o_.policy, facts);
      switch (verdict.action) {
        case PodAction::skip: result_.skipped++; break;
        case PodAction::refuse: refused.emplace_back(verdict.message, key_of(pod)); break;
        case PodAction::evict:
        case PodAction::blocked: pending_.push_back({kube::namespace_of(pod), kube::name_of(pod), uid_of(pod)}); break;
      }
    }
    if (!refused.empty()) {
      // kubectl's rule: a node with a refused pod is not drained at all.
      for (const auto& [m, k] : refused) failed_.emplace_back(k, m);
      return finish(DrainOutcome::failed, "cannot drain, nothing was evicted: " + grouped(refused));
    }
    progress(fmt::format("{} pod(s) to evict, {} skipped", pending_.size(), result_.skipped));

    // 3. Evict (or delete) and wait.
    bool use_delete = o_.disable_eviction;
    if (!use_delete && !pending_.empty()) {
      auto supported = eviction_supported(client_);
      if (!supported && cancelled()) return finish_interrupted();
      if (!supported) return finish(DrainOutcome::failed, "discovery of pods/eviction: " + supported.error().message);
      if (!*supported) {
        use_delete = true;
        progress("the server offers no pods/eviction: deleting pods instead");
      }
    }
    for (bool first = true;; first = false) {
      if (cancelled()) return finish_interrupted();
      bool refused_now = false;
      if (first || !left() || left()->count() > 0) refused_now = evict_round(use_delete);
      if (pending_.empty() && waiting_.empty()) break;
      auto remaining_time = left();
      if (remaining_time && remaining_time->count() == 0) {
        std::string why = last_block_.empty() ? "" : ": " + grouped(last_block_vec());
        return finish(DrainOutcome::timed_out, fmt::format("timed out after {}{}", seconds_text(o_.timeout),
                                                           why.empty() ? waiting_text() : why));
      }
      milliseconds window = pending_.empty() ? milliseconds(60000) : o_.retry_delay;
      if (remaining_time) window = std::min(window, *remaining_time);
      if (!waiting_.empty()) {
        wait_for_gone(window);
      } else if (refused_now || !pending_.empty()) {
        sleep(window);
      }
    }
    if (!failed_.empty()) {
      std::vector<std::pair<std::string, std::string>> v;
      for (const auto& [k, m] : failed_) v.emplace_back(m, k);
      return finish(DrainOutcome::failed, grouped(v));
    }
    progress("drained");
    finish(DrainOutcome::drained, "");
  }

  std::vector<std::pair<std::string, std::string>> last_block_vec() const {
    std::vector<std::pair<std::string, std::string>> v;
    for (const auto& [k, m] : last_block_) v.emplace_back(m, k);
    return v;
  }
  std::string waiting_text() const {
    std::vector<std::string> keys;
    for (const auto& t : pending_) keys.push_back(t.key());
    for (const auto& [k, t] : waiting_) keys.push_back(k);
    return keys.empty() ? "" : fmt::format(" waiting for: {}", fmt::join(keys, ", "));
  }

  // The budget that governs this pod, described ("pdb ns/x allows 0 disruptions, ..."), from a
  // fresh read of the namespace's PDBs; falls back to the server's message.
  std::string budget_text(const Target& t, const Error& e) {
    auto pod = client_.get(kube::paths::pod(t.ns, t.name));
    auto list = client_.list(kube::paths::pod_disruption_budgets(t.ns));
    if (pod && list) {
      auto matching = pdbs_for_pod(*pod, list->items);
      if (matching.size() == 1) return describe_budget(pdb_budget(*matching[0]));
    }
    for (const auto& c : e.causes) {
      if (c.type == "DisruptionBudget") return c.message;
    }
    return e.message;
  }

  // One pass over the pods still to evict. Returns whether any eviction was refused (429).
  bool evict_round(bool use_delete) {
    bool refused = false;
    std::vector<Target> still;
    for (auto& t : pending_) {
      if (cancelled() || (o_.slots && !o_.slots->try_acquire())) {
        still.push_back(t);
        continue;
      }
      Result<json> r;
      if (use_delete) {
        json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
        if (o_.grace_period_seconds >= 0) options["gracePeriodSeconds"] = o_.grace_period_seconds;
        if (!t.uid.empty()) options["preconditions"] = {{"uid", t.uid}};
        r = client_.remove(kube::paths::pod(t.ns, t.name), options);
      } else {
        json body = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", t.name}, {"namespace", t.ns}}}};
        if (o_.grace_period_seconds >= 0) body["deleteOptions"] = {{"gracePeriodSeconds", o_.grace_period_seconds}};
        r = client_.create(kube::paths::pod_eviction(t.ns, t.name), body);
      }
      if (r || r.error().is_not_found()) {
        if (!r) {  // already gone
          if (o_.slots) o_.slots->release();
          result_.evicted++;
          last_block_.erase(t.key());
          progress(t.key() + " already gone");
          continue;
        }
        in_flight_++;
        last_block_.erase(t.key());
        waiting_[t.key()] = t;
        progress(fmt::format("{} {}", use_delete ? "deleted" : "evicted", t.key()));
        continue;
      }
      if (o_.slots) o_.slots->release();
      const Error& e = r.error();
      if (e.is_too_many_requests()) {
        refused = true;
        std::string why = budget_text(t, e);
        last_block_[t.key()] = why;
        progress(fmt::format("{}: eviction refused, will retry after {}: {}", t.key(), seconds_text(o_.retry_delay), why));
        still.push_back(t);
      } else if (e.http_status == 500 && e.message.find("more than one PodDisruptionBudget") != std::string::npos) {
        failed_.emplace_back(t.key(), "more than one PodDisruptionBudget matches, which the eviction API refuses "
                                      "(make one PDB select the pod, or use --disable-eviction)");
        progress(t.key() + ": more than one PodDisruptionBudget matches; the eviction API refuses it");
      } else if (e.is_conflict() && use_delete) {
        progress(t.key() + " was replaced");  // uid precondition: the pod we meant is gone
        result_.evicted++;
      } else {
        failed_.emplace_back(t.key(), e.message);
        progress(t.key() + ": " + e.message);
      }
    }
    pending_ = std::move(still);
    return refused;
  }

  void gone(const std::string& key) {
    waiting_.erase(key);
    result_.evicted++;
    if (o_.slots) o_.slots->release();
    if (in_flight_ > 0) in_flight_--;
    progress(key + " gone");
  }

  // Lists the node's pods once, then watches from there until the waited pods are gone or the
  // window ends. A pod with the same name and another UID is a replacement: the old one is gone.
  void wait_for_gone(milliseconds window) {
    std::string rv;
    auto pods = pods_on(client_, name_, {}, &rv);
    if (!pods && cancelled()) return;  // the caller's loop reports it
    if (!pods) {
      progress("listing pods: " + pods.error().message);
      sleep(std::min(window, milliseconds(1000)));
      return;
    }
    std::map<std::string, std::string> present;
    for (const auto& p : *pods) present[key_of(p)] = uid_of(p);
    std::vector<std::string> done;
    for (const auto& [k, t] : waiting_) {
      auto it = present.find(k);
      if (it == present.end() || (!t.uid.empty() && it->second != t.uid)) done.push_back(k);
    }
    for (const auto& k : done) gone(k);
    if (waiting_.empty()) return;
    std::vector<std::string> keys;
    for (const auto& [k, t] : waiting_) keys.push_back(k);
    progress(fmt::format("waiting for {} pod(s) to go: {}", keys.size(), fmt::join(keys, ", ")));
    kube::WatchOptions wo;
    wo.field_selector = "spec.nodeName=" + name_;
    wo.resource_version = rv;
    wo.timeout_seconds = std::max<int>(1, static_cast<int>((window.count() + 999) / 1000));
    auto started = Clock::now();
    auto w = client_.watch(kube::paths::pods(), wo, [&](const kube::WatchEvent& ev) {
      if (ev.type == "BOOKMARK") return true;
      std::string k = key_of(ev.object);
      auto it = waiting_.find(k);
      if (it == waiting_.end()) return true;
      if (ev.type == "DELETED" ? (it->second.uid.empty() || uid_of(ev.object) == it->second.uid)
                               : (!it->second.uid.empty() && uid_of(ev.object) != it->second.uid)) {
        gone(k);
      }
      // Stop when all are gone, when interrupted, or to retry refused evictions.
      if (waiting_.empty() || cancelled()) return false;
      return pending_.empty() || Clock::now() - started < window;
    });
    if (!w && !w.error().is_gone() && !cancelled()) {
      progress("watch: " + w.error().message);
      sleep(std::min(window, milliseconds(1000)));
    }
  }

  kube::Client& client_;
  const json& node_;
  const DrainOptions& o_;
  std::string name_;
  NodeDrainResult result_;
  Clock::time_point start_;
  std::vector<Target> pending_;
  std::map<std::string, Target> waiting_;
  std::vector<std::pair<std::string, std::string>> failed_;  // key, message
  std::map<std::string, std::string> last_block_;             // key -> last PDB refusal
  std::size_t in_flight_ = 0;
};

}  // namespace

NodeDrainResult drain_node(kube::Client& client, const json& node, const DrainOptions& options) {
  return NodeDrainer(client, node, options).run();
}

std::vector<NodeDrainResult> drain_nodes(kube::Client& client, const std::vector<json>& nodes,
                                         const DrainOptions& options, int max_concurrent) {
  std::vector<NodeDrainResult> results(nodes.size());
  std::size_t started = util::parallel_for(
      nodes.size(), max_concurrent, [&](std::size_t i) { results[i] = drain_node(client, nodes[i], options); },
      [&] { return !stop_requested(options); });
  for (std::size_t i = started; i < nodes.size(); ++i) results[i] = not_started(nodes[i]);
  return results;
}

// ---- Plans --------------------------------------------------------------------------------------

Result<DrainPlan> plan_drain(kube::Client& client, const std::vector<json>& nodes, const DrainPolicy& policy,
                             const std::string& pod_selector) {
  PlanInputs in;
  in.nodes = nodes;
  GPUCTL_TRY_ASSIGN(kube::ListResult pdbs, client.list(kube::paths::pod_disruption_budgets()));
  in.pdbs = std::move(pdbs.items);
  bool any_gpu = false;
  for (const auto& n : nodes) {
    GPUCTL_TRY_ASSIGN(std::vector<json> pods, pods_on(client, kube::name_of(n), pod_selector));
    GPUCTL_TRY_ASSIGN(auto missing, missing_daemonsets(client, pods));
    in.missing_daemonsets.insert(in.missing_daemonsets.end(), missing.begin(), missing.end());
    any_gpu = any_gpu || std::any_of(pods.begin(), pods.end(), [](const json& p) { return requests_gpus(p); }) || is_gpu_node(n);
    in.pods.push_back(std::move(pods));
  }
  if (any_gpu) {
    NodeInventoryOptions io;
    io.include_non_gpu_nodes = true;
    GPUCTL_TRY_ASSIGN(in.inventory, collect_node_inventory(client, io));
  }
  return build_drain_plan(in, policy, std::chrono::system_clock::now());
}

// ---- Rolling maintenance ------------------------------------------------------------------------

namespace {

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
    auto change = apply_node_edit(client, std::string_view(node), [&](const json& n) { return plan_cordon(n, request); }, {});
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
