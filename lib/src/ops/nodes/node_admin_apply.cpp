// Sending node edits (read, plan, patch with the resourceVersion, again on 409) and choosing
// the nodes a command acts on (names, -l SELECTOR, --all-gpu-nodes), with the nodes gpuctl cannot
// act on safely named as failed.
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/common/conflict_retry.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "node_admin_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

std::string_view to_string(ChangeOutcome outcome) {
  switch (outcome) {
    case ChangeOutcome::changed: return "changed";
    case ChangeOutcome::unchanged: return "unchanged";
    case ChangeOutcome::failed: return "failed";
  }
  return "failed";
}

namespace {

using node_admin_detail::invalid;

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
  auto applied =
      retry_on_conflict(options.max_conflict_retries + 1, change.conflicts, [&](int attempt) -> Result<void> {
        // After a conflict someone else wrote the node since we read it: plan on what is there now.
        if (attempt > 0) {
          GPUCTL_TRY_ASSIGN(current, read_node(client, name));
        }
        GPUCTL_TRY_ASSIGN(NodeEdit edit, planner(current));
        change.summary = edit.summary;
        if (!edit.changed) {
          change.outcome = ChangeOutcome::unchanged;
          change.node_after = current;
          return {};
        }
        change.patch = edit.patch;
        if (options.dry_run == DryRun::client) {
          change.outcome = ChangeOutcome::changed;
          change.node_after = current;
          return {};
        }
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
  std::string label =
      name.empty() || !kube::paths::dns_subdomain_problem(name).empty() ? fmt::format("#{}", index + 1) : name;
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
        selected.missing.push_back(
            bad ? std::move(*bad)
                : failed_change(name, malformed(fmt::format("node {} skipped: the API server answered "
                                                            "with node {:?}",
                                                            name, kube::name_of(*node)))));
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
    e.message = selection.all_gpu_nodes ? std::string("no GPU nodes in the cluster (check with: gpuctl nodes --all)")
                                        : fmt::format("no nodes match -l {} (check with: gpuctl nodes --all -l {})",
                                                      selection.label_selector, selection.label_selector);
    return fail(e);
  }
  return selected;
}

}  // namespace gpuctl::ops
