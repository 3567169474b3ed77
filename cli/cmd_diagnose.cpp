// gpuctl diagnose: the cluster's GPU failures, found, explained and ranked (issue 15). The checks,
// the gathering and the schema live in lib/ops/diagnose; this file turns flags into a selection,
// prints the report and picks the exit code.
#include <map>

#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/diagnose/report_formats.hpp"
#include "gpuctl/ops/diagnose/suppress.hpp"
#include "gpuctl/output/table.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "node_changes.hpp"
#include "node_source_flags.hpp"
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
  std::string since = "1h";
  int restart_threshold = 5;
  std::string jobs_older_than = "24h";
  std::string device_plugin_selector;
  std::string suppress_file;
  int gpu_memory_threshold = 90;
  bool no_ssh = false;
  NodeSourceFlags source;
  bool list_checks = false;
  bool no_headers = false;
  std::string output;
  QuarantineFlags quarantine;
};

// diagnose's -o adds two formats no other command has, so they are chosen here rather than in
// the shared OutputFormat (whose switches in every command would otherwise grow two dead cases).
enum class Format { table, json, yaml, junit, prometheus };

Result<Format> parse_format(const std::string& text) {
  if (text == "junit") return Format::junit;
  if (text == "prometheus") return Format::prometheus;
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(text));
  switch (format) {
    case OutputFormat::table: return Format::table;
    case OutputFormat::json: return Format::json;
    case OutputFormat::yaml: return Format::yaml;
    case OutputFormat::wide:
    case OutputFormat::name: break;
  }
  return fail(Errc::invalid_argument, fmt::format("--output: diagnose has no format \"{}\"", text));
}

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
    table.add_row({Cell(std::string(dx::to_string(f.severity)), style_of(f.severity)), f.node.empty() ? "-" : f.node,
                   f.check, dx::object_path(f.object), f.summary});
  }
  out << table.render({headers, color});
  if (!headers) return;
  bool any_failing = false;
  for (const auto& v : report.verdicts) {
    if (!v.layer) continue;
    if (!any_failing) {
      print_line(out, "");
      print_line(out, "GPU nodes, first failing layer:");
    }
    any_failing = true;
    print_line(out, fmt::format("  {}: first failing layer: {} ({})", v.node, dx::to_string(*v.layer), v.summary));
  }
  print_line(out, "");
  print_line(out, "What to run:");
  for (const auto& f : report.findings) {
    for (std::size_t i = 0; i < f.remedy.size(); ++i) {
      std::string head = i == 0 ? fmt::format("{} ({}):", f.node.empty() ? f.object.name : f.node, f.check) : "";
      print_line(out, fmt::format("  {:<40} {}", head, f.remedy[i]));
    }
  }
}

// The suppressed findings, apart from the rest: what was set aside, by which rule's reason.
void print_suppressed(std::ostream& out, const dx::Report& report, const std::string& file) {
  if (report.suppressed.empty()) return;
  print_line(out, fmt::format("{} finding(s) suppressed (--suppress {}):", report.suppressed.size(), file));
  for (const auto& s : report.suppressed) {
    const auto& f = s.finding;
    std::string until = s.until.empty() ? "" : fmt::format(", until {}", s.until);
    print_line(out, fmt::format("  {} {} {}: {} ({}{})", dx::to_string(f.severity), f.check, dx::object_path(f.object),
                                f.summary, s.reason, until));
  }
}

// The flags checked before anything is read.
struct Validated {
  Format format = Format::table;
  std::optional<dx::Severity> fail_on;
  std::vector<const dx::Check*> selected;
  dx::Settings settings;
  NodeSourceRequest source;
};

