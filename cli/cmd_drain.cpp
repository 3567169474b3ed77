// gpuctl drain: cordon and evict with kubectl's semantics, a pre-flight plan (--dry-run),
// several nodes at once, and rolling maintenance (--rolling).
#include <atomic>

#include <fmt/format.h>

#include <unistd.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/drain/drain.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/output/table.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "live_status.hpp"
#include "node_changes.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

struct DrainFlags {
  std::vector<std::string> names;
  std::string selector;
  bool all_gpu_nodes = false;
  std::string reason;
  ops::DrainPolicy policy;
  int grace_period = -1;
  std::string timeout = "0";
  std::string pod_selector;
  bool disable_eviction = false;
  bool dry_run = false;
  std::string output = "table";
  int max_concurrent = 1;
  int max_evictions_in_flight = 0;  // 0: no bound (the flag itself needs at least 1)
  bool rolling = false;
  int max_unavailable = 1;
  std::string exec;
  std::string exec_timeout;
  bool uncordon = false;
  std::string wait_ready = "0";
  bool continue_on_error = false;
  bool verify = true;  // with --rolling --uncordon; --no-verify turns it off
  SshFlags ssh;
  // Which flags were given, for the combination checks.
  CLI::Option* max_concurrent_opt = nullptr;
  CLI::Option* in_flight_opt = nullptr;
  CLI::Option* exec_timeout_opt = nullptr;
  CLI::Option* wait_ready_opt = nullptr;
  CLI::Option* max_unavailable_opt = nullptr;
  CLI::Option* verify_opt = nullptr;
  CLI::App* cmd = nullptr;
};

struct Validated {
  ops::NodeSelection selection;
  OutputFormat format = OutputFormat::table;
  std::chrono::milliseconds timeout{0};
  std::optional<std::chrono::milliseconds> exec_timeout;
  std::chrono::milliseconds wait_ready{0};
  std::optional<SshRequest> verify;  // set when each node is verified before its uncordon
};

// --verify (on by default) checks each node before the uncordon of --rolling --uncordon; its ssh
// flags mean nothing anywhere else.
Result<void> validate_verify(const DrainFlags& f, Validated& v) {
  const bool uncordons = f.rolling && f.uncordon;
  if (f.verify_opt->count() > 0 && !uncordons) {
    return fail(usage("--verify and --no-verify apply to --rolling --uncordon (the check before each uncordon)"));
  }
  if (std::string given = ssh_flag_given(*f.cmd); !given.empty() && !(uncordons && f.verify)) {
    return fail(usage(given + " only applies to --rolling --uncordon with --verify (the GPUs are checked over ssh)"));
  }
  if (uncordons && f.verify) {
    GPUCTL_TRY_ASSIGN(v.verify, validate_ssh_flags(f.ssh));
  }
  return {};
}

// Pure: every check that needs no I/O.
Result<Validated> validate(const DrainFlags& f) {
  Validated v;
  v.selection = {f.names, f.selector, f.all_gpu_nodes};
  GPUCTL_TRY(ops::validate_selection(v.selection));
  GPUCTL_TRY_ASSIGN(v.format, parse_output_format(f.output));
  if (!f.rolling) {
    if (!f.exec.empty()) return fail(usage("--exec only applies to rolling maintenance: add --rolling"));
    if (f.uncordon) return fail(usage("--uncordon only applies to rolling maintenance: add --rolling"));
    if (f.continue_on_error)
      return fail(usage("--continue-on-error only applies to rolling maintenance: add --rolling"));
    if (f.wait_ready_opt->count() > 0)
      return fail(usage("--wait-ready only applies to rolling maintenance: add --rolling"));
    if (f.max_unavailable_opt->count() > 0)
      return fail(usage("--max-unavailable only applies to rolling maintenance: add --rolling"));
  } else {
    if (f.max_concurrent_opt->count() > 0) {
      return fail(usage(
          "--max-concurrent does not apply with --rolling: --max-unavailable says how many nodes are out at once"));
    }
    if (f.dry_run)
      return fail(
          usage("--dry-run does not apply with --rolling: run 'gpuctl drain --dry-run' on the nodes to see the plan"));
    if (f.max_unavailable < 1) return fail(usage("--max-unavailable: at least 1"));
  }
  if (f.exec_timeout_opt->count() > 0 && f.exec.empty()) return fail(usage("--exec-timeout needs --exec COMMAND"));
  if (f.max_concurrent < 1) return fail(usage("--max-concurrent: at least 1"));
  if (f.in_flight_opt->count() > 0 && f.max_evictions_in_flight < 1)
    return fail(usage("--max-evictions-in-flight: at least 1"));
  if (f.grace_period < -1) return fail(usage("--grace-period: -1 (each pod's own) or a number of seconds, 0 or more"));
  if (f.policy.skip_wait_for_delete_timeout_seconds < 0)
    return fail(usage("--skip-wait-for-delete-timeout: 0 or more seconds"));
  auto timeout = util::parse_duration(f.timeout);
  if (!timeout) return fail(usage("--timeout: " + timeout.error().message));
  v.timeout = *timeout;
  if (!f.exec_timeout.empty()) {
    auto et = util::parse_duration(f.exec_timeout);
    if (!et) return fail(usage("--exec-timeout: " + et.error().message));
    v.exec_timeout = *et;
  }
  auto wr = util::parse_duration(f.wait_ready);
  if (!wr) return fail(usage("--wait-ready: " + wr.error().message));
  v.wait_ready = *wr;
  if (f.dry_run && v.format == OutputFormat::name) return fail(usage("-o name does not apply to --dry-run"));
  GPUCTL_TRY(validate_verify(f, v));
  return v;
}

