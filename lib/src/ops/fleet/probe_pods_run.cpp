// `--via pod`: one probe pod per node, at most `fanout` in flight, watched with one list of this
// run's pods per poll (never a GET per pod), read from its log when it ends, deleted on every path.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/fleet/probe_outcome.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/parallel.hpp"
#include "gpuctl/util/time.hpp"
#include "probe_pods_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Requests sent at once when many pods are created, read or deleted in one poll.
constexpr int kApiParallel = 16;
// A log is proxied through the kubelet, which may be gone: worth less than waiting.
constexpr std::chrono::seconds kLogReadTimeout{20};

std::string make_run_id() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

std::string default_owner() {
  const char* user = std::getenv("USER");
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return fmt::format("{}@{} pid={} started={}", user != nullptr && *user ? user : "unknown", host, ::getpid(),
                     util::format_rfc3339(std::chrono::system_clock::now()));
}

// The node's Ready condition as kube::node_readiness names it; "" when the node has none (an
// object read with fewer fields: it is tried).
std::string readiness_said(const json& node) {
  for (const auto& c : kube::node_conditions(node)) {
    if (c.type == "Ready") return kube::node_readiness(node);
  }
  return {};
}

// One node's probe pod while it is in flight.
struct InFlight {
  std::size_t index = 0;  // into the nodes
  std::string pod;
  Clock::time_point started;
  ProbePodVerdict last;  // from the newest list that had it
  bool listed = false;
};

// What to do with a pod after a poll.
enum class Next { keep, read_log, give_up };

