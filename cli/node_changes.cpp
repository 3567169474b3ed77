#include "node_changes.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "output_format.hpp"

namespace gpuctl::cli {

void add_node_change_flags(CLI::App& cmd, NodeChangeFlags& flags) {
  add_selector_flag(cmd, flags.selector);
  cmd.add_flag(
      "--all-gpu-nodes", flags.all_gpu_nodes,
      "Every GPU node, as 'gpuctl nodes' lists them (nodes with nvidia.com/* resources or a GPU product label)");
  add_dry_run_flag(cmd, flags.dry_run);
  add_output_flag(cmd, flags.output, {"text", "json", "yaml", "name"});
}

Result<NodeChangeRequest> validate_node_change_flags(const NodeChangeFlags& flags, std::vector<std::string> names) {
  NodeChangeRequest request;
  request.selection.names = std::move(names);
  request.selection.label_selector = flags.selector;
  request.selection.all_gpu_nodes = flags.all_gpu_nodes;
  GPUCTL_TRY(ops::validate_selection(request.selection));
  GPUCTL_TRY_ASSIGN(DryRun dry_run, parse_dry_run(flags.dry_run));
  request.dry_run = dry_run;
  request.output = flags.output;
  return request;
}

Result<NamesAndSpecs> split_names_and_specs(const std::vector<std::string>& args, bool (*is_spec)(std::string_view),
                                            std::string_view what) {
  NamesAndSpecs split;
  for (const auto& arg : args) {
    if (is_spec(arg)) {
      split.specs.push_back(arg);
    } else if (!split.specs.empty()) {
      return fail(Errc::invalid_argument,
                  fmt::format("\"{}\" comes after a {} change: name every node before the first change, as in "
                              "NODE... {}",
                              arg, what, what == "taint" ? "KEY[=VALUE]:EFFECT" : "KEY=VALUE"));
    } else {
      split.names.push_back(arg);
    }
  }
  if (split.specs.empty()) {
    return fail(Errc::invalid_argument, fmt::format("no {} change given: add one such as {}", what,
                                                    what == "taint" ? "dedicated=ml:NoSchedule (or KEY- to remove)"
                                                                    : "accelerator=a100 (or KEY- to remove)"));
  }
  return split;
}

ExitCode apply_and_report(AppContext& ctx, kube::Client& client, ops::SelectedNodes selected,
                          const ops::NodePlanner& planner, std::string_view operation, std::string_view verb,
                          const NodeChangeRequest& request) {
  ops::ApplyOptions apply;
  apply.dry_run = request.dry_run;
  std::vector<ops::NodeChange> changes;
  for (const auto& node : selected.nodes) changes.push_back(ops::apply_node_edit(client, node, planner, apply));
  for (auto& m : selected.missing) changes.push_back(std::move(m));
  return report_node_changes(ctx, changes, operation, verb, request);
}

ExitCode report_node_changes(AppContext& ctx, const std::vector<ops::NodeChange>& changes, std::string_view operation,
                             std::string_view verb, const NodeChangeRequest& request) {
  auto& out = ctx.streams().out;
  auto& err = ctx.streams().err;
  std::vector<std::string> failed;
  for (const auto& c : changes) {
    if (c.outcome == ops::ChangeOutcome::failed) {
      failed.push_back(c.node);
      print_line(err, fmt::format("error: node/{}: {}", c.node, c.error ? c.error->message : "failed"));
    }
  }
  if (request.output == "json" || request.output == "yaml") {
    out << render_structured(ops::to_json(changes, operation, request.dry_run),
                             request.output == "json" ? OutputFormat::json : OutputFormat::yaml);
  } else {
    std::string_view suffix = dry_run_suffix(request.dry_run);
    for (const auto& c : changes) {
      if (c.outcome == ops::ChangeOutcome::failed) continue;
      if (request.output == "name") {
        print_line(out, "node/" + c.node);
        continue;
      }
      std::string summary = c.summary.empty() ? "" : ": " + c.summary;
      if (c.outcome == ops::ChangeOutcome::unchanged) {
        print_line(out, fmt::format("node/{} unchanged{}", c.node, summary));
      } else {
        print_line(out, fmt::format("node/{} {}{}{}", c.node, verb, summary, suffix));
        if (request.dry_run == ops::DryRun::client) {
          print_line(out, fmt::format("  PATCH {} ({}) {}", c.path, c.content_type, c.patch.dump()));
        }
      }
    }
  }
  if (failed.empty()) return ExitCode::ok;
  if (changes.size() > 1) {  // for one node, its own error line says it all
    print_line(
        err, fmt::format("error: {} of {} node(s) failed: {}", failed.size(), changes.size(), fmt::join(failed, ", ")));
  }
  // Refusals of the request itself (an existing value without --overwrite) are usage errors;
  // anything the cluster refused or could not do makes it a failure.
  bool only_refusals = std::all_of(changes.begin(), changes.end(), [](const ops::NodeChange& c) {
    return c.outcome != ops::ChangeOutcome::failed || (c.error && c.error->code == Errc::invalid_argument);
  });
  return only_refusals ? ExitCode::usage : ExitCode::failure;
}

}  // namespace gpuctl::cli
