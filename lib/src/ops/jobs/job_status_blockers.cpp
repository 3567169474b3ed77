// What stands in the way of a pod the scheduler cannot place, named instead of counted: the taints
// it does not tolerate with the nodes that carry them, the selector no node matches with the
// values that exist, the claims it waits for. Taints and labels are judged by the scheduler's own
// rules over the node list (ops/common/placement_blockers.hpp); claims are the pod's own, named
// when the scheduler's words are about claims.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/scheduling.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops::job_status_detail {

using json = nlohmann::json;
namespace {

// Nodes named in a line before "+N more"; the JSON keeps them all.
constexpr std::size_t kNodesShown = 5;
constexpr std::size_t kValuesShown = 8;

std::string first_of(const std::vector<std::string>& names, std::size_t shown) {
  std::vector<std::string> head(names.begin(),
                                names.begin() + static_cast<std::ptrdiff_t>(std::min(shown, names.size())));
  std::string text = fmt::format("{}", fmt::join(head, ", "));
  if (names.size() > shown) text += fmt::format(" +{} more", names.size() - shown);
  return text;
}

// The nodes that could hold the pod by size: those whose allocatable has its largest nvidia.com/*
// request per pod. A taint on a node too small for it anyway is not what keeps it waiting. When
// none offers it (a DRA-backed extended resource, or a request no node ever fits), all of them.
std::vector<const json*> nodes_that_fit(const json& pod, const std::vector<json>& nodes) {
  std::string resource;
  std::int64_t wanted = 0;
  for (const auto& [name, q] : kube::pod_requests(pod)) {
    if (is_nvidia_resource(name) && q.value() > wanted) resource = name, wanted = q.value();
  }
  std::vector<const json*> all, fit;
  for (const auto& node : nodes) {
    all.push_back(&node);
    if (wanted == 0) continue;
    auto allocatable = kube::parse_resource_list(kube::field_at(node, {"status", "allocatable"}));
    if (auto q = allocatable.find(resource); q != allocatable.end() && q->second.value() >= wanted) {
      fit.push_back(&node);
    }
  }
  return fit.empty() ? all : fit;
}

// The topics of the scheduler's words: of each entry of its verdict, or of the whole text.
bool about(std::string_view message, VerdictTopic topic) {
  if (auto verdict = parse_scheduling_message(message)) {
    return std::any_of(verdict->reasons.begin(), verdict->reasons.end(),
                       [&](const SchedulingReason& r) { return verdict_topic(r.reason) == topic; });
  }
  return verdict_topic(message) == topic;
}

// The claims of the pod that the scheduler's words are about: DRA's, or its volumes'.
std::vector<UnboundClaim> claims_in_question(const json& pod, std::string_view message) {
  std::vector<UnboundClaim> out;
  if (about(message, VerdictTopic::resource_claim)) {
    for (auto& ref : pod_claim_refs(pod)) out.push_back({"ResourceClaim", std::move(ref.name), std::move(ref.how)});
  }
  if (about(message, VerdictTopic::volume_claim)) {
    for (const auto& volume : kube::array_field(kube::field(pod, "spec"), "volumes")) {
      std::string volume_name = kube::string_field(volume, "name");
      std::string claim = kube::string_field(kube::field(volume, "persistentVolumeClaim"), "claimName");
      // A generic ephemeral volume's claim is named <pod>-<volume>.
      if (claim.empty() && kube::field(volume, "ephemeral").is_object()) claim = kube::name_of(pod) + "-" + volume_name;
      if (!claim.empty()) out.push_back({"PersistentVolumeClaim", claim, "volume " + volume_name});
    }
  }
  return out;
}

// The part of a taint as the scheduler names it ("key" or "key=value") matches.
bool names_taint(std::string_view named, const kube::Taint& taint) {
  if (named.empty()) return true;
  return named == taint.key || named == taint.key + "=" + taint.value;
}

std::string taint_words(const PendingDetail& d, std::string_view named) {
  std::vector<std::string> parts;
  for (const auto& t : d.untolerated_taints) {
    if (names_taint(named, t.taint))
      parts.push_back(kube::to_string(t.taint) + " on " + first_of(t.nodes, kNodesShown));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string selector_words(const PendingDetail& d) {
  if (!d.unmatched_selector) return {};
  std::vector<std::string> labels;
  for (const auto& l : d.unmatched_selector->labels) {
    labels.push_back(l.values.empty() ? fmt::format("no node has the label {}", l.key)
                                      : fmt::format("the cluster has {}={}", l.key, first_of(l.values, kValuesShown)));
  }
  std::string text = fmt::format("{} matches no node", d.unmatched_selector->selector);
  return labels.empty() ? text : fmt::format("{}; {}", text, fmt::join(labels, "; "));
}

std::string claim_words(const PendingDetail& d, std::string_view kind) {
  std::vector<std::string> parts;
  for (const auto& c : d.unbound_claims) {
    if (c.kind != kind) continue;
    parts.push_back(c.name.empty() ? fmt::format("{} {} not made yet", c.kind, c.source)
                                   : fmt::format("{} {} ({})", c.kind, c.name, c.source));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

PendingDetail pending_detail(const json& pod, std::string message, const std::vector<json>* nodes) {
  PendingDetail d;
  d.pod = kube::name_of(pod);
  d.unbound_claims = claims_in_question(pod, message);
  d.scheduler_message = std::move(message);
  if (nodes == nullptr) return d;
  const json& spec = kube::field(pod, "spec");
  d.untolerated_taints = placement_blockers(spec, nodes_that_fit(pod, *nodes)).taints;
  bool matches_some = std::any_of(nodes->begin(), nodes->end(),
                                  [&](const json& node) { return kube::matches_node_selector(spec, node); });
  if (!matches_some && kube::has_placement_constraints(spec)) {
    std::vector<const json*> all;
    for (const auto& node : *nodes) all.push_back(&node);
    const bool by_selector = kube::field(spec, "nodeSelector").is_object();
    const bool by_affinity =
        kube::field_at(spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"})
            .is_object();
    std::string what = by_selector && !by_affinity   ? "nodeSelector"
                       : by_affinity && !by_selector ? "node affinity"
                                                     : "placement";
    d.unmatched_selector = UnmatchedSelector{what + " " + kube::describe_placement(spec), unmatched_labels(spec, all)};
  }
  return d;
}

std::string detail_words(const PendingDetail& detail, VerdictTopic topic, std::string_view taint) {
  switch (topic) {
    case VerdictTopic::taint: return taint_words(detail, taint);
    case VerdictTopic::selector: return selector_words(detail);
    case VerdictTopic::resource_claim: return claim_words(detail, "ResourceClaim");
    case VerdictTopic::volume_claim: return claim_words(detail, "PersistentVolumeClaim");
    case VerdictTopic::other: break;
  }
  return {};
}

json pending_json(const PendingDetail& d) {
  json taints = json::array();
  for (const auto& t : d.untolerated_taints) {
    json one = kube::to_json(t.taint);
    one["taint"] = kube::to_string(t.taint);
    one["nodes"] = t.nodes;
    taints.push_back(std::move(one));
  }
  json selector = nullptr;
  if (d.unmatched_selector) {
    json labels = json::array();
    for (const auto& l : d.unmatched_selector->labels) {
      labels.push_back({{"key", l.key}, {"wanted", l.wanted}, {"values", l.values}, {"nodesWithout", l.nodes_without}});
    }
    selector = {{"selector", d.unmatched_selector->selector}, {"labels", std::move(labels)}};
  }
  json claims = json::array();
  for (const auto& c : d.unbound_claims) {
    claims.push_back({{"kind", c.kind}, {"name", c.name.empty() ? json(nullptr) : json(c.name)}, {"source", c.source}});
  }
  return {{"pod", d.pod},
          {"schedulerMessage", d.scheduler_message},
          {"untoleratedTaints", std::move(taints)},
          {"unmatchedSelector", std::move(selector)},
          {"unboundClaims", std::move(claims)}};
}

}  // namespace gpuctl::ops::job_status_detail
