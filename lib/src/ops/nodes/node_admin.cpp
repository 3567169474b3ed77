// The node planners: pure functions from a node to the merge patch that makes a taint, label or
// cordon change, with a summary of what it does; node_admin_apply.cpp sends them.
#include "gpuctl/ops/nodes/node_admin.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/strings.hpp"
#include "node_admin_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

using node_admin_detail::invalid;
using util::join;

std::string resource_version_of(const json& object) {
  return kube::string_field(kube::field(object, "metadata"), "resourceVersion");
}

json taint_list_json(const std::vector<kube::Taint>& taints) {
  json list = json::array();
  for (const auto& t : taints) list.push_back(kube::to_json(t));
  return list;
}

}  // namespace

Result<NodeEdit> plan_taints(const json& node, const std::vector<TaintSpec>& specs, bool overwrite,
                             std::string_view time_added) {
  const std::string name = kube::name_of(node);
  const std::vector<kube::Taint> before = kube::node_taints(node);
  std::vector<kube::Taint> after = before;
  std::vector<std::string> done, kept;
  for (const auto& spec : specs) {
    const auto& t = spec.taint;
    if (spec.remove) {
      auto matches = [&](const kube::Taint& x) { return x.key == t.key && (t.effect.empty() || x.effect == t.effect); };
      auto removed = std::erase_if(after, matches);
      std::string what = t.effect.empty() ? t.key : t.key + ":" + t.effect;
      (removed > 0 ? done : kept).push_back(removed > 0 ? "removed " + what : "had no taint " + what);
      continue;
    }
    auto same_slot = std::find_if(after.begin(), after.end(),
                                  [&](const kube::Taint& x) { return x.key == t.key && x.effect == t.effect; });
    kube::Taint added = t;
    if (added.effect == "NoExecute") added.time_added = std::string(time_added);
    if (same_slot == after.end()) {
      after.push_back(added);
      done.push_back("added " + kube::to_string(t));
    } else if (same_slot->value == t.value) {
      kept.push_back("already has " + kube::to_string(t));
    } else if (!overwrite) {
      return fail(
          invalid(fmt::format("node {} already has a taint with key \"{}\" and effect \"{}\" ({}), and "
                              "--overwrite is false: add --overwrite to change its value",
                              name, t.key, t.effect, kube::to_string(*same_slot))));
    } else {
      done.push_back(fmt::format("changed {} to {}", kube::to_string(*same_slot), kube::to_string(t)));
      *same_slot = added;
    }
  }
  NodeEdit edit;
  edit.changed = after != before;
  if (!edit.changed) {
    edit.summary = join(kept, ", ");
    return edit;
  }
  edit.summary = join(done, ", ");
  edit.patch = {{"metadata", {{"resourceVersion", resource_version_of(node)}}},
                {"spec", {{"taints", after.empty() ? json(nullptr) : taint_list_json(after)}}}};
  return edit;
}

Result<NodeEdit> plan_labels(const json& node, const std::vector<LabelSpec>& specs, bool overwrite) {
  const std::string name = kube::name_of(node);
  json labels = json::object();
  std::vector<std::string> done, kept;
  for (const auto& spec : specs) {
    auto current = kube::label_of(node, spec.key);
    if (spec.remove) {
      if (current) {
        labels[spec.key] = nullptr;
        done.push_back("removed " + spec.key);
      } else {
        kept.push_back("had no label " + spec.key);
      }
    } else if (current && *current == spec.value) {
      kept.push_back(fmt::format("already has {}={}", spec.key, spec.value));
    } else if (current && !overwrite) {
      return fail(
          invalid(fmt::format("node {} already has label {}={}, and --overwrite is false: add --overwrite to "
                              "change it",
                              name, spec.key, *current)));
    } else {
      labels[spec.key] = spec.value;
      done.push_back(current ? fmt::format("changed {}={} to {}", spec.key, *current, spec.value)
                             : fmt::format("set {}={}", spec.key, spec.value));
    }
  }
  NodeEdit edit;
  edit.changed = !labels.empty();
  edit.summary = join(edit.changed ? done : kept, ", ");
  if (edit.changed) edit.patch = {{"metadata", {{"resourceVersion", resource_version_of(node)}, {"labels", labels}}}};
  return edit;
}

Result<NodeEdit> plan_cordon(const json& node, const CordonRequest& request) {
  NodeEdit edit;
  const bool unschedulable = kube::node_unschedulable(node);
  const auto reason = kube::annotation_of(node, kCordonReasonAnnotation);
  const auto by = kube::annotation_of(node, kCordonByAnnotation);
  const auto at = kube::annotation_of(node, kCordonAtAnnotation);
  if (request.cordon) {
    if (unschedulable && request.replace_record && !request.reason.empty() && reason != request.reason) {
      // Asked to say why the node stays out (a failed --verify): the new record replaces the old.
      json annotations = {{std::string(kCordonReasonAnnotation), request.reason}};
      if (!request.by.empty()) annotations[std::string(kCordonByAnnotation)] = request.by;
      if (!request.at.empty()) annotations[std::string(kCordonAtAnnotation)] = request.at;
      edit.changed = true;
      edit.summary = reason ? fmt::format("kept cordoned: reason \"{}\" (was \"{}\")", request.reason, *reason)
                            : fmt::format("kept cordoned: reason \"{}\"", request.reason);
      edit.patch = {{"metadata", {{"resourceVersion", resource_version_of(node)}, {"annotations", annotations}}}};
      return edit;
    }
    if (unschedulable) {
      // Someone's record of why the node is out is worth more than ours: keep it.
      edit.summary = reason ? fmt::format("already cordoned: reason \"{}\" by {} at {}", *reason, by.value_or("?"),
                                          at.value_or("?"))
                            : "already cordoned";
      return edit;
    }
    json annotations = json::object();
    if (!request.reason.empty())
      annotations[std::string(kCordonReasonAnnotation)] = request.reason;
    else if (reason)
      annotations[std::string(kCordonReasonAnnotation)] = nullptr;  // a stale record from before
    if (!request.by.empty()) annotations[std::string(kCordonByAnnotation)] = request.by;
    if (!request.at.empty()) annotations[std::string(kCordonAtAnnotation)] = request.at;
    edit.changed = true;
    edit.summary = request.reason.empty() ? "" : fmt::format("reason \"{}\"", request.reason);
    edit.patch = {{"metadata", {{"resourceVersion", resource_version_of(node)}}}, {"spec", {{"unschedulable", true}}}};
    if (!annotations.empty()) edit.patch["metadata"]["annotations"] = annotations;
    return edit;
  }
  if (!unschedulable && !reason && !by && !at) {
    edit.summary = "already uncordoned";
    return edit;
  }
  json annotations = json::object();
  for (auto key : {kCordonReasonAnnotation, kCordonByAnnotation, kCordonAtAnnotation}) {
    if (kube::annotation_of(node, key)) annotations[std::string(key)] = nullptr;
  }
  edit.changed = true;
  edit.summary = reason ? fmt::format("cleared reason \"{}\"", *reason) : "";
  edit.patch = {{"metadata", {{"resourceVersion", resource_version_of(node)}}}};
  if (unschedulable) edit.patch["spec"] = {{"unschedulable", nullptr}};
  if (!annotations.empty()) edit.patch["metadata"]["annotations"] = annotations;
  return edit;
}

}  // namespace gpuctl::ops
