// gpuctl gpus: every GPU of the chosen nodes, live (--via ssh, pod or prometheus), joined with
// Kubernetes' view.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpu_view_render.hpp"
#include "gpuctl/ops/fleet/probe_pods.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "node_source_flags.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

struct GpusOptions {
  std::vector<std::string> names;
  std::string selector;
  NodeSourceFlags source;
  std::string output;
  std::string failed_hosts;
  std::string watch;  // empty: once; else the interval
  bool no_headers = false;
  bool cleanup = false;  // --via pod: delete probe pods left behind, probe nothing
};

// `gpus --via pod --cleanup`: every probe pod left in the probe namespace deleted (a gpuctl killed
// with SIGKILL, a node that never answered the delete), one line each, as kubectl delete prints.
Result<ExitCode> clean_up_probe_pods(const NodeSourceRequest& request, AppContext& ctx) {
  if (request.via != ops::Via::pod) {
    return fail(Errc::invalid_argument, "--cleanup deletes leftover probe pods: give it with --via pod");
  }
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(std::vector<std::string> deleted, ops::cleanup_probe_pods(*client, request.pod.namespace_name));
  if (deleted.empty()) {
    ctx.streams().err << fmt::format("No probe pods left in namespace {}.\n", request.pod.namespace_name);
  }
  for (const auto& name : deleted) {
    ctx.streams().out << fmt::format("pod/{} deleted (namespace {})\n", name, request.pod.namespace_name);
  }
  return ExitCode::ok;
}

// Writes the names of the nodes that did not fully answer, one a line, for a re-run with
// `gpuctl gpus $(cat FILE)`. Written to a temporary file first, so a reader never sees half.
Result<void> write_failed_hosts(const std::string& path, const ops::GpuView& view) {
  std::string text;
  for (const auto& v : view.nodes) {
    if (v.probe.outcome != "ok") text += v.kube.name + "\n";
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.flush()) return fail(Errc::io, fmt::format("--failed-hosts: cannot write {}", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(Errc::io, fmt::format("--failed-hosts: cannot write {}: {}", path, ec.message()));
  return {};
}

Result<ExitCode> run_gpus(const GpusOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(o.output));
  GPUCTL_TRY_ASSIGN(NodeSourceRequest request, validate_node_source_flags(o.source));
  if (o.cleanup) return clean_up_probe_pods(request, ctx);
  std::chrono::milliseconds interval{0};
  if (!o.watch.empty()) {
    auto parsed = util::parse_duration(o.watch);
    if (!parsed) return fail(parsed.error().with_context("--watch"));
    if (parsed->count() <= 0)
      return fail(Errc::invalid_argument, "--watch: the interval must be more than 0 (e.g. 2s)");
    interval = *parsed;
  }
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(std::unique_ptr<ops::NodeSource> source, make_node_source(request, ctx));
  ops::GpuViewOptions options;
  options.names = o.names;
  options.label_selector = o.selector;
  auto& err = ctx.streams().err;
  const bool progress = ctx.streams().err_is_terminal;
  if (progress) {
    options.on_progress = [&err, words = via_words(request.via)](std::size_t done, std::size_t total) {
      err << fmt::format("\rreading nodes {}: {}/{}", words, done, total) << std::flush;
    };
  }
  // run
  for (int frame = 0;; frame++) {
    GPUCTL_TRY_ASSIGN(ops::GpuView view, ops::collect_gpu_view(*client, *source, options));
    if (progress) err << "\r\033[K" << std::flush;
    for (const auto& skipped : view.skipped) ctx.warn(skipped);
    for (const auto& warning : view.warnings) ctx.warn(warning);
    if (!o.failed_hosts.empty()) GPUCTL_TRY(write_failed_hosts(o.failed_hosts, view));
    auto& out = ctx.streams().out;
    if (format == OutputFormat::json || format == OutputFormat::yaml) {
      out << render_structured(ops::to_json(view), format);
    } else {
      if (!o.watch.empty() && ctx.streams().out_is_terminal) out << "\033[H\033[2J";  // a fresh screen per frame
      if (!o.watch.empty()) out << util::format_rfc3339(std::chrono::system_clock::now()) << "\n";
      if (view.nodes.empty()) {
        err << "No GPU nodes found" << (o.selector.empty() ? "" : " matching -l " + o.selector) << ".\n";
      } else {
        out << render_gpu_view(view, {!o.no_headers, ctx.color(), ctx.streams().out_is_terminal});
      }
    }
    out << std::flush;
    // Interrupted: the frame above is the summary (hosts not reached are listed as interrupted).
    if (util::cancelled()) return interrupted_exit_code();
    if (o.watch.empty()) {
      bool all_ok = std::all_of(view.nodes.begin(), view.nodes.end(),
                                [](const ops::NodeGpuView& v) { return v.probe.outcome == "ok"; });
      return all_ok && view.skipped.empty() ? ExitCode::ok : ExitCode::failure;
    }
    if (!util::sleep_unless_cancelled(interval)) return interrupted_exit_code();
  }
}

}  // namespace