class PodRun {
 public:
  PodRun(kube::Client& client, const PodProbeOptions& options, const std::vector<json>& nodes,
         const SourceProgress& progress)
      : client_(client), o_(options), nodes_(nodes), progress_(progress), probes_(nodes.size()) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      probes_[i].node = kube::name_of(nodes[i]);
      probes_[i].via = "pod";
    }
  }

  Result<std::vector<NodeProbe>> run() {
    Result<void> ran = loop();
    // Every pod made is deleted, whatever ended the run (an error, Ctrl-C).
    delete_pods(in_flight_);
    if (!ran) return fail(ran.error());
    for (std::size_t i = 0; i < probes_.size(); ++i) {
      if (!probes_[i].outcome.empty()) continue;
      probes_[i].outcome = "interrupted";
      probes_[i].message = fmt::format("interrupted by {} before its probe pod finished", util::cancel_signal_name());
    }
    return std::move(probes_);
  }

 private:
  Result<void> loop() {
    std::size_t next = 0;
    for (;;) {
      if (util::cancelled()) return {};
      GPUCTL_TRY(start_pods(next));
      if (in_flight_.empty() && next == nodes_.size()) return {};
      if (!util::sleep_unless_cancelled(o_.poll_interval)) return {};
      GPUCTL_TRY(poll());
    }
  }

  // Nodes that cannot run a pod (NotReady: no kubelet takes it) are answered without one; the
  // others get a pod each, up to `fanout` in flight.
  Result<void> start_pods(std::size_t& next) {
    std::vector<std::size_t> batch;
    while (next < nodes_.size() && in_flight_.size() + batch.size() < static_cast<std::size_t>(o_.fanout)) {
      std::size_t i = next++;
      if (std::string readiness = readiness_said(nodes_[i]); !readiness.empty() && readiness != "Ready") {
        finish(i, "unschedulable",
               fmt::format("the node is {}: its kubelet runs no pods, so no probe pod was made", readiness),
               Clock::now());
        continue;
      }
      batch.push_back(i);
    }
    std::vector<InFlight> made(batch.size());
    std::vector<detail::CreateRefusal> refused(batch.size());
    std::vector<bool> ok(batch.size(), false);
    util::parallel_for(batch.size(), std::min(kApiParallel, o_.fanout), [&](std::size_t k) {
      made[k].index = batch[k];
      made[k].started = Clock::now();
      json pod = build_probe_pod(probes_[batch[k]].node, o_);
      auto created = client_.create(kube::paths::pods(o_.namespace_name), pod);
      if (created) {
        made[k].pod = kube::name_of(*created);
        ok[k] = true;
      } else if (created.error().code != Errc::cancelled) {
        refused[k] = detail::classify_create_error(created.error(), o_);
      }
    });
    std::optional<Error> whole;
    for (std::size_t k = 0; k < batch.size(); ++k) {
      if (ok[k]) {
        in_flight_.push_back(std::move(made[k]));
      } else if (refused[k].whole_source) {
        if (!whole) whole = refused[k].whole_source;
      } else if (!refused[k].outcome.empty()) {
        finish(batch[k], refused[k].outcome, refused[k].message, made[k].started);
      }  // cancelled before it was sent: interrupted, as a node never started
    }
    if (whole) return fail(*whole);
    return {};
  }

  // One list of this run's pods; each pod in flight judged by its status and the deadline.
  Result<void> poll() {
    kube::ListOptions list;
    list.label_selector = detail::probe_pod_selector(o_.run_id);
    auto listed = client_.list(kube::paths::pods(o_.namespace_name), list);
    if (!listed) {
      if (listed.error().code == Errc::cancelled) return {};
      if (listed.error().is_forbidden()) return fail(detail::forbidden_error(listed.error(), o_, "list pods"));
      list_error_ = detail::one_line(listed.error().message, 200);  // a passing failure: said at the deadline
    }
    std::map<std::string, const json*> by_name;
    if (listed) {
      list_error_.clear();
      for (const auto& p : listed->items) by_name[kube::name_of(p)] = &p;
    }
    const auto now = Clock::now();
    std::vector<InFlight> ended;
    std::vector<Next> action;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      Next n = judge(*it, by_name, listed.has_value(), now);
      if (n == Next::keep) {
        ++it;
        continue;
      }
      ended.push_back(std::move(*it));
      action.push_back(n);
      it = in_flight_.erase(it);
    }
    return end_pods(ended, action);
  }

  Next judge(InFlight& f, const std::map<std::string, const json*>& by_name, bool listed, Clock::time_point now) {
    if (listed) {
      auto found = by_name.find(f.pod);
      if (found == by_name.end()) {
        if (f.listed) {  // it was there: someone else deleted it (or it was evicted and removed)
          f.last = {ProbePodStage::stuck, "probe_failed", "the probe pod was deleted before it finished", -1};
          return Next::give_up;
        }
      } else {
        f.listed = true;
        f.last = classify_probe_pod(*found->second);
      }
    }
    if (f.last.stage == ProbePodStage::finished) return Next::read_log;
    if (f.last.stage == ProbePodStage::stuck) return Next::give_up;
    if (now - f.started < o_.deadline) return Next::keep;
    return f.last.stage == ProbePodStage::running ? Next::read_log : Next::give_up;
  }

  // The ended pods: logs read (the finished ones, and the running ones at their deadline), then
  // every one deleted; reads and deletes in parallel.
  Result<void> end_pods(std::vector<InFlight>& ended, const std::vector<Next>& action) {
    std::vector<std::optional<Error>> refused(ended.size());
    util::parallel_for(ended.size(), std::min(kApiParallel, o_.fanout), [&](std::size_t k) {
      if (action[k] == Next::read_log) refused[k] = read_log(ended[k]);
      if (action[k] == Next::give_up) give_up(ended[k]);
    });
    delete_pods(ended);
    for (auto& r : refused) {
      if (r) return fail(*r);
    }
    return {};
  }

  // A pod that never ran the probe, or still waits at its deadline.
  void give_up(const InFlight& f) {
    if (f.last.stage == ProbePodStage::stuck) {
      finish(f.index, f.last.outcome, fmt::format("{} (pod {})", f.last.message, f.pod), f.started);
      return;
    }
    std::string why = !f.listed && !list_error_.empty() ? "its pods could not be listed: " + list_error_
                      : f.listed                        ? f.last.message
                                                        : "not seen in any list";
    finish(f.index, "not_started",
           fmt::format("the probe pod {} had not started after {}s: {}", f.pod,
                       std::chrono::duration_cast<std::chrono::seconds>(o_.deadline).count(), why),
           f.started);
  }

  // The container's log (at most output_cap bytes) read as the probe's transcript; a pod still
  // running at its deadline is timed_out with what it printed so far. 403: the whole source.
  std::optional<Error> read_log(const InFlight& f) {
    kube::Query query;
    query.add("container", std::string(kProbeContainerName)).add("limitBytes", std::to_string(o_.output_cap));
    auto log = client_.get_text(kube::paths::pod_log(o_.namespace_name, f.pod), query, kLogReadTimeout);
    if (!log && log.error().is_forbidden()) return detail::forbidden_error(log.error(), o_, "get pods/log");
    const bool timed_out = f.last.stage != ProbePodStage::finished;
    if (!log) {
      finish(f.index, timed_out ? "timed_out" : "probe_failed",
             fmt::format("{}the log of probe pod {} could not be read: {}",
                         timed_out ? fmt::format("still running after {}s; ", deadline_s()) : "", f.pod,
                         detail::one_line(log.error().message, 200)),
             f.started);
      return std::nullopt;
    }
    NodeProbe& p = probes_[f.index];
    ProbeOutput out{f.last.exit_code, *log, {}, log->size() >= o_.output_cap};
    if (timed_out) {
      p.outcome = "timed_out";
      p.message = fmt::format("the probe pod {} was still running after {}s (deleted)", f.pod, deadline_s());
      read_partial_probe_output(p, out);
    } else if (!gpu::parse_probe_transcript(*log).started) {
      // The image has no POSIX sh, or the container was killed before the script began.
      p.outcome = "probe_failed";
      p.exit_code = f.last.exit_code;
      p.message = fmt::format("the probe did not run in pod {} (exit {}{}): {}", f.pod, f.last.exit_code,
                              f.last.message.empty() ? "" : ", " + f.last.message,
                              log->empty() ? "no output; --probe-image needs a POSIX sh" : detail::one_line(*log, 200));
    } else {
      read_probe_output(p, out);
    }
    mark_done(f.index, f.started);
    return std::nullopt;
  }

  // Deleted at once (grace 0), also after Ctrl-C; a pod already gone is fine. A failed delete is
  // said in the node's message: --cleanup removes what is left.
  void delete_pods(const std::vector<InFlight>& pods) {
    util::parallel_for(pods.size(), std::min(kApiParallel, std::max(o_.fanout, 1)), [&](std::size_t k) {
      util::CleanupScope cleanup;
      auto gone = client_.remove(kube::paths::pod(o_.namespace_name, pods[k].pod),
                                 json{{"gracePeriodSeconds", 0}, {"propagationPolicy", "Background"}});
      if (gone || gone.error().is_not_found()) return;
      std::lock_guard guard(mutex_);
      NodeProbe& p = probes_[pods[k].index];
      p.message += fmt::format(
          "{}probe pod {}/{} could not be deleted ({}): gpuctl gpus --via pod --cleanup removes it",
          p.message.empty() ? "" : "; ", o_.namespace_name, pods[k].pod, detail::one_line(gone.error().message, 160));
    });
  }

  void finish(std::size_t i, std::string outcome, std::string message, Clock::time_point started) {
    {
      std::lock_guard guard(mutex_);
      probes_[i].outcome = std::move(outcome);
      probes_[i].message = std::move(message);
    }
    mark_done(i, started);
  }

  void mark_done(std::size_t i, Clock::time_point started) {
    std::lock_guard guard(mutex_);
    probes_[i].duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    ++done_;
    if (progress_) progress_(done_, nodes_.size());
  }

  long long deadline_s() const { return std::chrono::duration_cast<std::chrono::seconds>(o_.deadline).count(); }

  kube::Client& client_;
  const PodProbeOptions& o_;
  const std::vector<json>& nodes_;
  const SourceProgress& progress_;
  std::vector<NodeProbe> probes_;
  std::vector<InFlight> in_flight_;
  std::string list_error_;
  std::size_t done_ = 0;
  std::mutex mutex_;
};

class PodSource final : public NodeSource {
 public:
  PodSource(kube::Client& client, PodProbeOptions options) : client_(client), options_(std::move(options)) {}
  Via via() const override { return Via::pod; }
  Result<std::vector<NodeProbe>> read(const std::vector<json>& nodes, const SourceProgress& progress) override {
    PodProbeOptions o = options_;
    if (o.run_id.empty()) o.run_id = make_run_id();
    if (o.owner.empty()) o.owner = default_owner();
    o.fanout = std::max(o.fanout, 1);
    return PodRun(client_, o, nodes, progress).run();
  }

 private:
  kube::Client& client_;
  PodProbeOptions options_;
};

}  // namespace

std::unique_ptr<NodeSource> make_pod_source(kube::Client& client, PodProbeOptions options) {
  return std::make_unique<PodSource>(client, std::move(options));
}

}  // namespace gpuctl::ops
