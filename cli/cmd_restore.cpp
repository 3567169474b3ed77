// gpuctl restore FILE: a backup archive or a kubectl export planned against the cluster and
// applied (server-side apply, field manager gpuctl), or only shown with --dry-run.
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/label_selector.hpp"
#include "gpuctl/ops/restore/restore.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "input_file.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

using json = nlohmann::json;

struct RestoreCommandOptions {
  std::string file;
  std::string dry_run;
  bool force_conflicts = false;
  std::vector<std::string> only;
  std::string selector;
  bool nodes = false;
  bool verify = false;
  std::string verify_timeout = "2m";
  bool to_other_cluster = false;
  std::string output;
};

// validate: flags into library options, no I/O.
Result<ops::RestoreOptions> validate(const RestoreCommandOptions& o, const std::string& namespace_name) {
  ops::RestoreOptions options;
  GPUCTL_TRY_ASSIGN(options.dry_run, parse_dry_run(o.dry_run));
  options.force_conflicts = o.force_conflicts;
  options.to_other_cluster = o.to_other_cluster;
  options.verify = o.verify;
  if (o.verify && options.dry_run != DryRun::none)
    return fail(usage("--verify checks a restore that was applied; drop --dry-run or --verify"));
  GPUCTL_TRY_ASSIGN(auto timeout, util::parse_duration(o.verify_timeout));
  options.verify_timeout = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  for (const auto& name : o.only) {
    const ops::BackupKind* kind = ops::find_backup_kind(name);
    if (kind == nullptr) {
      std::vector<std::string> known;
      for (const auto& k : ops::backup_kinds()) known.push_back(std::string(k.resource));
      return fail(
          usage(fmt::format("--only {}: not a kind gpuctl restores; use one of {}", name, fmt::join(known, ", "))));
    }
    options.scope.only.push_back(kind);
  }
  options.scope.nodes_only = o.nodes;
  options.scope.namespace_name = namespace_name;
  if (!o.selector.empty()) {
    GPUCTL_TRY_ASSIGN(options.scope.label_selector, kube::parse_label_selector(o.selector));
  }
  return options;
}

std::string shown(const json& value) { return value.is_null() ? "(absent)" : value.dump(); }

std::string_view verb(const ops::RestoreItem& item) {
  using R = ops::RestoreResult;
  switch (item.result) {
    case R::applied: return item.action == ops::RestoreAction::create ? "created" : "updated";
    case R::planned: return to_string(item.action);
    case R::unchanged: return "unchanged";
    case R::skipped: return "skipped";
    case R::conflict: return "conflict";
    case R::failed: return "failed";
  }
  return "failed";
}

std::string item_line(const ops::RestoreItem& item) {
  std::string line = fmt::format("{:<10} {} {}{}", verb(item), item.kind->kind,
                                 item.namespace_name.empty() ? "" : item.namespace_name + "/", item.name);
  std::vector<std::string> details;
  if (item.result == ops::RestoreResult::conflict) {
    for (const auto& c : item.conflicts) details.push_back(fmt::format("{} is managed by \"{}\"", c.field, c.manager));
    details.push_back("--force-conflicts takes them over");
  } else if (item.result == ops::RestoreResult::failed) {
    details.push_back(item.error);
  } else {
    for (const auto& c : item.changes)
      details.push_back(fmt::format("{}: {} -> {}", c.field, shown(c.from), shown(c.to)));
    if (!item.reason.empty()) details.push_back(item.reason);
  }
  if (!details.empty()) line += ": " + fmt::format("{}", fmt::join(details, "; "));
  return line;
}

void print_verify(std::ostream& out, const std::vector<ops::VerifyCheck>& checks) {
  out << "verify:\n";
  for (const auto& c : checks)
    print_line(out, fmt::format("  [{}] {} {}: {}", c.passed ? "ok" : "FAIL", c.check, c.object, c.detail));
}