Result<Validated> validate(const DiagnoseOptions& o) {
  Validated v;
  GPUCTL_TRY_ASSIGN(v.format, parse_format(o.output));
  v.fail_on = dx::parse_severity(o.fail_on);
  GPUCTL_TRY_ASSIGN(v.selected, dx::select_checks({o.only, o.skip}));
  auto since = util::parse_duration(o.since);
  if (!since || since->count() <= 0) {
    return fail(Errc::invalid_argument, "--since: a duration above 0 such as 30m, 1h or 2h30m");
  }
  if (o.restart_threshold < 1) return fail(Errc::invalid_argument, "--restart-threshold: at least 1");
  auto older = util::parse_duration(o.jobs_older_than);
  if (!older || older->count() <= 0) {
    return fail(Errc::invalid_argument, "--jobs-older-than: a duration above 0 such as 24h or 7d");
  }
  v.settings.since = std::chrono::duration_cast<std::chrono::seconds>(*since);
  v.settings.restart_threshold = o.restart_threshold;
  v.settings.jobs_older_than = std::chrono::duration_cast<std::chrono::seconds>(*older);
  v.settings.device_plugin_selector = o.device_plugin_selector;
  if (o.gpu_memory_threshold < 1 || o.gpu_memory_threshold > 100) {
    return fail(Errc::invalid_argument, "--gpu-memory-threshold: a percentage from 1 to 100 (default 90)");
  }
  v.settings.gpu_memory_threshold_percent = o.gpu_memory_threshold;
  GPUCTL_TRY_ASSIGN(v.source, validate_node_source_flags(o.source));
  GPUCTL_TRY(validate_quarantine_flags(o.quarantine, o.no_ssh ? "--no-ssh" : o.list_checks ? "--list-checks" : ""));
  bool for_machines = v.format == Format::junit || v.format == Format::prometheus;
  if (o.list_checks && for_machines) {
    return fail(Errc::invalid_argument,
                fmt::format("-o {} renders a report, not --list-checks; use table, json or yaml", o.output));
  }
  return v;
}

void render(const DiagnoseOptions& o, AppContext& ctx, const dx::Report& report, const dx::Snapshot& snapshot,
            Format format) {
  auto& out = ctx.streams().out;
  switch (format) {
    case Format::json: out << render_structured(dx::to_json(report), OutputFormat::json); return;
    case Format::yaml: out << render_structured(dx::to_json(report), OutputFormat::yaml); return;
    case Format::junit: out << dx::to_junit(report, snapshot.now); return;
    case Format::prometheus: out << dx::to_prometheus(report, snapshot.now); return;
    case Format::table: break;
  }
  std::size_t skipped = 0;  // for a failure; those skipped on request (--no-ssh) are said apart
  std::size_t ran = 0;
  for (const auto& c : report.checks) {
    skipped += c.status == dx::CheckStatus::skipped && !c.by_request;
    ran += c.status != dx::CheckStatus::skipped;
  }
  if (report.findings.empty()) {
    std::string not_run = skipped == 0 ? "" : fmt::format("; {} could not run", skipped);
    ctx.streams().err << fmt::format("No problems found by {} check(s){}.\n", ran, not_run);
  } else {
    print_report(out, report, !o.no_headers, ctx.color());
    if (!o.no_headers && !report.suppressed.empty()) print_line(out, "");
  }
  if (!o.no_headers) print_suppressed(out, report, o.suppress_file);
}