std::string secs(std::chrono::milliseconds d) {
  return util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(d));
}

std::string budget_cell(const ops::PodPlan& p) {
  if (p.pdbs.empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& b : p.pdbs) parts.push_back(fmt::format("{} ({} allowed)", b.name, b.disruptions_allowed));
  return fmt::format("{}", fmt::join(parts, ","));
}

ExitCode render_plan(AppContext& ctx, const ops::DrainPlan& plan, OutputFormat format) {
  auto& out = ctx.streams().out;
  if (format == OutputFormat::json || format == OutputFormat::yaml) {
    out << render_structured(ops::to_json(plan), format);
    return ExitCode::ok;
  }
  output::Table t({"NODE", "POD", "ACTION", "REASON", "PDB", "GPUS", "ROOM-ELSEWHERE"});
  for (const auto& n : plan.nodes) {
    for (const auto& p : n.pods) {
      using output::Style;
      Style s = p.action == ops::PodAction::refuse || p.action == ops::PodAction::blocked ? Style::bad
                : p.action == ops::PodAction::skip                                        ? Style::dim
                                                                                          : Style::plain;
      std::string room = "-";
      if (p.dra_devices > 0 && p.action != ops::PodAction::skip) {
        // DRA: the claims' devices, on one node that stays.
        room = p.dra_fit == "fits"      ? fmt::format("yes (DRA devices on {})", p.dra_node)
               : p.dra_fit == "unknown" ? fmt::format("unknown ({})", p.dra_message)
                                        : fmt::format("NO ({})", p.dra_message);
      } else if (p.gpu_pod && p.action != ops::PodAction::skip) {
        room = fmt::format("{} ({} free {})", p.fits_elsewhere ? "yes" : "NO", p.free_gpus_elsewhere,
                           p.product.empty() ? std::string("GPUs") : p.product);
      }
      std::string gpus = p.dra_devices > 0 ? fmt::format("{} (DRA)", p.dra_devices) : std::to_string(p.gpus);
      t.add_row({n.node, p.ns + "/" + p.name, output::Cell(std::string(ops::to_string(p.action)), s),
                 p.message.empty() ? std::string("-") : p.message, budget_cell(p), gpus, room});
    }
  }
  if (!t.empty()) out << t.render({true, ctx.color()});
  for (const auto& n : plan.nodes) {
    print_line(out, fmt::format("{}: {}{}", n.node,
                                n.completes ? "would drain completely" : "would not drain completely: " + n.message,
                                n.already_cordoned ? " (already cordoned)" : ""));
  }
  ctx.streams().err << "Dry run: nothing was changed.\n";
  return ExitCode::ok;
}

output::Cell result_cell(ops::DrainOutcome o) {
  return {std::string(ops::to_string(o)), o == ops::DrainOutcome::drained ? output::Style::good : output::Style::bad};
}

