#include "node_changes.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/output/table.hpp"
#include "gpuctl/util/time.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {

void add_node_change_flags(CLI::App& cmd, HelpData& help, NodeChangeFlags& flags) {
  add_selector_flag(cmd, help, flags.selector);
  cmd.add_flag(
      "--all-gpu-nodes", flags.all_gpu_nodes,
      "Every GPU node, as 'gpuctl nodes' lists them (nodes with nvidia.com/* resources or a GPU product label)");
  add_dry_run_flag(cmd, help, flags.dry_run);
  add_output_flag(cmd, help, flags.output, {"text", "json", "yaml", "name"});
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

std::string ssh_flag_given(const CLI::App& cmd) {
  for (const CLI::Option* option : cmd.get_options()) {
    if (option->get_group() == "SSH options" && option->count() > 0) return option->get_name();
  }
  return "";
}

Verifier::Verifier(AppContext& ctx, const SshRequest& ssh) : runner_(ctx.ssh_runner(ssh.settings)) {
  options_.runner = runner_.get();
  options_.address_rule = ssh.address_rule;
  options_.probe = ssh.probe;
}

std::vector<ops::NodeVerification> Verifier::operator()(const std::vector<nlohmann::json>& nodes) const {
  return ops::diagnose::verify_nodes(nodes, options_);
}

void add_quarantine_flags(CLI::App& cmd, QuarantineFlags& f) {
  cmd.add_flag("--quarantine", f.quarantine,
               "After the report, cordon the GPU nodes with critical node-side findings (needs --yes or --dry-run)");
  cmd.add_flag("--yes", f.yes, "--quarantine: cordon them (without it, only the plan is printed)");
  cmd.add_flag("--dry-run", f.dry_run, "--quarantine: print the plan only");
  f.max_opt = cmd.add_option("--max-quarantine", f.max,
                             "--quarantine: cordon none when more than this many nodes (N, or a percentage of the "
                             "GPU nodes such as 10%) qualify")
                  ->default_str("10%");
}

Result<void> validate_quarantine_flags(const QuarantineFlags& f, std::string_view excluded) {
  if (!f.quarantine) {
    const char* given = f.yes ? "--yes" : f.dry_run ? "--dry-run" : f.max_opt->count() > 0 ? "--max-quarantine" : "";
    if (*given != '\0') return fail(Errc::invalid_argument, fmt::format("{} only applies to --quarantine", given));
    return {};
  }
  if (f.yes && f.dry_run) {
    return fail(Errc::invalid_argument, "--yes and --dry-run: choose one (--dry-run prints the plan, --yes acts)");
  }
  if (!excluded.empty()) {
    return fail(
        Errc::invalid_argument,
        fmt::format("--quarantine acts on the node-side findings of a report: it does not go with {}", excluded));
  }
  GPUCTL_TRY(ops::diagnose::parse_quarantine_limit(f.max));
  return {};
}

namespace {

void print_quarantine_plan(std::ostream& os, const ops::diagnose::QuarantinePlan& plan, std::string_view max,
                           bool color) {
  std::size_t found = plan.cordon.size() + plan.already_cordoned.size();
  print_line(os, "");
  print_line(os, fmt::format("Quarantine: {} GPU node(s) with critical node-side findings; at most {} may be "
                             "cordoned (--max-quarantine {} of {} GPU nodes)",
                             found, plan.limit, max, plan.gpu_nodes));
  output::Table t({"NODE", "ACTION", "REASON"});
  for (const auto& q : plan.cordon) t.add_row({q.node, "cordon", q.reason});
  for (const auto& q : plan.already_cordoned) {
    std::string kept = q.cordon_reason.empty() ? "" : fmt::format(" (its record: \"{}\")", q.cordon_reason);
    t.add_row({q.node, output::Cell("already cordoned", output::Style::dim), q.reason + kept});
  }
  os << t.render({true, color});
}

std::vector<std::string> names_of(const std::vector<ops::diagnose::QuarantineTarget>& targets) {
  std::vector<std::string> names;
  for (const auto& q : targets) names.push_back(q.node);
  return names;
}

}  // namespace

Result<ExitCode> quarantine_nodes(AppContext& ctx, const QuarantineFlags& flags,
                                  const ops::diagnose::Snapshot& snapshot, const ops::diagnose::Report& report,
                                  bool on_stdout, ExitCode diagnosis) {
  namespace dx = ops::diagnose;
  GPUCTL_TRY_ASSIGN(dx::QuarantineLimit limit, dx::parse_quarantine_limit(flags.max));
  const dx::QuarantinePlan plan = dx::plan_quarantine(snapshot, report.findings, limit);
  std::ostream& os = on_stdout ? ctx.streams().out : ctx.streams().err;
  auto& err = ctx.streams().err;
  if (plan.cordon.empty() && plan.already_cordoned.empty()) {
    print_line(os, "");
    print_line(os, "Quarantine: no GPU node has a critical node-side finding; nothing to cordon.");
    return diagnosis;
  }
  print_quarantine_plan(os, plan, flags.max, on_stdout && ctx.color());
  if (plan.tripped) {
    print_line(err, fmt::format("error: quarantine refused by the circuit breaker: {} GPU node(s) qualify, more than "
                                "--max-quarantine {} allows ({} of {} GPU nodes); no node was cordoned. So many at "
                                "once is likelier a fleet-wide false alarm or a shared cause (a driver rollout, the "
                                "probe itself) than broken nodes: check the findings, then cordon by hand or raise "
                                "--max-quarantine",
                                plan.cordon.size(), flags.max, plan.limit, plan.gpu_nodes));
    return ExitCode::refused;
  }
  if (plan.cordon.empty()) {
    print_line(os, "Quarantine: nothing to cordon, every node found is cordoned already.");
    return diagnosis;
  }
  if (flags.dry_run) {
    err << "Dry run: nothing was changed.\n";
    return diagnosis;
  }
  if (!flags.yes) {
    print_line(err, fmt::format("error: quarantine needs --yes to cordon {} node(s): {} (--dry-run only prints the "
                                "plan)",
                                plan.cordon.size(), fmt::join(names_of(plan.cordon), ", ")));
    return ExitCode::usage;
  }
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  ops::CordonRequest record;
  GPUCTL_TRY_ASSIGN(record.by, client->whoami());
  record.at = util::format_rfc3339(std::chrono::system_clock::now());
  std::vector<std::string> failed;
  for (const auto& c : dx::apply_quarantine(*client, plan, record, {})) {
    if (c.outcome == ops::ChangeOutcome::failed) {
      failed.push_back(c.node);
      print_line(err, fmt::format("error: node/{}: {}", c.node, c.error ? c.error->message : "failed"));
    } else {
      bool changed = c.outcome == ops::ChangeOutcome::changed;
      print_line(os, fmt::format("node/{} {}: {}", c.node, changed ? "cordoned" : "unchanged", c.summary));
    }
  }
  if (failed.empty()) return diagnosis;
  print_line(err, fmt::format("error: quarantine: {} of {} node(s) could not be cordoned: {}", failed.size(),
                              plan.cordon.size(), fmt::join(failed, ", ")));
  return ExitCode::failure;
}

}  // namespace gpuctl::cli
