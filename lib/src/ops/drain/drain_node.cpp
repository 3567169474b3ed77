// The drain of one node, step by step: cordon, choose the pods by kubectl's rules, then evict
// (or delete) and wait until they are gone or the time is up. The eviction pass and the wait
// themselves are in drain_evict.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "drain_internal.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/util/cancel.hpp"

namespace gpuctl::ops::drain_detail {

using json = nlohmann::json;
using std::chrono::milliseconds;

namespace {

// What classify_pod needs to know beyond the pod: the time, and whether its DaemonSet is there.
PodFacts facts_of(const json& pod, const std::vector<std::pair<std::string, std::string>>& missing,
                  std::chrono::system_clock::time_point now) {
  PodFacts facts;
  facts.now = now;
  json c = controller_of(pod);
  if (kube::string_field(c, "kind") == "DaemonSet") {
    auto k = std::make_pair(kube::namespace_of(pod), kube::string_field(c, "name"));
    facts.daemonset_exists = std::find(missing.begin(), missing.end(), k) == missing.end();
  }
  return facts;
}

}  // namespace

NodeDrainer::NodeDrainer(kube::Client& client, const json& node, const DrainOptions& options)
    : client_(client), node_(node), o_(options), name_(kube::name_of(node)) {
  result_.node = name_;
}

NodeDrainResult NodeDrainer::run() {
  start_ = Clock::now();
  drain();
  result_.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start_);
  return result_;
}

void NodeDrainer::drain() {
  if (!cordon() || !choose_pods()) return;
  std::optional<bool> use_delete = deletes_instead_of_evicting();
  if (!use_delete) return;  // the discovery failed or was interrupted: finished already
  evict_until_gone(*use_delete);
}

// 1. Cordon (idempotent: a node already cordoned is fine).
bool NodeDrainer::cordon() {
  ApplyOptions apply;
  CordonRequest request = o_.cordon;
  request.cordon = true;
  auto change = apply_node_edit(client_, node_, [&](const json& n) { return plan_cordon(n, request); }, apply);
  if (change.outcome == ChangeOutcome::failed && cancelled()) {
    // Only the read before the patch is abandoned; a patch in flight completes and succeeds.
    result_.cordon = "not cordoned";
    return stop(DrainOutcome::interrupted, interrupted_by() + " before the cordon: nothing was changed");
  }
  if (change.outcome == ChangeOutcome::failed) {
    result_.cordon = "failed";
    return stop(DrainOutcome::failed, "cordon failed: " + (change.error ? change.error->message : change.summary));
  }
  result_.cordon = change.outcome == ChangeOutcome::changed ? "cordoned" : "already cordoned";
  progress(
      change.outcome == ChangeOutcome::changed
          ? (request.reason.empty() ? std::string("cordoned") : fmt::format("cordoned: reason \"{}\"", request.reason))
          : (change.summary.empty() ? std::string("already cordoned") : change.summary));
  return true;
}

// 2. Choose the pods: skipped ones stay, the others wait in pending_ for eviction.
bool NodeDrainer::choose_pods() {
  if (cancelled()) return stop_interrupted();
  auto pods = pods_on(client_, name_, o_.pod_selector);
  if (!pods && cancelled()) return stop_interrupted();
  if (!pods) return stop(DrainOutcome::failed, "listing pods: " + pods.error().message);
  auto missing = missing_daemonsets(client_, *pods);
  if (!missing && cancelled()) return stop_interrupted();
  if (!missing) return stop(DrainOutcome::failed, missing.error().message);
  std::vector<std::pair<std::string, std::string>> refused;
  auto now = std::chrono::system_clock::now();
  for (const auto& pod : *pods) {
    auto verdict = classify_pod(pod, o_.policy, facts_of(pod, *missing, now));
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
    return stop(DrainOutcome::failed, "cannot drain, nothing was evicted: " + grouped(refused));
  }
  progress(fmt::format("{} pod(s) to evict, {} skipped", pending_.size(), result_.skipped));
  return true;
}

// 3a. Evict, or delete when asked to or when the server has no pods/eviction (nullopt: the drain
// ended here).
std::optional<bool> NodeDrainer::deletes_instead_of_evicting() {
  if (o_.disable_eviction || pending_.empty()) return o_.disable_eviction;
  auto supported = eviction_supported(client_);
  if (!supported) {
    if (cancelled()) {
      finish_interrupted();
    } else {
      finish(DrainOutcome::failed, "discovery of pods/eviction: " + supported.error().message);
    }
    return std::nullopt;
  }
  if (*supported) return false;
  progress("the server offers no pods/eviction: deleting pods instead");
  return true;
}

// 3b. Evict in passes; between them wait for the evicted pods to go (a watch), or for the retry
// delay after a PDB refused one, until none is left or the timeout is spent.
void NodeDrainer::evict_until_gone(bool use_delete) {
  for (bool first = true;; first = false) {
    if (cancelled()) return finish_interrupted();
    bool refused_now = false;
    if (first || !left() || left()->count() > 0) refused_now = evict_round(use_delete);
    if (pending_.empty() && waiting_.empty()) break;
    auto remaining_time = left();
    if (remaining_time && remaining_time->count() == 0) {
      std::string why = last_block_.empty() ? "" : ": " + grouped(last_block_vec());
      return finish(DrainOutcome::timed_out,
                    fmt::format("timed out after {}{}", seconds_text(o_.timeout), why.empty() ? waiting_text() : why));
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

void NodeDrainer::progress(const std::string& message) {
  if (!o_.on_progress) return;
  // A pod being evicted sits in pending_ until the pass ends and in waiting_ once accepted:
  // count it once.
  std::size_t remaining = waiting_.size();
  for (const auto& t : pending_) remaining += waiting_.count(t.key()) == 0 ? 1 : 0;
  o_.on_progress({name_, message, static_cast<int>(remaining)});
}

void NodeDrainer::sleep(milliseconds d) {
  if (o_.sleep) {
    o_.sleep(d);
  } else {
    util::sleep_unless_cancelled(d);
  }
}

bool NodeDrainer::cancelled() const { return stop_requested(o_); }

std::optional<milliseconds> NodeDrainer::left() const {
  if (o_.timeout.count() <= 0) return std::nullopt;
  auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - start_);
  return spent >= o_.timeout ? milliseconds(0) : o_.timeout - spent;
}

void NodeDrainer::finish(DrainOutcome outcome, std::string message) {
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

// Stops where it is: evictions already accepted stand, nothing more is sent, and the node
// stays cordoned (one atomic patch made it so), so a re-run continues from here.
void NodeDrainer::finish_interrupted() {
  std::size_t left = pending_.size() + waiting_.size() + failed_.size();
  finish(DrainOutcome::interrupted,
         fmt::format("{} with {} pod(s) still on the node; it stays cordoned (re-run to continue)", interrupted_by(),
                     left));
}

bool NodeDrainer::stop(DrainOutcome outcome, std::string message) {
  finish(outcome, std::move(message));
  return false;
}

bool NodeDrainer::stop_interrupted() {
  finish_interrupted();
  return false;
}

std::vector<std::pair<std::string, std::string>> NodeDrainer::last_block_vec() const {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& [k, m] : last_block_) v.emplace_back(m, k);
  return v;
}

std::string NodeDrainer::waiting_text() const {
  std::vector<std::string> keys;
  for (const auto& t : pending_) keys.push_back(t.key());
  for (const auto& [k, t] : waiting_) keys.push_back(k);
  return keys.empty() ? "" : fmt::format(" waiting for: {}", fmt::join(keys, ", "));
}

}  // namespace gpuctl::ops::drain_detail