ExitCode finish(AppContext& ctx, const std::vector<std::string>& not_drained) {
  if (not_drained.empty()) return ExitCode::ok;
  print_line(
      ctx.streams().err,
      fmt::format("error: {} node(s) not fully drained{}: {}", not_drained.size(),
                  util::cancelled() ? " (interrupted by " + util::cancel_signal_name() + "; re-run to continue)" : "",
                  fmt::join(not_drained, ", ")));
  return util::cancelled() ? interrupted_exit_code() : ExitCode::failure;
}

// The drain options the flags ask for; the cordon is recorded as by the caller, now.
Result<ops::DrainOptions> drain_options(const DrainFlags& f, const Validated& v, kube::Client& client) {
  ops::DrainOptions o;
  o.policy = f.policy;
  o.pod_selector = f.pod_selector;
  o.grace_period_seconds = f.grace_period;
  o.timeout = v.timeout;
  o.disable_eviction = f.disable_eviction;
  o.cordon.reason = f.reason;
  GPUCTL_TRY_ASSIGN(o.cordon.by, client.whoami());
  o.cordon.at = util::format_rfc3339(std::chrono::system_clock::now());
  return o;
}

ops::RollingOptions rolling_options(const DrainFlags& f, const Validated& v, const ops::DrainOptions& o) {
  ops::RollingOptions ro;
  ro.drain = o;
  ro.max_unavailable = f.max_unavailable;
  ro.exec = f.exec;
  ro.exec_timeout = v.exec_timeout;
  ro.uncordon = f.uncordon;
  ro.wait_ready = v.wait_ready;
  ro.continue_on_error = f.continue_on_error;
  return ro;
}

// --rolling: one row per node with each step's result; the nodes never started say why.
ExitCode report_rolling(AppContext& ctx, const std::vector<ops::RollingResult>& results,
                        const std::vector<ops::NodeChange>& missing, OutputFormat format) {
  std::vector<std::string> not_drained;
  output::Table t({"NODE", "RESULT", "DRAIN", "EVICTED", "EXEC", "READY", "UNCORDON", "VERIFY", "TIME", "MESSAGE"});
  for (const auto& r : results) {
    std::string result(ops::rolling_result(r));
    std::string why_not_started =
        util::cancelled() ? "not started: interrupted by " + util::cancel_signal_name() + " (re-run to continue)"
                          : "not started: stopped at the first failure (use --continue-on-error)";
    if (!r.ok) not_drained.push_back(r.drain.node);
    auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
    t.add_row({r.drain.node, output::Cell(result, r.ok ? output::Style::good : output::Style::bad),
               r.not_started ? std::string("-") : std::string(ops::to_string(r.drain.outcome)),
               std::to_string(r.drain.evicted), dash(r.exec), dash(r.ready), dash(r.uncordon), dash(r.verify),
               r.not_started ? std::string("-") : secs(r.drain.elapsed),
               r.not_started ? why_not_started : r.drain.message});
  }
  for (const auto& m : missing) {
    not_drained.push_back(m.node);
    t.add_row({m.node, output::Cell("failed", output::Style::bad), "-", "0", "-", "-", "-", "-", "-",
               m.error ? m.error->message : std::string("node not found")});
  }
  if (format == OutputFormat::json || format == OutputFormat::yaml) {
    ctx.streams().out << render_structured(ops::to_json(results), format);
  } else {
    ctx.streams().out << t.render({true, ctx.color()});
  }
  return finish(ctx, not_drained);
}

// One row per node drained (or not), the missing ones included; -o name lists the drained.
ExitCode report_drains(AppContext& ctx, const std::vector<ops::NodeDrainResult>& results,
                       const std::vector<ops::NodeChange>& missing, OutputFormat format) {
  auto& out = ctx.streams().out;
  std::vector<std::string> not_drained;
  output::Table t({"NODE", "RESULT", "CORDON", "EVICTED", "SKIPPED", "REMAINING", "TIME", "MESSAGE"});
  for (const auto& r : results) {
    if (r.outcome != ops::DrainOutcome::drained) not_drained.push_back(r.node);
    t.add_row({r.node, result_cell(r.outcome), r.cordon, std::to_string(r.evicted), std::to_string(r.skipped),
               std::to_string(r.remaining.size()), secs(r.elapsed), r.message.empty() ? std::string("-") : r.message});
  }
  for (const auto& m : missing) {
    not_drained.push_back(m.node);
    t.add_row({m.node, output::Cell("failed", output::Style::bad), "-", "0", "0", "0", "0s",
               m.error ? m.error->message : std::string("not found")});
  }
  if (format == OutputFormat::json || format == OutputFormat::yaml) {
    out << render_structured(ops::to_json(results, missing), format);
  } else if (format == OutputFormat::name) {
    for (const auto& r : results) {
      if (r.outcome == ops::DrainOutcome::drained) print_line(out, "node/" + r.node);
    }
  } else {
    out << t.render({true, ctx.color()});
  }
  return finish(ctx, not_drained);
}

