// gpuctl jobs: GPU jobs with status, GPUs, nodes, age, duration and why they pend or failed;
// gpuctl jobs clean: finished jobs deleted together with their pods.
#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/jobs/jobs.hpp"
#include "gpuctl/output/table.hpp"
#include "gpuctl/util/time.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {

using json = nlohmann::json;
namespace {

using output::Cell;
using output::Style;

struct JobsOptions {
  std::vector<std::string> names;
  bool all_namespaces = false;
  std::string selector;
  bool all = false;
  bool no_headers = false;
  std::string output;
};

struct JobsCleanOptions {
  bool all_namespaces = false;
  std::string selector;
  bool all = false;
  std::string older_than = "0";
  std::string dry_run;
};

Style phase_style(ops::JobPhase phase) {
  switch (phase) {
    case ops::JobPhase::succeeded: return Style::good;
    case ops::JobPhase::failed: return Style::bad;
    case ops::JobPhase::pending:
    case ops::JobPhase::suspended: return Style::warn;
    case ops::JobPhase::running: return Style::plain;
  }
  return Style::plain;
}

std::string nodes_text(const std::vector<std::string>& nodes, bool wide) {
  if (nodes.empty()) return "<none>";
  if (!wide && nodes.size() > 2) {
    return fmt::format("{},+{}", fmt::join(nodes.begin(), nodes.begin() + 2, ","), nodes.size() - 2);
  }
  return fmt::format("{}", fmt::join(nodes, ","));
}

std::string seconds_text(std::int64_t s) { return util::human_duration(std::chrono::seconds(s)); }

// FAILED-ON: each failed attempt's node, oldest first, with its GPU cause when one was found
// ("gpu-3(cuda-oom),gpu-7").
std::string failed_on_text(const ops::JobSummary& j) {
  if (j.failed_nodes.empty()) return "-";
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < j.failed_nodes.size(); ++i) {
    const auto* attempt = i < j.failed_attempts.size() ? &j.failed_attempts[i] : nullptr;
    bool caused = attempt != nullptr && attempt->gpu_cause;
    parts.push_back(caused ? fmt::format("{}({})", j.failed_nodes[i], attempt->gpu_cause->cause.id)
                           : j.failed_nodes[i]);
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

std::string jobs_table(const ops::JobList& list, bool wide, bool with_namespace, bool headers, bool color) {
  std::vector<std::string> columns;
  if (with_namespace) columns.emplace_back("NAMESPACE");
  for (auto h : {"NAME", "STATUS", "GPUS", "NODES", "AGE", "DURATION"}) columns.emplace_back(h);
  if (wide) {
    for (auto h : {"GPUS/POD", "ACTIVE", "SUCCEEDED", "FAILED", "FAILED-ON", "EXIT-CODE"}) columns.emplace_back(h);
  }
  columns.emplace_back("REASON");
  output::Table table(columns);
  for (const auto& j : list.jobs) {
    std::vector<Cell> row;
    if (with_namespace) row.emplace_back(j.namespace_name);
    row.emplace_back(j.name);
    row.emplace_back(std::string(ops::to_string(j.phase)), phase_style(j.phase));
    row.emplace_back(std::to_string(j.gpus));
    row.emplace_back(nodes_text(j.nodes, wide));
    row.emplace_back(seconds_text(j.age_seconds));
    row.emplace_back(j.duration_seconds ? seconds_text(*j.duration_seconds) : "-");
    if (wide) {
      row.emplace_back(std::to_string(j.gpus_per_pod));
      row.emplace_back(std::to_string(j.active));
      row.emplace_back(std::to_string(j.succeeded));
      row.emplace_back(std::to_string(j.failed));
      row.emplace_back(failed_on_text(j));
      row.emplace_back(j.failure && j.failure->exit_code ? std::to_string(*j.failure->exit_code) : "-");
    }
    row.emplace_back(j.reason.empty() ? "-" : j.reason);
    table.add_row(std::move(row));
  }
  return table.render({headers, color});
}

Result<ExitCode> run_jobs(const JobsOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(o.output));
  for (const auto& name : o.names) {
    if (auto problem = kube::paths::dns_subdomain_problem(name); !problem.empty()) {
      return fail(Errc::invalid_argument, fmt::format("job name \"{}\": {}", name, problem));
    }
  }
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  ops::JobListOptions options;
  options.all_namespaces = o.all_namespaces;
  if (!o.all_namespaces) {
    GPUCTL_TRY_ASSIGN(options.namespace_name, ctx.namespace_name());
  }
  options.label_selector = o.selector;
  options.include_non_gpu_jobs = o.all;
  options.names = o.names;
  // run
  GPUCTL_TRY_ASSIGN(ops::JobList list, ops::collect_jobs(*client, options, std::chrono::system_clock::now()));
  for (const auto& skipped : list.skipped) ctx.warn(skipped);
  auto& out = ctx.streams().out;
  switch (format) {
    case OutputFormat::json:
    case OutputFormat::yaml: out << render_structured(ops::to_json(list), format); break;
    case OutputFormat::name:
      for (const auto& j : list.jobs) print_line(out, "job/" + j.name);
      break;
    case OutputFormat::table:
    case OutputFormat::wide:
      if (list.jobs.empty() && o.names.empty()) {
        ctx.streams().err << (o.all ? "No jobs found" : "No GPU jobs found")
                          << (o.all_namespaces ? std::string() : " in namespace " + options.namespace_name)
                          << (o.selector.empty() ? "" : " matching -l " + o.selector)
                          << (o.all ? "" : " (use --all to list every job)") << ".\n";
        break;
      }
      out << jobs_table(list, format == OutputFormat::wide, o.all_namespaces, !o.no_headers, ctx.color());
      break;
  }
  // As kubectl get NAME...: the jobs found are listed, then each one missing is an error.
  const std::string where = o.all_namespaces ? "any namespace" : "namespace " + options.namespace_name;
  for (const auto& name : list.not_found)
    print_line(ctx.streams().err, fmt::format("error: job {} not found in {}", name, where));
  return list.skipped.empty() && list.not_found.empty() ? ExitCode::ok : ExitCode::failure;
}

Result<ExitCode> run_jobs_clean(const JobsCleanOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(DryRun dry_run, parse_dry_run(o.dry_run));
  auto older = util::parse_duration(o.older_than);
  if (!older) return fail(Errc::invalid_argument, "--older-than: " + older.error().message);
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  ops::JobListOptions scope;
  scope.all_namespaces = o.all_namespaces;
  if (!o.all_namespaces) {
    GPUCTL_TRY_ASSIGN(scope.namespace_name, ctx.namespace_name());
  }
  scope.label_selector = o.selector;
  scope.include_non_gpu_jobs = o.all;
  // run
  GPUCTL_TRY_ASSIGN(ops::CleanPlan plan,
                    ops::collect_clean_plan(*client, scope, *older, std::chrono::system_clock::now()));
  auto& out = ctx.streams().out;
  auto& err = ctx.streams().err;
  for (const auto& skipped : plan.skipped) ctx.warn(skipped + "; not deleted");
  const ExitCode done = plan.skipped.empty() ? ExitCode::ok : ExitCode::failure;
  auto id = [](const ops::CleanTarget& t) { return fmt::format("job {}/{}", t.namespace_name, t.name); };
  std::string kept = plan.keep.empty() ? "" : fmt::format(", {} kept (not finished or too recent)", plan.keep.size());
  if (plan.remove.empty()) {
    err << fmt::format("No finished {}jobs to delete{}{}.\n", o.all ? "" : "GPU ",
                       o.all_namespaces ? std::string() : " in namespace " + scope.namespace_name, kept);
    return done;
  }
  if (dry_run == DryRun::client) {
    for (const auto& t : plan.remove)
      print_line(out, fmt::format("{} would be deleted with its pods: {} (dry run)", id(t), t.reason));
    for (const auto& t : plan.keep) print_line(out, fmt::format("{} kept: {}", id(t), t.reason));
    out << fmt::format("{} finished {} would be deleted (dry run){}.\n", plan.remove.size(),
                       plan.remove.size() == 1 ? "job" : "jobs", kept);
    return done;
  }
  kube::WriteOptions write;
  write.dry_run = dry_run == DryRun::server;
  const char* suffix = write.dry_run ? " (server dry run)" : "";
  auto result = ops::delete_jobs(*client, plan.remove, write, [&](const ops::CleanOutcome& c) {
    if (c.deleted) {
      print_line(out, fmt::format("{} deleted with its pods: {}{}", id(c.target), c.target.reason, suffix));
    } else if (c.already_gone) {
      print_line(out, fmt::format("{} already gone", id(c.target)));
    } else {
      print_line(err, "error: " + c.error);
    }
    out.flush();
  });
  out << fmt::format("{} finished {} deleted{}{}{}.\n", result.deleted, result.deleted == 1 ? "job" : "jobs", suffix,
                     result.gone > 0 ? fmt::format(", {} already gone", result.gone) : "", kept);
  if (result.failed > 0) {
    std::vector<std::string> names;
    for (const auto& c : result.outcomes) {
      if (!c.deleted && !c.already_gone) names.push_back(c.target.namespace_name + "/" + c.target.name);
    }
    print_line(err, fmt::format("error: {} {} could not be deleted: {}", result.failed,
                                result.failed == 1 ? "job" : "jobs", fmt::join(names, ", ")));
    return ExitCode::failure;
  }
  return done;
}

}  // namespace

