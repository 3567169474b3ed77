// --avoid-failed-nodes (see avoid_failed_nodes.hpp): the per-job label key, which causes blame
// the node, the label writes while `submit --wait` watches, and their removal at the end.
#include "gpuctl/ops/submit/avoid_failed_nodes.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/util/sha256.hpp"
#include "submit_job_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

// A node's fault, not the program's (cuda-oom) nor a peer's (the NCCL rows).
constexpr std::string_view kNodeFaults[] = {"driver-too-old", "driver-library-mismatch", "gpu-lost",
                                            "nvml-error",     "no-cuda-device",          "xid"};

}  // namespace

std::string avoid_label_key(std::string_view namespace_name, std::string_view job_name) {
  std::string hash = util::sha256_hex(fmt::format("{}/{}", namespace_name, job_name)).substr(0, 6);
  std::string name(job_name.substr(0, 56));
  while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
  return fmt::format("{}/{}-{}", kAvoidLabelDomain, name, hash);
}

bool blames_node(const TextClass& cause) {
  return std::find(std::begin(kNodeFaults), std::end(kNodeFaults), cause.id) != std::end(kNodeFaults);
}

std::vector<const FailedAttempt*> attempts_to_avoid(const std::vector<FailedAttempt>& attempts,
                                                    const std::set<std::string>& avoided_nodes) {
  std::vector<const FailedAttempt*> out;
  std::set<std::string> seen = avoided_nodes;
  for (const auto& a : attempts) {
    if (a.node.empty() || seen.count(a.node) || !a.gpu_cause || !blames_node(a.gpu_cause->cause)) continue;
    seen.insert(a.node);
    out.push_back(&a);
  }
  return out;
}

json avoid_label_patch(std::string_view key, const json& value) {
  return {{"metadata", {{"labels", {{std::string(key), value}}}}}};
}

FailedNodeAvoider::FailedNodeAvoider(kube::Client& client, std::string namespace_name, std::string job_name,
                                     std::function<void(const std::string&)> on_notice)
    : client_(client),
      ns_(std::move(namespace_name)),
      job_(std::move(job_name)),
      key_(avoid_label_key(ns_, job_)),
      on_notice_(std::move(on_notice)) {}

void FailedNodeAvoider::poll(const JobSummary& summary) {
  kube::WriteOptions write;
  write.field_manager = "gpuctl";
  for (const FailedAttempt* a : attempts_to_avoid(summary.failed_attempts, avoided_)) {
    const TextClass& cause = a->gpu_cause->cause;
    avoided_.insert(a->node);
    auto patched =
        client_.patch(kube::paths::node(a->node), kube::PatchType::merge, avoid_label_patch(key_, cause.id), write);
    if (patched) {
      on_notice_(fmt::format("pod {} failed on node {}: {}; the job's next pods keep off it (label {}={})", a->pod,
                             a->node, cause.cause, key_, cause.id));
    } else {
      on_notice_(
          fmt::format("warning: pod {} failed on node {}: {}, but gpuctl cannot label the node ({}): the next "
                      "attempt may land there again; cordon it (gpuctl cordon {}) or ask an admin",
                      a->pod, a->node, cause.cause, patched.error().message, a->node));
    }
  }
}

void FailedNodeAvoider::release() {
  kube::ListOptions options;
  options.label_selector = key_;  // every node carrying the key, whoever labelled it
  auto nodes = client_.list(kube::paths::nodes(), options);
  if (!nodes) {
    if (!avoided_.empty()) leave();
    return;
  }
  kube::WriteOptions write;
  write.field_manager = "gpuctl";
  for (const auto& node : nodes->items) {
    const std::string name = kube::name_of(node);
    auto patched =
        client_.patch(kube::paths::node(name), kube::PatchType::merge, avoid_label_patch(key_, nullptr), write);
    if (patched) {
      on_notice_(fmt::format("node {}: label {} removed (the job has finished)", name, key_));
    } else {
      on_notice_(fmt::format("warning: node {} keeps label {} ({}): gpuctl label {} {}-", name, key_,
                             patched.error().message, name, key_));
    }
  }
}

void FailedNodeAvoider::leave() {
  if (avoided_.empty()) return;
  std::vector<std::string> nodes(avoided_.begin(), avoided_.end());
  on_notice_(
      fmt::format("nodes {} keep label {} while job {}/{} may still run; remove it when it is done: gpuctl "
                  "label {} {}-",
                  fmt::join(nodes, ", "), key_, ns_, job_, fmt::join(nodes, " "), key_));
}

// The Job's side: its pods require nodes without this job's key.
Result<void> keep_off_avoided_nodes(json& job, const SubmitSpec& spec, BuiltJob& built) {
  if (!spec.avoid_failed_nodes) return {};
  if (kube::name_of(job).empty()) {
    return fail(Errc::invalid_argument,
                "--avoid-failed-nodes needs the job's name (its label key is made from it): set metadata.name "
                "instead of generateName, or name the job on the command line");
  }
  const std::string key = avoid_label_key(kube::namespace_of(job), kube::name_of(job));
  json& pod_spec = job["spec"]["template"]["spec"];
  and_node_selector_terms(
      pod_spec, json::array({{{"matchExpressions", json::array({{{"key", key}, {"operator", "DoesNotExist"}}})}}}));
  built.notes.push_back(fmt::format(
      "keeps off nodes labelled {}: while gpuctl waits, a pod that fails for its node's GPU (NVML, Xid, lost GPU, "
      "driver) labels that node, so the next attempt goes elsewhere",
      key));
  return {};
}

}  // namespace gpuctl::ops