Result<ExitCode> run_drain(const DrainFlags& f, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(Validated v, validate(f));
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::SelectedNodes selected, ops::select_nodes(*client, v.selection));
  // Names that do not exist, and nodes the API answered with unusable names or fields: never
  // drained, never given to --exec; said on stderr before anything starts.
  for (const auto& m : selected.missing)
    ctx.warn(fmt::format("node {}: {}", m.node, m.error ? m.error->message : "not found"));

  if (f.dry_run) {
    GPUCTL_TRY_ASSIGN(ops::DrainPlan plan, ops::plan_drain(*client, selected.nodes, f.policy, f.pod_selector));
    return render_plan(ctx, plan, v.format);
  }

  GPUCTL_TRY_ASSIGN(ops::DrainOptions o, drain_options(f, v, *client));
  std::optional<ops::EvictionSlots> slots;
  if (f.max_evictions_in_flight > 0) {
    slots.emplace(f.max_evictions_in_flight);
    o.slots = &*slots;
  }
  // A live block of one line per node on a terminal; timestamped lines in logs and CI.
  LiveStatus status(ctx.streams().err, ctx.streams().err_is_terminal, terminal_width(STDERR_FILENO));
  o.on_progress = [&](const ops::DrainProgress& p) {
    status.update(p.node, status.terminal() && p.remaining > 0
                              ? fmt::format("[{} pod(s) left] {}", p.remaining, p.message)
                              : p.message);
  };

  if (f.rolling) {
    ops::RollingOptions ro = rolling_options(f, v, o);
    std::optional<Verifier> verifier;
    if (v.verify) {
      verifier.emplace(ctx, *v.verify);
      ro.verify = [&verifier](const std::vector<nlohmann::json>& nodes) { return (*verifier)(nodes); };
    }
    auto results = ops::rolling_maintenance(*client, selected.nodes, ro);
    return report_rolling(ctx, results, selected.missing, v.format);
  }
  auto results = ops::drain_nodes(*client, selected.nodes, o, f.max_concurrent);
  return report_drains(ctx, results, selected.missing, v.format);
}

}  // namespace

