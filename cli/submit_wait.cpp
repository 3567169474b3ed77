// gpuctl submit --wait and --follow (see submit_wait.hpp).
#include "submit_wait.hpp"

#include <optional>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/jobs/job_logs.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/submit/avoid_failed_nodes.hpp"
#include "gpuctl/util/cancel.hpp"
#include "job_lines.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {

Result<ExitCode> wait_and_report(AppContext& ctx, kube::Client& client, const std::string& ns, const std::string& name,
                                 const SubmitWait& o) {
  auto& err = ctx.streams().err;
  ops::JobWaitOptions wait;
  wait.timeout = o.timeout;
  wait.on_change = [&](const ops::JobSummary& s) {
    print_line(err, progress_line(s));
    err << std::flush;
  };
  std::optional<ops::JobLogFollower> follower;
  if (o.follow) {
    ops::JobLogOptions logs;
    logs.on_chunk = [&](std::string_view chunk) {
      ctx.streams().out << chunk << std::flush;
      return static_cast<bool>(ctx.streams().out);
    };
    logs.on_notice = [&](const std::string& text) {
      if (!util::cancelled()) print_line(err, text);  // not "log stream abandoned" after Ctrl-C
      err << std::flush;
    };
    follower.emplace(client, ns, name, std::move(logs));
  }
  std::optional<ops::FailedNodeAvoider> avoider;
  if (o.avoid_failed_nodes) {
    avoider.emplace(client, ns, name, [&](const std::string& text) {
      print_line(err, text);
      err << std::flush;
    });
  }
  wait.on_poll = [&](const ops::JobSummary& summary) {
    if (follower) follower->poll();
    if (avoider) avoider->poll(summary);
  };
  auto result = ops::wait_for_job(client, ns, name, wait);
  if (avoider) {
    if (result) {
      avoider->release();
    } else {
      avoider->leave();  // the job may still run: its retries must keep avoiding
    }
  }
  if (!result) return fail(result.error());  // a timeout's message says the job keeps running
  bool succeeded = result->phase == ops::JobPhase::succeeded;
  // The verdict goes to stderr when stdout is for data (--parsable, -o, logs).
  auto& verdict_stream = (o.stdout_is_data || o.follow) ? err : ctx.streams().out;
  print_line(verdict_stream, job_result_line(*result));
  return exit_code_for_job(succeeded, result->failure ? result->failure->reason : "",
                           result->failure ? result->failure->exit_code : std::nullopt);
}

}  // namespace gpuctl::cli
