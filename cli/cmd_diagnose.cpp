// gpuctl diagnose: the cluster's GPU failures, found, explained and ranked (issue 15). The checks,
// the gathering and the schema live in lib/ops/diagnose; this file turns flags into a selection,
// prints the report and picks the exit code.
#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/output/table.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

namespace dx = ops::diagnose;
using output::Cell;
using output::Style;

struct DiagnoseOptions {
  std::string selector;
  bool all_namespaces = false;
  std::vector<std::string> only;
  std::vector<std::string> skip;
  std::string fail_on = "error";
  bool list_checks = false;
  bool no_headers = false;
  std::string output;
};

Style style_of(dx::Severity s) {
  switch (s) {
    case dx::Severity::critical:
    case dx::Severity::error: return Style::bad;
    case dx::Severity::warning: return Style::warn;
    case dx::Severity::info: return Style::dim;
  }
  return Style::plain;
}

void print_check_list(std::ostream& out, const std::vector<const dx::Check*>& listed, bool headers) {
  output::Table table({"ID", "LAYER", "SEVERITY", "NEEDS", "TITLE"});
  for (const auto* c : listed) {
    std::vector<std::string> needs;
    for (auto s : c->needs) needs.emplace_back(dx::to_string(s));
    table.add_row({std::string(c->id), std::string(dx::to_string(c->layer)), std::string(dx::to_string(c->severity)),
                   fmt::format("{}", fmt::join(needs, ",")), std::string(c->title)});
  }
  out << table.render({headers, false});
}

// The findings, worst first, then what to run for each.
void print_report(std::ostream& out, const dx::Report& report, bool headers, bool color) {
  output::Table table({"SEVERITY", "NODE", "CHECK", "OBJECT", "SUMMARY"});
  for (const auto& f : report.findings) {
    std::string object = f.object.namespace_name.empty()
                             ? fmt::format("{}/{}", f.object.kind, f.object.name)
                             : fmt::format("{}/{}/{}", f.object.kind, f.object.namespace_name, f.object.name);
    table.add_row({Cell(std::string(dx::to_string(f.severity)), style_of(f.severity)), f.node.empty() ? "-" : f.node,
                   f.check, object, f.summary});
  }
  out << table.render({headers, color});
  if (!headers) return;
  print_line(out, "");
  print_line(out, "What to run:");
  for (const auto& f : report.findings) {
    for (std::size_t i = 0; i < f.remedy.size(); ++i) {
      std::string head = i == 0 ? fmt::format("{} ({}):", f.node.empty() ? f.object.name : f.node, f.check) : "";
      print_line(out, fmt::format("  {:<40} {}", head, f.remedy[i]));
    }
  }
}

Result<ExitCode> run_diagnose(const DiagnoseOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(o.output));
  std::optional<dx::Severity> fail_on = dx::parse_severity(o.fail_on);
  GPUCTL_TRY_ASSIGN(std::vector<const dx::Check*> selected, dx::select_checks({o.only, o.skip}));
  auto& out = ctx.streams().out;
  if (o.list_checks) {
    if (format == OutputFormat::json || format == OutputFormat::yaml) {
      out << render_structured(dx::checks_to_json(selected), format);
    } else {
      print_check_list(out, selected, !o.no_headers);
    }
    return ExitCode::ok;
  }
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  dx::GatherOptions gather{dx::needed_sources(selected), o.selector,
                           o.all_namespaces ? std::string() : ctx.globals().namespace_name};
  // run
  GPUCTL_TRY_ASSIGN(dx::Snapshot snapshot, dx::gather(*client, gather));
  dx::Report report = dx::run_checks(snapshot, selected);
  bool found = false;
  std::size_t skipped = 0;
  for (const auto& f : report.findings) found = found || (fail_on && f.severity >= *fail_on);
  for (const auto& c : report.checks) {
    if (c.status != dx::CheckStatus::skipped) continue;
    ++skipped;
    ctx.warn(fmt::format("check {} skipped: {}", c.id, c.skipped_because));
  }
  if (format == OutputFormat::json || format == OutputFormat::yaml) {
    out << render_structured(dx::to_json(report), format);
  } else if (report.findings.empty()) {
    std::string not_run = skipped == 0 ? "" : fmt::format("; {} could not run", skipped);
    ctx.streams().err << fmt::format("No problems found by {} check(s){}.\n", report.checks.size() - skipped, not_run);
  } else {
    print_report(out, report, !o.no_headers, ctx.color());
  }
  return exit_code_for_diagnosis(found, skipped > 0);
}

}  // namespace

void register_diagnose(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<DiagnoseOptions>();
  auto* cmd = app.add_subcommand("diagnose", "Find the cluster's GPU failures, explain them and say what to run");
  cmd->footer(R"(Reads what the checks need once (nodes, pods, ...), runs every check over it and prints the
findings worst first, each with its evidence and the commands to run. A list gpuctl may not read
(RBAC) skips only the checks that need it, named on stderr. gpuctl diagnose --list-checks shows
every check. This release has the checks that read a node's status; the others of issue 15 follow.

Exit codes: 0 nothing at or above --fail-on; 4 something was; 5 nothing was, but some checks
could not run; 1 diagnose could not run at all (cluster unreachable, credentials refused).

Examples:
  # The whole cluster
  gpuctl diagnose

  # One pool, only the node checks, as JSON for a script
  gpuctl diagnose -l pool=a100 --check node-not-ready,gpu-unhealthy-devices -o json

  # In CI: fail on warnings too
  gpuctl diagnose --fail-on warning)");
  cmd->fallthrough();
  add_selector_flag(*cmd, o->selector);
  cmd->add_flag("-A,--all-namespaces", o->all_namespaces, "Workloads of every namespace (the default without -n)");
  cmd->add_option("--check", o->only, "Run only these checks (ID,...)")->delimiter(',');
  cmd->add_option("--skip", o->skip, "Do not run these checks (ID,...)")->delimiter(',');
  cmd->add_option("--fail-on", o->fail_on, "Exit 4 when a finding is at least this severe (default error)")
      ->check(CLI::IsMember({"critical", "error", "warning", "info", "never"}));
  cmd->add_flag("--list-checks", o->list_checks, "List the checks and exit");
  cmd->add_flag("--no-headers", o->no_headers, "Print no headers and no remedies (for scripts)");
  add_output_flag(*cmd, o->output, {"table", "json", "yaml"});
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_diagnose(*o, ctx); }; });
}

}  // namespace gpuctl::cli