void register_drain(CLI::App& app, AppContext& ctx) {
  auto f = std::make_shared<DrainFlags>();
  auto* cmd = app.add_subcommand(
      "drain", "Cordon nodes and evict their pods, as kubectl drain does; plan, parallel and rolling");
  document(*cmd, ctx.help(),
           {R"(Cordons each node (recording --reason), then evicts its pods through the policy/v1 Eviction
API, so PodDisruptionBudgets are honoured: a refused eviction (429) is retried every 5 s and each
retry names the budget. Pods are chosen by kubectl's rules: DaemonSet pods need
--ignore-daemonsets (they stay), mirror pods always stay, pods with emptyDir need
--delete-emptydir-data, pods with no controller need --force; a node with a refused pod is not
touched beyond the cordon. Waiting uses a watch; a replacement with the same name counts as gone.
Re-running an interrupted drain continues where it stopped. Exit code 1 names every node not
fully drained. Ctrl-C or SIGTERM starts nothing new, stops --exec commands, leaves accepted
evictions and started nodes cordoned, prints the summary and exits 130 (143 for SIGTERM).

--rolling --uncordon verifies each node before its uncordon (--no-verify skips it): its GPUs are
probed over ssh as 'gpuctl gpus' does (the --ssh-* flags, else ~/.ssh/config and $GPUCTL_SSH_*)
and judged by diagnose's node-side checks. A node with a critical finding (driver not loaded, a GPU
lost, a fatal Xid, ...) stays cordoned with the finding as its reason, one that cannot be checked
stays cordoned as it is; either fails like a failed --exec: no further node is started.)",
            {{"What would happen, pod by pod, with budgets and room for GPU pods elsewhere",
              "gpuctl drain gpu-7 --ignore-daemonsets --dry-run"},
             {"Drain a node after ECC errors",
              R"(gpuctl drain gpu-7 --ignore-daemonsets --reason "uncorrectable ECC errors" --timeout 10m)"},
             {"Four H100 nodes at a time, at most 20 evictions in flight",
              R"(gpuctl drain -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --ignore-daemonsets \
      --max-concurrent 4 --max-evictions-in-flight 20)"},
             {"Rolling driver upgrade, two nodes out at a time",
              R"(gpuctl drain -l pool=train --ignore-daemonsets --rolling --max-unavailable 2 \
      --exec 'ssh -- "$1" sudo /opt/upgrade-driver.sh' --wait-ready 10m --uncordon)"}}});
  completes(cmd->add_option("nodes", f->names, "NODE..."), ctx.help(), ValueKind::node);
  add_selector_flag(*cmd, ctx.help(), f->selector);
  cmd->add_flag("--all-gpu-nodes", f->all_gpu_nodes, "Every GPU node");
  cmd->add_option("--reason", f->reason, "Why the nodes are drained (recorded on the cordon)");
  cmd->add_flag("--ignore-daemonsets", f->policy.ignore_daemonsets,
                "Leave DaemonSet-managed pods in place instead of refusing");
  cmd->add_flag("--delete-emptydir-data", f->policy.delete_emptydir_data,
                "Evict pods with emptyDir volumes (their data is lost)");
  cmd->add_flag("--force", f->policy.force, "Evict pods that no controller would recreate");
  cmd->add_flag("--gpu-pods-only", f->policy.gpu_pods_only, "Evict only pods that request nvidia.com/* resources");
  cmd->add_option("--grace-period", f->grace_period, "Seconds each pod gets to terminate; -1: the pod's own")
      ->default_str("-1");
  cmd->add_option("--timeout", f->timeout, "Give up on a node after this long (e.g. 10m); 0: wait forever")
      ->default_str("0");
  cmd->add_option("--pod-selector", f->pod_selector, "Only pods matching this label selector");
  cmd->add_flag("--disable-eviction", f->disable_eviction,
                "Delete pods instead of evicting them (bypasses PodDisruptionBudgets)");
  cmd->add_option("--skip-wait-for-delete-timeout", f->policy.skip_wait_for_delete_timeout_seconds,
                  "Skip pods deleted more than this many seconds ago (for NotReady nodes)");
  cmd->add_flag("--dry-run", f->dry_run, "Print the plan, pod by pod, and change nothing");
  add_output_flag(*cmd, ctx.help(), f->output, {"table", "json", "yaml", "name"});
  f->max_concurrent_opt =
      cmd->add_option("--max-concurrent", f->max_concurrent, "Drain this many nodes at once")->default_str("1");
  f->in_flight_opt = cmd->add_option("--max-evictions-in-flight", f->max_evictions_in_flight,
                                     "At most this many evicted pods not yet gone, across all nodes");
  cmd->add_flag("--rolling", f->rolling, "Rolling maintenance: drain, run --exec, wait Ready, uncordon, next");
  f->max_unavailable_opt =
      cmd->add_option("--max-unavailable", f->max_unavailable, "Rolling: nodes out at once")->default_str("1");
  cmd->add_option("--exec", f->exec, "Rolling: command run per node by /bin/sh, the node as $1 and $GPUCTL_NODE");
  f->exec_timeout_opt = cmd->add_option("--exec-timeout", f->exec_timeout, "Rolling: kill the command after this long");
  cmd->add_flag("--uncordon", f->uncordon, "Rolling: uncordon each node once it is done");
  f->verify_opt = cmd->add_flag("--verify,!--no-verify", f->verify,
                                "Rolling --uncordon: probe the node's GPUs over ssh before its uncordon; a node with "
                                "a critical finding stays cordoned and stops the run (default on)");
  add_ssh_flags(*cmd, ctx.help(), f->ssh);
  f->cmd = cmd;
  f->wait_ready_opt =
      cmd->add_option("--wait-ready", f->wait_ready, "Rolling: wait up to this long for the node to be Ready");
  cmd->add_flag("--continue-on-error", f->continue_on_error, "Rolling: go on past a failed node");
  cmd->callback([f, &ctx] { ctx.run = [f, &ctx] { return run_drain(*f, ctx); }; });
}

}  // namespace gpuctl::cli