Result<ExitCode> run_diagnose(const DiagnoseOptions& o, AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(Validated v, validate(o));
  if (o.list_checks) {
    if (v.format == Format::json || v.format == Format::yaml) {
      auto format = v.format == Format::json ? OutputFormat::json : OutputFormat::yaml;
      ctx.streams().out << render_structured(dx::checks_to_json(v.selected), format);
    } else {
      print_check_list(ctx.streams().out, v.selected, !o.no_headers);
    }
    return ExitCode::ok;
  }
  // complete: the rules are read before the cluster, so a mistake in them costs no API call
  std::vector<dx::Suppression> rules;
  if (!o.suppress_file.empty()) {
    GPUCTL_TRY_ASSIGN(rules, dx::read_suppressions(o.suppress_file));
  }
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  dx::GatherOptions gather{dx::needed_sources(v.selected),
                           o.selector,
                           o.all_namespaces ? std::string() : ctx.globals().namespace_name,
                           v.settings,
                           {}};
  std::unique_ptr<ops::NodeSource> source;
  if (!o.no_ssh && gather.sources.count(dx::Source::node_probes)) {
    GPUCTL_TRY_ASSIGN(source, make_node_source(v.source, ctx));
    gather.probing.source = source.get();
    gather.probing.disabled_because = "";
  }
  auto& err = ctx.streams().err;
  const bool progress = ctx.streams().err_is_terminal && source;
  if (progress) {
    gather.probing.on_progress = [&err, words = via_words(v.source.via)](std::size_t done, std::size_t total) {
      err << fmt::format("\rreading GPU nodes {}: {}/{}", words, done, total) << std::flush;
    };
  }
  // run
  auto gathered = dx::gather(*client, gather);
  if (progress) err << "\r\033[K" << std::flush;
  GPUCTL_TRY_ASSIGN(dx::Snapshot snapshot, std::move(gathered));
  dx::Report report = dx::run_checks(snapshot, v.selected);
  for (const auto& warning : dx::apply_suppressions(report, snapshot, rules)) ctx.warn(warning);
  // Only what is left after suppression decides the exit code.
  bool found = false;
  bool skipped = false;
  for (const auto& f : report.findings) found = found || (v.fail_on && f.severity >= *v.fail_on);
  std::map<std::string, std::vector<std::string>> by_request;  // why -> check ids
  for (const auto& c : report.checks) {
    if (c.status != dx::CheckStatus::skipped) continue;
    if (c.by_request) {  // asked for (--no-ssh, --via prometheus): said once, and not a reason for exit 5
      by_request[c.skipped_because].push_back(c.id);
      continue;
    }
    skipped = true;
    ctx.warn(fmt::format("check {} skipped: {}", c.id, c.skipped_because));
  }
  for (const auto& [why, ids] : by_request) {
    ctx.warn(fmt::format("{} node-side check(s) skipped ({}): {}", ids.size(), why, fmt::join(ids, ",")));
  }
  render(o, ctx, report, snapshot, v.format);
  // Interrupted while probing: the report above covers what was reached; nodes not reached are
  // not judged (and never called unreachable).
  if (util::cancelled()) return interrupted_exit_code();
  if (o.quarantine.quarantine) {
    return quarantine_nodes(ctx, o.quarantine, snapshot, report, v.format == Format::table,
                            exit_code_for_diagnosis(found, skipped));
  }
  return exit_code_for_diagnosis(found, skipped);
}

}  // namespace

