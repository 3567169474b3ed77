// gpuctl logs JOB: the logs of every pod of a Job, each line prefixed with its pod as
// `kubectl logs -l ... --prefix` does, ending with the job's status line.
#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/jobs/job_logs.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "job_lines.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

struct LogsOptions {
  std::string job;
  bool follow = false;
  bool previous = false;
  std::string pod;
  std::string container;
  std::string since;
  std::int64_t tail = -1;
  bool no_prefix = false;
};

Result<ops::JobLogsRequest> validate(const LogsOptions& o) {
  ops::JobLogsRequest r;
  r.job = o.job;
  r.follow = o.follow;
  r.previous = o.previous;
  r.pod = o.pod;
  r.container = o.container;
  if (o.follow && o.previous) {
    return std::unexpected(usage("--previous reads the logs of containers that ended: drop -f/--follow"));
  }
  if (o.tail < -1) return std::unexpected(usage("--tail must be -1 (every line) or more"));
  if (o.tail >= 0) r.tail_lines = o.tail;
  if (!o.since.empty()) {
    auto since = util::parse_duration(o.since);
    if (!since) return std::unexpected(usage("--since: " + since.error().message));
    r.since_seconds = std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(*since).count());
  }
  return r;
}

Result<ExitCode> run_logs(const LogsOptions& o, AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(ops::JobLogsRequest request, validate(o));
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(request.ns, ctx.namespace_name());
  auto& out = ctx.streams().out;
  auto& err = ctx.streams().err;
  request.on_line = [&](const ops::JobLogLine& line) {
    if (!o.no_prefix) out << fmt::format("[pod/{}/{}] ", line.pod, line.container);
    out << line.text << '\n' << std::flush;
    return static_cast<bool>(out);  // a closed pipe (| head) stops the reading
  };
  request.on_notice = [&](const std::string& text) {
    if (!util::cancelled()) print_line(err, text);
    err << std::flush;
  };
  GPUCTL_TRY_ASSIGN(ops::JobLogsResult result, ops::read_job_logs(*client, request));
  if (result.pods_read == 0 && result.lost.empty())
    print_line(err, fmt::format("job {}/{} has no pod that started yet", request.ns, request.job));
  print_line(err, job_state_line(result.job));
  if (result.lost.empty()) return ExitCode::ok;
  print_line(err, fmt::format("error: the logs of {} pod(s) could not be read: {}", result.lost.size(),
                              fmt::join(result.lost, ", ")));
  return ExitCode::failure;
}

}  // namespace

void register_logs(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<LogsOptions>();
  auto* cmd = app.add_subcommand("logs", "Print the logs of every pod of a job, each line with its pod");
  document(*cmd, ctx.help(),
           {R"(Prints the logs of the pods of JOB that have started, oldest first (the pods of retries
after the ones that failed), each line prefixed with its pod and container as
'kubectl logs -l ... --prefix' prints them, then the job's status line on stderr. With -f, every
running pod is followed at once and lines are printed as they arrive; the pods of retries are
followed as they start, until the job is Complete or Failed and each pod's log has ended. A pod
whose log cannot be read (its node's kubelet does not answer) is named, and the exit code is 1.)",
            {{"Every pod's log, prefixed", "gpuctl logs -n ml train"},
             {"Follow a running job, retries included", "gpuctl logs -n ml train -f"},
             {"The last 20 lines of completion index 3's pod", "gpuctl logs -n ml train --pod 3 --tail 20"},
             {"What a crashed container printed before its restart", "gpuctl logs -n ml train --previous"}}});
  completes(cmd->add_option("job", o->job, "JOB")->required(), ctx.help(), ValueKind::job);
  cmd->add_flag("-f,--follow", o->follow, "Follow the logs until the job ends");
  cmd->add_flag("-p,--previous", o->previous, "The previous instance of each container (one that restarted)");
  cmd->add_option("--pod", o->pod, "Only this pod: a completion index (Indexed jobs) or a pod name");
  cmd->add_option("-c,--container", o->container, "The container (default: the one named main, else the first)");
  cmd->add_option("--since", o->since, "Only lines newer than this (e.g. 10m, 1h)");
  cmd->add_option("--tail", o->tail, "Only the last N lines of each pod (-1: every line)")->default_str("-1");
  cmd->add_flag("--no-prefix", o->no_prefix, "Print the lines without their [pod/NAME/CONTAINER] prefix");
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_logs(*o, ctx); }; });
}

}  // namespace gpuctl::cli