void register_jobs(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<JobsOptions>();
  auto* cmd =
      app.add_subcommand("jobs", "List GPU jobs: status, GPUs, nodes, age, duration, and why they pend or failed");
  document(
      *cmd, ctx.help(),
      {R"(GPU jobs are batch/v1 Jobs whose pod template requests an nvidia.com/* resource (--all lists
every Job). STATUS comes from the Job's conditions: Pending (no pod running yet), Running,
Succeeded, Failed, Suspended. GPUS is what the job asks for at once (GPUs per pod x parallelism).
REASON says in plain words why a job pends (the scheduler's verdict from its pods' PodScheduled
condition, a quota that refused its pods, suspension) or why it failed (the Failed condition, the
exit code of the failed container and the GPU cause its termination message or, failing that, the
last lines of its log name: CUDA out of memory, NCCL errors, NVML errors, Xid). That costs one log
read per failed GPU job; -o wide's FAILED-ON gives each failed attempt's node with its cause.)",
       {{"GPU jobs in the current namespace", "gpuctl jobs"},
        {"Two jobs by name, whatever they request, with why they pend or failed", "gpuctl jobs -n ml bert-large smoke"},
        {"Every namespace, with per-pod GPUs, pod counts and exit codes", "gpuctl jobs -A -o wide"},
        {"Each failed attempt's node and GPU cause (where it was found and the line that named it)",
         R"(gpuctl jobs -n ml train -o json | jq '.items[].failedAttempts[] | [.node, .gpuCause.id, .gpuCause.evidence]')"},
        {"The stable JSON schema (kind GPUJobList) for scripts",
         R"(gpuctl jobs -n team-a -o json | jq '.items[] | select(.status == "Failed") | .failure.exitCode')"},
        {"Delete finished jobs (and their pods) that finished more than a day ago",
         "gpuctl jobs clean -n team-a --older-than 24h"}}});
  cmd->fallthrough();  // -n and the other global flags also after 'jobs clean'
  completes(cmd->add_option("names", o->names, "NAME... (default: every GPU job)"), ctx.help(), ValueKind::job);
  cmd->add_flag("-A,--all-namespaces", o->all_namespaces, "List jobs in every namespace");
  add_selector_flag(*cmd, ctx.help(), o->selector, "jobs");
  cmd->add_flag("--all", o->all, "List every job, not only GPU jobs");
  cmd->add_flag("--no-headers", o->no_headers, "Print no headers (for scripts)");
  add_output_flag(*cmd, ctx.help(), o->output, {"table", "wide", "json", "yaml", "name"});

  auto c = std::make_shared<JobsCleanOptions>();
  auto* clean = cmd->add_subcommand("clean", "Delete finished (Complete or Failed) jobs together with their pods");
  document(*clean, ctx.help(),
           {R"(Deletes finished GPU jobs (--all: every finished job) with propagationPolicy=Background, so
their pods are garbage-collected too (a plain 'kubectl delete job' keeps them), and with a uid
precondition, so a new job that took the same name is never touched. Jobs still pending or
running are kept. A failed deletion does not stop the others; it is named at the end and the
exit code is 1.)",
            {{"Preview: which finished jobs would go", "gpuctl jobs clean -n team-a --dry-run"},
             {"Jobs that finished more than 7 days ago, in every namespace", "gpuctl jobs clean -A --older-than 7d"},
             {"Only the failed sweep jobs, checked by the API server without deleting anything",
              "gpuctl jobs clean -n team-a -l app=sweep --dry-run=server"}}});
  clean->fallthrough();
  clean->add_flag("-A,--all-namespaces", c->all_namespaces, "Clean jobs in every namespace");
  add_selector_flag(*clean, ctx.help(), c->selector, "jobs");
  clean->add_flag("--all", c->all, "Also delete finished jobs that request no GPU");
  clean
      ->add_option("--older-than", c->older_than,
                   "Only jobs that finished longer ago than this (e.g. 30m, 24h, 7d); 0 (default): every finished job")
      ->default_str("0");
  add_dry_run_flag(*clean, ctx.help(), c->dry_run);
  clean->callback([c, &ctx] { ctx.run = [c, &ctx] { return run_jobs_clean(*c, ctx); }; });

  cmd->callback([o, cmd, clean, &ctx] {
    if (cmd->got_subcommand(clean)) return;
    ctx.run = [o, &ctx] { return run_jobs(*o, ctx); };
  });
}

}  // namespace gpuctl::cli
