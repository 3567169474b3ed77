#include "gpuctl/ops/nodes/node_admin.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/util/strings.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

using util::join;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?, the shape of names and label values.
bool is_name_shaped(std::string_view s) {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// RFC 1123 subdomain: lower-case labels of [a-z0-9-], alphanumeric at both ends, joined by '.'.
std::string dns_subdomain_problem(std::string_view s) {
  if (s.empty()) return "must not be empty";
  if (s.size() > 253) return fmt::format("must be no more than 253 characters (has {})", s.size());
  std::size_t start = 0;
  while (true) {
    auto dot = s.find('.', start);
    auto label = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    bool ok = !label.empty() && is_lower_alnum(label.front()) && is_lower_alnum(label.back()) &&
              std::all_of(label.begin(), label.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
    if (!ok) {
      return "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
             "alphanumeric character";
    }
    if (dot == std::string_view::npos) return {};
    start = dot + 1;
  }
}

constexpr std::string_view kNameRule =
    "must be 63 characters or less, begin and end with an alphanumeric character ([a-z0-9A-Z]) with dashes (-), "
    "underscores (_), dots (.), and alphanumerics between";

bool is_valid_effect(std::string_view effect) {
  return effect == "NoSchedule" || effect == "PreferNoSchedule" || effect == "NoExecute";
}

Error invalid(std::string message) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = std::move(message);
  return e;
}

std::string resource_version_of(const json& object) {
  return kube::string_field(kube::field(object, "metadata"), "resourceVersion");
}

json taint_list_json(const std::vector<kube::Taint>& taints) {
  json list = json::array();
  for (const auto& t : taints) list.push_back(kube::to_json(t));
  return list;
}

}  // namespace

std::string qualified_name_problem(std::string_view key) {
  if (key.empty()) return "name part must be non-empty";
  std::string_view name = key;
  if (auto slash = key.find('/'); slash != std::string_view::npos) {
    auto prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) return "prefix part must be non-empty";
    if (auto p = dns_subdomain_problem(prefix); !p.empty()) return "prefix part " + p;
    if (name.find('/') != std::string_view::npos) {
      return "a qualified name must consist of an optional DNS subdomain prefix and '/', then a name";
    }
  }
  if (name.empty()) return "name part must be non-empty";
  if (name.size() > 63) return fmt::format("name part must be no more than 63 characters (has {})", name.size());
  if (!is_name_shaped(name)) return "name part " + std::string(kNameRule);
  return {};
}

std::string label_value_problem(std::string_view value) {
  if (value.empty()) return {};
  if (value.size() > 63) return fmt::format("must be no more than 63 characters (has {})", value.size());
  if (!is_name_shaped(value)) {
    return "a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
           "must start and end with an alphanumeric character";
  }
  return {};
}

std::string node_name_problem(std::string_view name) { return dns_subdomain_problem(name); }

bool looks_like_taint_spec(std::string_view text) {
  return text.find(':') != std::string_view::npos || text.find('=') != std::string_view::npos || text.ends_with('-');
}

Result<TaintSpec> parse_taint_spec(std::string_view text) {
  TaintSpec spec;
  std::string_view body = text;
  if (body.ends_with('-')) {
    spec.remove = true;
    body.remove_suffix(1);
  }
  std::string_view key_value = body;
  if (auto colon = body.rfind(':'); colon != std::string_view::npos) {
    key_value = body.substr(0, colon);
    spec.taint.effect = std::string(body.substr(colon + 1));
    if (!is_valid_effect(spec.taint.effect)) {
      return fail(invalid(fmt::format("invalid taint spec \"{}\": effect \"{}\" is not one of NoSchedule, "
                                      "PreferNoSchedule, NoExecute",
                                      text, spec.taint.effect)));
    }
  } else if (!spec.remove) {
    return fail(invalid(fmt::format("invalid taint spec \"{}\": an added taint needs an effect, as in "
                                    "KEY[=VALUE]:NoSchedule|PreferNoSchedule|NoExecute",
                                    text)));
  }
  std::string_view key = key_value;
  if (auto eq = key_value.find('='); eq != std::string_view::npos) {
    key = key_value.substr(0, eq);
    spec.taint.value = std::string(key_value.substr(eq + 1));
  }
  spec.taint.key = std::string(key);
  if (auto p = qualified_name_problem(key); !p.empty()) {
    return fail(invalid(fmt::format("invalid taint spec \"{}\": key \"{}\": {}", text, key, p)));
  }
  if (auto p = label_value_problem(spec.taint.value); !p.empty()) {
    return fail(invalid(fmt::format("invalid taint spec \"{}\": value \"{}\": {}", text, spec.taint.value, p)));
  }
  return spec;
}

