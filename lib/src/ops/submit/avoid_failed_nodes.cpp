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
using kube::field;
using kube::string_field;

namespace {

// A node's fault, not the program's (cuda-oom) nor a peer's (the NCCL rows).
constexpr std::string_view kNodeFaults[] = {"driver-too-old", "driver-library-mismatch", "gpu-lost",
                                            "nvml-error",     "no-cuda-device",          "xid"};

bool disrupted(const json& pod) {
  for (const auto& c : kube::array_field(field(pod, "status"), "conditions")) {
    if (string_field(c, "type") == "DisruptionTarget" && string_field(c, "status") == "True") return true;
  }
  return false;
}

std::string label_selector_for(std::string_view job) { return fmt::format("{}={}", kJobNameLabel, job); }

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

std::vector<const json*> failed_pods_to_examine(const std::vector<json>& pods,
                                                const std::set<std::string>& avoided_nodes,
                                                const std::set<std::string>& examined_pods) {
  std::vector<const json*> out;
  for (const auto& pod : pods) {
    if (string_field(field(pod, "status"), "phase") != "Failed" || disrupted(pod)) continue;
    std::string node = string_field(field(pod, "spec"), "nodeName");
    if (node.empty() || avoided_nodes.count(node) || examined_pods.count(kube::name_of(pod))) continue;
    out.push_back(&pod);
  }
  std::stable_sort(out.begin(), out.end(), [](const json* a, const json* b) {
    return string_field(field(*a, "metadata"), "creationTimestamp") <
           string_field(field(*b, "metadata"), "creationTimestamp");
  });
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
  if (summary.failed <= failed_seen_) return;
  kube::ListOptions options;
  options.label_selector = label_selector_for(job_);
  auto pods = client_.list(kube::paths::pods(ns_), options);
  if (!pods) {
    on_notice_(fmt::format("--avoid-failed-nodes: cannot read the pods of job {}/{} ({}); will try again", ns_, job_,
                           pods.error().message));
    return;
  }
  failed_seen_ = summary.failed;
  kube::WriteOptions write;
  write.field_manager = "gpuctl";
  for (const json* pod : failed_pods_to_examine(pods->items, avoided_, examined_)) {
    const std::string node = string_field(field(*pod, "spec"), "nodeName");
    if (avoided_.count(node)) continue;  // an earlier pod of this poll blamed it
    auto finding = read_pod_gpu_cause(client_, *pod);
    if (!finding) return;  // cancelled: the wait stops too
    examined_.insert(kube::name_of(*pod));
    if (!*finding || !blames_node((*finding)->cause)) continue;
    const TextClass& cause = (*finding)->cause;
    avoided_.insert(node);
    auto patched =
        client_.patch(kube::paths::node(node), kube::PatchType::merge, avoid_label_patch(key_, cause.id), write);
    if (patched) {
      on_notice_(fmt::format("pod {} failed on node {}: {}; the job's next pods keep off it (label {}={})",
                             kube::name_of(*pod), node, cause.cause, key_, cause.id));
    } else {
      on_notice_(
          fmt::format("warning: pod {} failed on node {}: {}, but gpuctl cannot label the node ({}): the next "
                      "attempt may land there again; cordon it (gpuctl cordon {}) or ask an admin",
                      kube::name_of(*pod), node, cause.cause, patched.error().message, node));
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
