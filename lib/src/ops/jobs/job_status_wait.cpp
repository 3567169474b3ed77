// A Job's status read from the cluster (fetch_job_summary) and polled until it finishes
// (wait_for_job). What the objects mean is summarize_job's (job_status.cpp); here are only the
// reads and the loop.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/util/cancel.hpp"
#include "job_failure_cause_internal.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
using job_status_detail::condition;
using job_status_detail::pod_phase;
using job_status_detail::str;

namespace job_status_detail {

std::optional<std::vector<json>> read_nodes_for_detail(kube::Client& client) {
  kube::ListOptions list;
  list.fields = kube::Projection(kube::node_shapes());
  auto nodes = client.list(kube::paths::nodes(), list);
  if (!nodes) return std::nullopt;
  std::vector<std::string> malformed;
  return kube::keep_well_formed(std::move(nodes->items), "node", kube::node_shape_problem, malformed);
}

}  // namespace job_status_detail

namespace {

// The node list a poll may reuse: read when a pod is unschedulable, again once it is this old, so
// that waiting on a pending job does not list every node every second.
constexpr std::chrono::seconds kNodeListReuse{30};

struct NodeCache {
  std::optional<std::vector<json>> nodes;
  util::TimePoint read_at{};
};

// fetch_job_summary with the nodes and the log causes already read (wait_for_job polls the same
// pending and failed pods): `causes` null reads every log afresh.
Result<JobSummary> fetch_summary(kube::Client& client, std::string_view ns, std::string_view name, util::TimePoint now,
                                 NodeCache& cache, job_cause_detail::LogCauseCache* causes) {
  auto job = client.get(kube::paths::job(ns, name));
  if (!job) {
    Error e = job.error();
    if (e.is_not_found()) e.message = fmt::format("job \"{}\" not found in namespace \"{}\"", name, ns);
    return fail(std::move(e));
  }
  kube::ListOptions pod_list;
  pod_list.label_selector = job_pod_selector(*job);
  GPUCTL_TRY_ASSIGN(kube::ListResult pods, client.list(kube::paths::pods(ns), pod_list));
  kube::ListOptions event_list;
  event_list.field_selector = fmt::format("involvedObject.kind=Job,involvedObject.name={}", name);
  GPUCTL_TRY_ASSIGN(kube::ListResult events, client.list(kube::paths::events(ns), event_list));
  // The scheduler's events only for pods whose PodScheduled condition says nothing (a few at most).
  int asked = 0;
  for (const auto& pod : pods.items) {
    if (asked >= 3 || pod_phase(pod) != "Pending" || !str(pod, "/spec/nodeName"_json_pointer).empty()) continue;
    const json* scheduled = condition(pod, "PodScheduled");
    if (scheduled != nullptr && !kube::string_field(*scheduled, "message").empty()) continue;
    kube::ListOptions pod_events;
    pod_events.field_selector = fmt::format("involvedObject.kind=Pod,involvedObject.name={}", kube::name_of(pod));
    GPUCTL_TRY_ASSIGN(kube::ListResult more, client.list(kube::paths::events(ns), pod_events));
    for (auto& e : more.items) events.items.push_back(std::move(e));
    ++asked;
  }
  // The nodes only for a pod the scheduler turned away: they name what stands in its way.
  if (pods_unschedulable(pods.items) && (!cache.nodes || now - cache.read_at >= kNodeListReuse)) {
    cache.nodes = job_status_detail::read_nodes_for_detail(client);
    cache.read_at = now;
  }
  const std::vector<json>* nodes = cache.nodes && pods_unschedulable(pods.items) ? &*cache.nodes : nullptr;
  JobSummary summary = summarize_job(*job, pods.items, events.items, now, nodes);
  job_cause_detail::LogCauseBudget budget;
  budget.attempts = job_cause_detail::kAttemptLogReadsMax;
  GPUCTL_TRY(job_cause_detail::add_log_causes(client, {&summary}, budget, causes));
  return summary;
}

}  // namespace

Result<JobSummary> fetch_job_summary(kube::Client& client, std::string_view ns, std::string_view name,
                                     util::TimePoint now) {
  NodeCache fresh;
  return fetch_summary(client, ns, name, now, fresh, nullptr);
}

Result<JobSummary> wait_for_job(kube::Client& client, std::string_view ns, std::string_view name,
                                const JobWaitOptions& options) {
  auto clock = options.clock ? options.clock : [] { return std::chrono::system_clock::now(); };
  auto sleep = options.sleep ? options.sleep : [](std::chrono::milliseconds d) { util::sleep_unless_cancelled(d); };
  // Ctrl-C or SIGTERM (util/cancel.hpp) stops the wait; the job is the cluster's and keeps running.
  auto stopped = [&](const std::optional<JobSummary>& seen) {
    return fail(Errc::cancelled,
                fmt::format("stopped waiting for job {}/{} ({}{}): it keeps running; see 'gpuctl jobs -n {}'", ns, name,
                            seen ? "still " + std::string(to_string(seen->phase)) : "not read yet",
                            util::cancelled() ? ", interrupted by " + util::cancel_signal_name() : "", ns));
  };
  const auto start = clock();
  std::optional<JobSummary> last;
  NodeCache nodes;
  job_cause_detail::LogCauseCache causes;  // each failed pod's log is read once
  for (;;) {
    auto summary = fetch_summary(client, ns, name, clock(), nodes, &causes);
    if (!summary && util::cancelled()) return stopped(last);
    if (!summary) {
      Error e = summary.error();
      if (e.is_not_found() && last) {
        e.message = fmt::format("job {}/{} was deleted while waiting for it to finish (last seen {})", ns, name,
                                to_string(last->phase));
      }
      return fail(std::move(e));
    }
    if (!last || last->phase != summary->phase || last->reason != summary->reason) {
      if (options.on_change) options.on_change(*summary);
    }
    if (options.on_poll) options.on_poll(*summary);
    if (summary->finished) return std::move(*summary);
    last = std::move(*summary);

    if ((options.cancelled && options.cancelled()) || util::cancelled()) return stopped(last);
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock() - start);
    auto pause = options.poll_interval;
    if (options.timeout.count() > 0) {
      if (elapsed >= options.timeout) {
        return fail(Errc::timeout,
                    fmt::format("job {}/{} is still {} after {}{}: it keeps running; see 'gpuctl jobs -n {}'", ns, name,
                                to_string(last->phase),
                                util::human_duration(std::chrono::duration_cast<std::chrono::seconds>(options.timeout)),
                                last->reason.empty() ? "" : " (" + last->reason + ")", ns));
      }
      pause = std::min(pause, options.timeout - elapsed);
    }
    sleep(pause);
  }
}

}  // namespace gpuctl::ops