Result<ExitCode> run_restore(const RestoreCommandOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(std::optional<OutputFormat> format, structured_output_format(o.output));
  GPUCTL_TRY_ASSIGN(ops::RestoreOptions options, validate(o, ctx.globals().namespace_name));
  // complete: the input is checked whole before the cluster is asked anything.
  GPUCTL_TRY_ASSIGN(std::string bytes, read_input_file(o.file));
  GPUCTL_TRY_ASSIGN(ops::RestoreSource source, ops::read_restore_source(bytes, input_name(o.file)));
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  auto& out = ctx.streams().out;
  auto& err = ctx.streams().err;
  const bool progress = ctx.streams().err_is_terminal;
  if (progress) options.on_progress = [&err](std::string_view what) { err << "\r\033[K" << what << std::flush; };
  if (!format) {
    options.on_item = [&](const ops::RestoreItem& item) {
      if (progress) err << "\r\033[K" << std::flush;
      print_line(out, item_line(item));
    };
  }
  // run
  auto restored = ops::restore(*client, source, options);
  if (progress) err << "\r\033[K" << std::flush;
  GPUCTL_TRY_ASSIGN(ops::RestoreReport report, std::move(restored));
  for (const auto& ignored : report.ignored) ctx.warn(fmt::format("not restored: {}", ignored));
  const json doc = ops::to_json(report);
  if (format) {
    out << render_structured(doc, *format);
  } else {
    const json& s = doc["summary"];
    print_line(out, fmt::format("restore: {} create, {} update, {} unchanged, {} skipped, {} conflict, {} failed{}",
                                s["create"].get<int>(), s["update"].get<int>(), s["unchanged"].get<int>(),
                                s["skip"].get<int>(), s["conflict"].get<int>(), s["failed"].get<int>(),
                                dry_run_suffix(report.dry_run)));
    if (report.verify) print_verify(out, *report.verify);
  }
  if (!report.missing_nodes.empty())
    ctx.warn(fmt::format("nodes in the archive that no longer exist: {}", fmt::join(report.missing_nodes, ", ")));
  if (report.interrupted) {
    const std::string left =
        report.not_started.empty() ? "" : fmt::format(" ({} object(s) not started)", report.not_started.size());
    print_line(err, fmt::format("error: restore interrupted{}; what was applied stays, run the same restore again to "
                                "complete it",
                                left));
    return ExitCode::interrupted;
  }
  if (!ops::restore_succeeded(report)) {
    const auto failed = std::ranges::count_if(report.items, [](const ops::RestoreItem& i) {
      return i.result == ops::RestoreResult::conflict || i.result == ops::RestoreResult::failed;
    });
    if (failed > 0)
      print_line(err, fmt::format("error: {} object(s) not restored (conflict or failure, named above)", failed));
    if (report.verify && !doc["verify"]["passed"].get<bool>())
      print_line(err, "error: verification failed (see verify:)");
    return ExitCode::failure;
  }
  return ExitCode::ok;
}

}  // namespace

void register_restore(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<RestoreCommandOptions>();
  auto* cmd =
      app.add_subcommand("restore", "Bring back a backup archive or a kubectl export: plan, diff, apply, verify");
  document(
      *cmd, ctx.help(),
      {R"(FILE is an archive of gpuctl backup, or a kubectl export (kubectl get nodes -o yaml: a v1 List;
multi-document YAML), or - for stdin. An archive is checked whole first (gzip and tar integrity,
every file's sha256, the format version) and refused when damaged (exit 2); so is an archive of
another cluster (another API server URL) unless --to-other-cluster.

Every object is planned against the cluster now: create, update (the fields that change), unchanged,
or skipped (the node no longer exists, owned by a controller, kind not served). --dry-run prints
only that. Applying is server-side apply with field manager gpuctl, without force: a field another
manager owns (GPU Operator, NVSentinel, kubectl edit) is a conflict naming it, and
--force-conflicts takes it over. Order: namespaces, classes, volumes, claims (a Released volume of a
deleted claim is freed so the recreated claim binds it), quotas and limits, configuration,
DaemonSets, Jobs (without their old selector and controller labels), nodes last. Node state is only
added back: labels and annotations set, missing taints added, cordons restored; a taint or cordon
there now is never removed. Restoring twice changes nothing the second time; an interrupted restore
completes when run again. A failed object does not stop the others; the exit code is then 1.)",
       {{"What would change, field by field", "gpuctl restore gpuctl-backup-prod-20261206T120000Z.tar.gz --dry-run"},
        {"Only the nodes' labels, taints and cordons, from the seed's kubectl export",
         "gpuctl restore nodes-backup.yaml --nodes"},
        {"One namespace's quotas and limits, then check they are enforced",
         "gpuctl restore backup.tar.gz -n team-a --only resourcequotas,limitranges --verify"}}});
  completes(cmd->add_option("FILE", o->file, "The archive or export (- for stdin)"), ctx.help(), ValueKind::file)
      ->required();
  add_dry_run_flag(*cmd, ctx.help(), o->dry_run);
  cmd->add_flag("--force-conflicts", o->force_conflicts, "Take over fields another field manager owns");
  cmd->add_option("--only", o->only, "Only these kinds (comma-separated: nodes, resourcequotas, jobs, pvc, ...)")
      ->delimiter(',');
  add_selector_flag(*cmd, ctx.help(), o->selector, "archived objects");
  cmd->add_flag("--nodes", o->nodes, "Only node state: labels, annotations, taints, cordons");
  cmd->add_flag("--verify", o->verify,
                "After restoring, check claims Bound and mountable, quotas enforced, node state present, Jobs "
                "created (exit 1 if one fails)");
  cmd->add_option("--verify-timeout", o->verify_timeout, "How long --verify waits for controllers (default 2m)");
  cmd->add_flag("--to-other-cluster", o->to_other_cluster, "Restore an archive taken from another cluster");
  add_output_flag(*cmd, ctx.help(), o->output, {"text", "json", "yaml"});
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_restore(*o, ctx); }; });
}

}  // namespace gpuctl::cli