bool looks_like_label_spec(std::string_view text) {
  return text.find('=') != std::string_view::npos || text.ends_with('-');
}

Result<LabelSpec> parse_label_spec(std::string_view text) {
  LabelSpec spec;
  if (auto eq = text.find('='); eq != std::string_view::npos) {
    spec.key = std::string(text.substr(0, eq));
    spec.value = std::string(text.substr(eq + 1));
  } else if (text.ends_with('-')) {
    spec.key = std::string(text.substr(0, text.size() - 1));
    spec.remove = true;
  } else {
    return fail(invalid(fmt::format("invalid label spec \"{}\": use KEY=VALUE to set a label or KEY- to remove it", text)));
  }
  if (auto p = qualified_name_problem(spec.key); !p.empty()) {
    return fail(invalid(fmt::format("invalid label spec \"{}\": key \"{}\": {}", text, spec.key, p)));
  }
  if (auto p = label_value_problem(spec.value); !p.empty()) {
    return fail(invalid(fmt::format("invalid label spec \"{}\": value \"{}\": {}", text, spec.value, p)));
  }
  return spec;
}

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
      return fail(invalid(fmt::format("node {} already has a taint with key \"{}\" and effect \"{}\" ({}), and "
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
      return fail(invalid(fmt::format("node {} already has label {}={}, and --overwrite is false: add --overwrite to "
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
    if (unschedulable) {
      // Someone's record of why the node is out is worth more than ours: keep it.
      edit.summary = reason ? fmt::format("already cordoned: reason \"{}\" by {} at {}", *reason, by.value_or("?"),
                                          at.value_or("?"))
                            : "already cordoned";
      return edit;
    }
    json annotations = json::object();
    if (!request.reason.empty()) annotations[std::string(kCordonReasonAnnotation)] = request.reason;
    else if (reason) annotations[std::string(kCordonReasonAnnotation)] = nullptr;  // a stale record from before
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

std::string_view to_string(ChangeOutcome outcome) {
  switch (outcome) {
    case ChangeOutcome::changed: return "changed";
    case ChangeOutcome::unchanged: return "unchanged";
    case ChangeOutcome::failed: return "failed";
  }
  return "failed";
}

namespace {

NodeChange failed_change(std::string node, Error error) {
  NodeChange change;
  change.node = std::move(node);
  change.outcome = ChangeOutcome::failed;
  change.error = std::move(error);
  return change;
}

Result<json> read_node(kube::Client& client, std::string_view name) {
  auto node = client.get(kube::paths::node(name));
  if (!node && node.error().is_not_found()) {
    Error e = node.error();
    e.message = fmt::format("node \"{}\" not found (list them with: gpuctl nodes --all)", name);
    return fail(e);
  }
  return node;
}

}  // namespace

NodeChange apply_node_edit(kube::Client& client, const json& node, const NodePlanner& planner,
                           const ApplyOptions& options) {
  json current = node;
  const std::string name = kube::name_of(node);
  NodeChange change;
  change.node = name;
  change.path = kube::paths::node(name);
  change.content_type = "application/merge-patch+json";
  auto applied = retry_on_conflict(options.max_conflict_retries + 1, change.conflicts, [&](int attempt) -> Result<void> {
    // After a conflict someone else wrote the node since we read it: plan on what is there now.
    if (attempt > 0) {
      GPUCTL_TRY_ASSIGN(current, read_node(client, name));
    }
    GPUCTL_TRY_ASSIGN(NodeEdit edit, planner(current));
    change.summary = edit.summary;
    if (!edit.changed || options.dry_run == DryRun::client) {
      change.outcome = edit.changed ? ChangeOutcome::changed : ChangeOutcome::unchanged;
      if (edit.changed) change.patch = edit.patch;
      change.node_after = current;
      return {};
    }
    change.patch = edit.patch;
    kube::WriteOptions write;
    write.dry_run = options.dry_run == DryRun::server;
    write.field_manager = options.field_manager;
    GPUCTL_TRY_ASSIGN(change.node_after, client.patch(change.path, kube::PatchType::merge, edit.patch, write));
    change.outcome = ChangeOutcome::changed;
    return {};
  });
  if (applied) return change;
  Error e = applied.error();
  if (e.is_conflict()) {
    e.message = fmt::format("node {} kept changing under us ({} conflicts in a row); run the command again", name,
                            change.conflicts + 1);
  }
  return failed_change(name, e);
}

NodeChange apply_node_edit(kube::Client& client, std::string_view node_name, const NodePlanner& planner,
                           const ApplyOptions& options) {
  auto node = read_node(client, node_name);
  if (!node) return failed_change(std::string(node_name), node.error());
  return apply_node_edit(client, *node, planner, options);
}

Result<void> validate_selection(const NodeSelection& selection) {
  int ways = (selection.names.empty() ? 0 : 1) + (selection.label_selector.empty() ? 0 : 1) +
             (selection.all_gpu_nodes ? 1 : 0);
  if (ways == 0) {
    return fail(invalid("no nodes given: name them (NODE...), or select them with -l SELECTOR or --all-gpu-nodes"));
  }
  if (ways > 1) {
    return fail(invalid("choose the nodes one way only: names, -l SELECTOR, or --all-gpu-nodes"));
  }
  for (const auto& name : selection.names) {
    if (auto p = node_name_problem(name); !p.empty()) {
      return fail(invalid(fmt::format("\"{}\" is not a valid node name: {}", name, p)));
    }
  }
  return {};
}

namespace {

// A node gpuctl cannot act on safely: a field of the wrong type, or a name that is not a node
// name (it would reach --exec commands and request paths). Such a node is reported failed.
Error malformed(std::string message) { return fail(Errc::parse, std::move(message)).error(); }

std::optional<NodeChange> unusable_node(const json& node, std::size_t index) {
  std::string name = kube::name_of(node);
  std::string problem = kube::node_shape_problem(node);
  if (problem.empty() && !name.empty()) {
    if (auto bad = kube::paths::dns_subdomain_problem(name); !bad.empty()) {
      problem = fmt::format("the API server returned a node named {:?}, which is not a node name ({})", name, bad);
    }
  }
  if (problem.empty() && name.empty()) problem = "metadata.name is missing";
  if (problem.empty()) return std::nullopt;
  std::string label = name.empty() || !kube::paths::dns_subdomain_problem(name).empty()
                          ? fmt::format("#{}", index + 1) : name;
  return failed_change(label, malformed(fmt::format("node {} skipped: {}", label, problem)));
}

}  // namespace

Result<SelectedNodes> select_nodes(kube::Client& client, const NodeSelection& selection) {
  GPUCTL_TRY(validate_selection(selection));
  SelectedNodes selected;
  if (!selection.names.empty()) {
    std::vector<std::string> seen;
    for (const auto& name : selection.names) {
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      auto node = read_node(client, name);
      if (node && (kube::name_of(*node) != name || !kube::node_shape_problem(*node).empty())) {
        auto bad = unusable_node(*node, seen.size() - 1);
        selected.missing.push_back(bad ? std::move(*bad)
                                       : failed_change(name, malformed(fmt::format("node {} skipped: the API server answered "
                                                                                   "with node {:?}", name, kube::name_of(*node)))));
      } else if (node) {
        selected.nodes.push_back(std::move(*node));
      } else if (node.error().is_not_found()) {
        selected.missing.push_back(failed_change(name, node.error()));
      } else {
        return fail(node.error().with_context("reading node " + name));  // 403, unreachable: same for every node
      }
    }
    return selected;
  }
  kube::ListOptions options;
  options.label_selector = selection.label_selector;
  GPUCTL_TRY_ASSIGN(kube::ListResult list, client.list(kube::paths::nodes(), options));
  for (std::size_t i = 0; i < list.items.size(); ++i) {
    json& node = list.items[i];
    if (auto bad = unusable_node(node, i)) {
      selected.missing.push_back(std::move(*bad));
      continue;
    }
    if (selection.all_gpu_nodes && !is_gpu_node(node)) continue;
    selected.nodes.push_back(std::move(node));
  }
  if (selected.nodes.empty() && selected.missing.empty()) {
    Error e;
    e.code = Errc::api;
    e.message = selection.all_gpu_nodes
                    ? std::string("no GPU nodes in the cluster (check with: gpuctl nodes --all)")
                    : fmt::format("no nodes match -l {} (check with: gpuctl nodes --all -l {})", selection.label_selector,
                                  selection.label_selector);
    return fail(e);
  }
  return selected;
}

json to_json(const std::vector<NodeChange>& changes, std::string_view operation, DryRun dry_run) {
  json items = json::array();
  for (const auto& c : changes) {
    items.push_back({{"name", c.node},
                     {"result", to_string(c.outcome)},
                     {"summary", c.summary},
                     {"patch", c.patch},
                     {"conflicts", c.conflicts},
                     {"error", c.error ? json(c.error->message) : json(nullptr)}});
  }
  std::string_view mode = dry_run == DryRun::client ? "client" : dry_run == DryRun::server ? "server" : "none";
  return schema_document("NodeChangeList", {{"operation", operation},
          {"dryRun", mode},
          {"items", items}});
}

}  // namespace gpuctl::ops
