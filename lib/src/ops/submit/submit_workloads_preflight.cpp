// The pre-flight checks over a workload's pod groups: what judges one pod runs per group, what
// counts pods runs over their sum (quota, and the GPUs free now for groups that would compete
// for the same nodes).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/submit/submit_workloads.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using namespace preflight_detail;
using kube::Quantity;

// What decides where a group's pods go and how many GPUs each takes: groups alike in this compete
// for the same free GPUs, so gpu-free-now counts them together.
json placement_key(const json& job) {
  const json& spec = pod_spec(job);
  json requests = json::array();
  for (const auto& [name, n] : nvidia_requests(job)) requests.push_back({name, n});
  return {{"requests", requests},
          {"nodeSelector", field(spec, "nodeSelector")},
          {"affinity", field(field(spec, "affinity"), "nodeAffinity")},
          {"tolerations", field(spec, "tolerations")},
          {"nodeName", field(spec, "nodeName")}};
}

// Findings of several groups: one every group found is said once, others with the groups that
// found them first ("Master, Worker: ..."), in the order first seen.
class FindingMerger {
 public:
  void add(const std::string& group, const PreflightFinding& f) {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
      return e.finding.check == f.check && e.finding.severity == f.severity && e.finding.message == f.message;
    });
    if (it == entries_.end()) {
      entries_.push_back({f, {group}});
    } else if (std::find(it->groups.begin(), it->groups.end(), group) == it->groups.end()) {
      it->groups.push_back(group);
    }
  }
  void add_all(const std::string& group, const std::vector<PreflightFinding>& findings) {
    for (const auto& f : findings) add(group, f);
  }
  std::vector<PreflightFinding> findings(std::size_t group_count) const {
    std::vector<PreflightFinding> out;
    for (const auto& [finding, groups] : entries_) {
      PreflightFinding f = finding;
      if (groups.size() != group_count) f.message = fmt::format("{}: {}", join(groups, ", "), f.message);
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  struct Entry {
    PreflightFinding finding;
    std::vector<std::string> groups;
  };
  std::vector<Entry> entries_;
};

// gpu-free-now over the pods of the groups that compete for the same GPUs, counted together.
void free_now_over_sums(const PreflightInput& shared, const BuiltWorkload& built, FindingMerger& merged) {
  std::vector<std::pair<json, std::vector<const PodGroup*>>> classes;
  for (const auto& g : built.groups) {
    json key = placement_key(g.job);
    auto it = std::find_if(classes.begin(), classes.end(), [&](const auto& c) { return c.first == key; });
    if (it == classes.end()) {
      classes.push_back({std::move(key), {&g}});
    } else {
      it->second.push_back(&g);
    }
  }
  for (const auto& [key, groups] : classes) {
    PreflightInput input = shared;
    input.job = groups.front()->job;
    std::int64_t pods = 0;
    for (const auto* g : groups) pods += g->pods;
    input.job["spec"]["parallelism"] = pods;
    const auto found = check_gpu_free_now(input);
    for (const auto* g : groups) merged.add_all(g->name, found);
  }
}

// The keys a pod of `job` is counted under by `quota`, with the amount per pod; none when the
// quota does not (or may not) count it.
std::vector<std::pair<std::string, Quantity>> counted_keys(const json& quota, const json& job) {
  std::vector<std::pair<std::string, Quantity>> keys;
  if (quota_applies(quota, pod_spec(job)) != Applies::yes) return keys;
  for (const auto& [resource, q] : kube::pod_requests(pod_template(job))) {
    if (q.sign() <= 0) continue;
    for (const auto& key : quota_keys(resource)) keys.emplace_back(key, q);
  }
  keys.emplace_back("pods", Quantity::from_int(1));
  keys.emplace_back("count/pods", Quantity::from_int(1));
  return keys;
}

// quota over the sum of the groups: what one group alone asks past a quota its own check says;
// this finds the groups that fit one by one but not together.
std::vector<PreflightFinding> quota_over_sum(const PreflightInput& shared, const BuiltWorkload& built) {
  std::vector<PreflightFinding> out;
  if (built.groups.size() < 2) return out;
  const std::string ns = job_namespace(built.groups.front().job);
  for (const auto& quota : shared.quotas) {
    const auto hard = kube::parse_resource_list(field(field(quota, "spec"), "hard"));
    const auto used = kube::parse_resource_list(field(field(quota, "status"), "used"));
    std::map<std::string, std::vector<std::pair<const PodGroup*, Quantity>>> by_key;
    for (const auto& g : built.groups) {
      for (const auto& [key, each] : counted_keys(quota, g.job)) by_key[key].emplace_back(&g, each.times(g.pods));
    }
    for (const auto& [key, asks] : by_key) {
      auto h = hard.find(key);
      auto u = used.find(key);
      if (h == hard.end() || u == used.end() || asks.size() < 2) continue;
      const Quantity left = h->second - u->second;
      Quantity total = Quantity::from_int(0);
      bool one_alone_too_much = false;
      std::vector<std::string> parts;
      for (const auto& [g, amount] : asks) {
        total = total + amount;
        one_alone_too_much = one_alone_too_much || amount > left;
        parts.push_back(fmt::format("{} {}", g->name, amount.to_string()));
      }
      if (one_alone_too_much || !(total > left)) continue;
      out.push_back(
          refusal("quota", fmt::format("quota {}/{} allows {} {}, {} in use, the {}'s pods ask for {} "
                                       "together ({}): the API server would refuse some of them",
                                       ns, kube::name_of(quota), h->second.to_string(), key, u->second.to_string(),
                                       built.kind->kind, total.to_string(), join(parts, ", "))));
    }
  }
  return out;
}

}  // namespace

std::vector<PreflightFinding> run_workload_preflight(const PreflightInput& shared, const BuiltWorkload& built) {
  FindingMerger merged;
  auto per_group = [&](std::vector<PreflightFinding> (*check)(const PreflightInput&)) {
    for (const auto& g : built.groups) {
      PreflightInput input = shared;
      input.job = g.job;
      merged.add_all(g.name, check(input));
    }
  };
  per_group(&check_gpu_capacity);
  free_now_over_sums(shared, built, merged);
  per_group(&check_quota);
  std::vector<PreflightFinding> findings = merged.findings(built.groups.size());
  for (auto& f : quota_over_sum(shared, built)) findings.push_back(std::move(f));
  FindingMerger rest;
  for (const auto& g : built.groups) {
    PreflightInput input = shared;
    input.job = g.job;
    rest.add_all(g.name, check_limit_range(input));
    rest.add_all(g.name, check_volume_claims(input));
  }
  for (auto& f : rest.findings(built.groups.size())) findings.push_back(std::move(f));
  PreflightInput whole = shared;  // the queue label is the object's
  whole.job = built.object;
  for (auto& f : check_queue(whole)) findings.push_back(std::move(f));
  return findings;
}

}  // namespace gpuctl::ops
