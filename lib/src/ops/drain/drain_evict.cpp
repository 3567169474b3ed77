// One node's evictions and waits: a pass that evicts (or deletes) the pods still to go, with
// PodDisruptionBudget refusals (429) kept for a later pass and named, and the wait, by a watch,
// until the evicted pods are gone.
#include <algorithm>

#include <fmt/format.h>

#include "drain_internal.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"

namespace gpuctl::ops::drain_detail {

using json = nlohmann::json;
using std::chrono::milliseconds;

// The Eviction (policy/v1) of the pod, or with use_delete a DELETE with the pod's UID as
// precondition, so a replacement of the same name is never deleted.
Result<json> NodeDrainer::send_removal(const Target& t, bool use_delete) {
  if (use_delete) {
    json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
    if (o_.grace_period_seconds >= 0) options["gracePeriodSeconds"] = o_.grace_period_seconds;
    if (!t.uid.empty()) options["preconditions"] = {{"uid", t.uid}};
    return client_.remove(kube::paths::pod(t.ns, t.name), options);
  }
  json body = {
      {"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", t.name}, {"namespace", t.ns}}}};
  if (o_.grace_period_seconds >= 0) body["deleteOptions"] = {{"gracePeriodSeconds", o_.grace_period_seconds}};
  return client_.create(kube::paths::pod_eviction(t.ns, t.name), body);
}

// The budget that governs this pod, described ("pdb ns/x allows 0 disruptions, ..."), from a
// fresh read of the namespace's PDBs; falls back to the server's message.
std::string NodeDrainer::budget_text(const Target& t, const Error& e) {
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
bool NodeDrainer::evict_round(bool use_delete) {
  bool refused = false;
  std::vector<Target> still;
  for (auto& t : pending_) {
    if (cancelled() || (o_.slots && !o_.slots->try_acquire())) {
      still.push_back(t);
      continue;
    }
    Result<json> r = send_removal(t, use_delete);
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
      progress(
          fmt::format("{}: eviction refused, will retry after {}: {}", t.key(), seconds_text(o_.retry_delay), why));
      still.push_back(t);
    } else if (e.http_status == 500 && e.message.find("more than one PodDisruptionBudget") != std::string::npos) {
      failed_.emplace_back(t.key(),
                           "more than one PodDisruptionBudget matches, which the eviction API refuses "
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

void NodeDrainer::gone(const std::string& key) {
  waiting_.erase(key);
  result_.evicted++;
  if (o_.slots) o_.slots->release();
  if (in_flight_ > 0) in_flight_--;
  progress(key + " gone");
}

// Lists the node's pods once, then watches from there until the waited pods are gone or the
// window ends. A pod with the same name and another UID is a replacement: the old one is gone.
void NodeDrainer::wait_for_gone(milliseconds window) {
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

}  // namespace gpuctl::ops::drain_detail