void register_diagnose(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<DiagnoseOptions>();
  auto* cmd = app.add_subcommand("diagnose", "Find the cluster's GPU failures, explain them and say what to run");
  document(*cmd, ctx.help(),
           {R"(Reads what the checks need once (nodes, pods, ...), runs every check over it and prints the
findings worst first, each with its evidence and the commands to run. A list gpuctl may not read
(RBAC) skips only the checks that need it, named on stderr. gpuctl diagnose --list-checks shows
every check.

Node side: the checks that need the node itself (driver-broken, xid-errors, ecc-errors, ...) run
gpuctl's fixed probe over the system ssh on every GPU node, as gpuctl gpus does (same --ssh-*
flags, --fanout at once, each killed at --ssh-timeout): nvidia-smi, the kernel log's NVIDIA lines,
NVLink and Fabric Manager. --no-ssh skips them (listed as skipped, not counted for exit 5).
Without ssh: --via pod runs the same probe in a short-lived pod per node, --via prometheus reads
the DCGM exporter's metrics (the checks metrics cannot answer are skipped by request, with why).

Output: a table (default), -o json|yaml (kind DiagnoseReport), -o junit (one testsuite per check,
one testcase per object, for CI) or -o prometheus (gauges for node_exporter's textfile collector:
gpuctl_diagnose_findings{check,severity,node}, gpuctl_diagnose_check_status{check,status},
gpuctl_diagnose_node_layer_ok{node,layer}, ...; README lists them all).

--suppress FILE: findings not to act on, as a YAML list; each rule names a check (an id or a
glob), an object (Kind/name or Kind/namespace/name, as the OBJECT column prints it) and/or a
node (globs: * and ?), a reason, and optionally until (YYYY-MM-DD, through that day, UTC):
  - check: gpu-unhealthy-devices
    node: gpu-7
    reason: RMA ticket 4711, GPU 3 replaced on Friday
    until: 2026-07-31
Suppressed findings are listed apart and do not count towards the exit code; an expired rule
suppresses nothing and is named on stderr.

Exit codes: 0 nothing at or above --fail-on; 4 something was; 5 nothing was, but some checks
could not run; 1 diagnose could not run at all (cluster unreachable, credentials refused, a
--suppress file it cannot read); 2 bad flags or a bad --suppress file. With --quarantine, after
the report: 3 when the circuit breaker refused (more nodes qualify than --max-quarantine), 2 when
nodes qualify and neither --yes nor --dry-run was given, 1 when a cordon failed.)",
            {{"The whole cluster", "gpuctl diagnose"},
             {"One pool, only the node checks, as JSON for a script",
              "gpuctl diagnose -l pool=a100 --check node-not-ready,gpu-unhealthy-devices -o json"},
             {"What the API shows only, without ssh", "gpuctl diagnose --no-ssh"},
             {"The node side through probe pods instead of ssh", "gpuctl diagnose --via pod"},
             {"The node side too, through a bastion as ubuntu, the kernel logs of the last 6 hours",
              "gpuctl diagnose --ssh-user ubuntu --ssh-option ProxyJump=bastion --since 6h"},
             {"In CI: fail on warnings too, the report as JUnit, known problems set apart",
              "gpuctl diagnose --fail-on warning --suppress known-issues.yaml -o junit > diagnose.xml"},
             {"For node_exporter --collector.textfile.directory=/var/lib/node_exporter (cron, every 5 min): 0, 4 and 5 "
              "all wrote a whole report; the rename makes it appear at once",
              R"(cd /var/lib/node_exporter && { gpuctl diagnose -o prometheus > gpuctl.prom.tmp;
    case $? in 0|4|5) mv gpuctl.prom.tmp gpuctl.prom;; esac; })"}}});
  cmd->fallthrough();
  add_selector_flag(*cmd, ctx.help(), o->selector);
  cmd->add_flag("-A,--all-namespaces", o->all_namespaces, "Workloads of every namespace (the default without -n)");
  // The check ids complete, but are not checked here: run_diagnose names an unknown one.
  std::vector<std::string> ids;
  for (const auto& check : ops::diagnose::checks()) ids.emplace_back(check.id);
  auto* only = cmd->add_option("--check", o->only, "Run only these checks (ID,...)")->delimiter(',');
  ctx.help().values(only, {ValueKind::choice, ids, false});
  auto* skip = cmd->add_option("--skip", o->skip, "Do not run these checks (ID,...)")->delimiter(',');
  ctx.help().values(skip, {ValueKind::choice, ids, false});
  with_choices(
      cmd->add_option("--fail-on", o->fail_on, "Exit 4 when a finding is at least this severe (default error)"),
      ctx.help(), {"critical", "error", "warning", "info", "never"});
  cmd->add_option("--since", o->since, "Events, logs and restarts within this window count (default 1h)");
  cmd->add_option("--restart-threshold", o->restart_threshold,
                  "restart-storm: a GPU pod's container restarted at least this often (default 5)");
  cmd->add_option("--jobs-older-than", o->jobs_older_than,
                  "jobs-not-cleaned: finished GPU Jobs older than this (default 24h)");
  cmd->add_option("--device-plugin-selector", o->device_plugin_selector,
                  "Label selector of the device plugin DaemonSets (default: NVIDIA's and the GPU Operator's names)");
  cmd->add_option("--gpu-memory-threshold", o->gpu_memory_threshold,
                  "gpu-memory-high: a GPU above this percentage of its memory (default 90)");
  cmd->add_flag("--no-ssh", o->no_ssh, "Do not reach the nodes: skip the node-side checks (reported as skipped)");
  add_node_source_flags(*cmd, ctx.help(), o->source);
  cmd->add_flag("--list-checks", o->list_checks, "List the checks and exit");
  cmd->add_flag("--no-headers", o->no_headers, "Print no headers and no remedies (for scripts)");
  completes(cmd->add_option("--suppress", o->suppress_file,
                            "YAML list of findings not to act on: check, object and/or node (globs), reason, until"),
            ctx.help(), ValueKind::file)
      ->type_name("FILE");
  add_output_flag(*cmd, ctx.help(), o->output, {"table", "json", "yaml", "junit", "prometheus"});
  add_quarantine_flags(*cmd, o->quarantine);
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_diagnose(*o, ctx); }; });
}

}  // namespace gpuctl::cli