void register_gpus(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<GpusOptions>();
  auto* cmd = app.add_subcommand(
      "gpus", "Every GPU of the chosen nodes, live (over ssh, probe pods or Prometheus), with the pods on them");
  document(
      *cmd, ctx.help(),
      {R"(gpuctl runs one fixed probe script (nvidia-smi -q -x, and per GPU when one broken GPU makes
the whole query fail) on every GPU node: through the system ssh (--via ssh, the default), or in a
short-lived pod pinned to each node whose log gpuctl reads and which it deletes (--via pod), at
most --fanout at once, each node bounded by --ssh-timeout or --probe-timeout. --via prometheus
reads the DCGM exporter's metrics from --prometheus-url instead, one query per metric family.
Nodes that do not answer are listed apart with the reason (unreachable, auth_failed,
host_key_mismatch, timed_out, image_pull_failed, stale, no_exporter, driver_not_loaded,
driver_library_mismatch, gpu_lost, no_devices, ...), identical failures grouped with a node count;
the VIA column says where each node's data came from. Exit code 1 when any node did not fully
answer. Ctrl-C or SIGTERM stops every ssh or deletes every probe pod, lists the nodes not reached
as interrupted and exits 130 (143 for SIGTERM).)",
       {{"Every GPU node, through ~/.ssh/config", "gpuctl gpus"},
        {"Two nodes, as user ubuntu through a bastion",
         "gpuctl gpus gpu-0 gpu-1 --ssh-user ubuntu --ssh-option ProxyJump=bastion"},
        {"Without ssh: a probe pod on each node (namespace gpuctl-system)", "gpuctl gpus --via pod"},
        {"Delete probe pods a killed gpuctl left behind", "gpuctl gpus --via pod --cleanup"},
        {"From the DCGM exporter's metrics in Prometheus",
         "gpuctl gpus --via prometheus --prometheus-url http://prometheus.monitoring:9090"},
        {"The A100 nodes every 5 seconds", "gpuctl gpus -l nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB --watch 5s"},
        {"Re-run only the nodes that failed",
         "gpuctl gpus --failed-hosts /tmp/failed && gpuctl gpus $(cat /tmp/failed)"}}});
  completes(cmd->add_option("nodes", o->names, "NODE... (default: every GPU node)"), ctx.help(), ValueKind::node);
  add_selector_flag(*cmd, ctx.help(), o->selector);
  add_node_source_flags(*cmd, ctx.help(), o->source);
  add_output_flag(*cmd, ctx.help(), o->output, {"table", "json", "yaml"});
  cmd->add_option("--failed-hosts", o->failed_hosts,
                  "Write the names of the nodes that did not fully answer to FILE, one a line");
  cmd->add_option("-w,--watch", o->watch, "Refresh every INTERVAL (default 2s) until interrupted")
      ->expected(0, 1)
      ->default_str("2s");
  cmd->add_flag("--no-headers", o->no_headers, "Print no headers");
  cmd->add_flag(
      "--cleanup", o->cleanup,
      "With --via pod: delete the probe pods left in --probe-namespace (by gpuctl's labels) and probe nothing");
  cmd->callback([o, &ctx, cmd] {
    // A bare --watch means the default interval.
    if (cmd->count("--watch") > 0 && o->watch.empty()) o->watch = "2s";
    ctx.run = [o, &ctx] { return run_gpus(*o, ctx); };
  });
}

}  // namespace gpuctl::cli
