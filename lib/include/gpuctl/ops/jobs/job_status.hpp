#pragma once
// What a batch/v1 Job is doing, in plain words: its phase from the Job's conditions, the GPUs it
// asks for, where its pods run, and why it pends (the scheduler's verdict, quota refusals,
// suspension) or why it failed (the Failed condition and the failed container's exit code).
// summarize_job is pure; fetch_job_summary and wait_for_job read the cluster.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/common/gpu_failure_text.hpp"
#include "gpuctl/ops/common/placement_blockers.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

enum class JobPhase { pending, running, succeeded, failed, suspended };
// "Pending", "Running", "Succeeded", "Failed", "Suspended".
std::string_view to_string(JobPhase phase);

// One "<count> <reason>" entry of the scheduler's verdict: {2, "Insufficient nvidia.com/gpu"}.
// nodes is 0 for entries that name no count ("pod has unbound immediate PersistentVolumeClaims").
struct SchedulingReason {
  int nodes = 0;
  std::string reason;
};

struct SchedulingVerdict {
  int available = 0;  // nodes that fit ("0" of "0/3 nodes are available")
  int total = 0;      // nodes considered; 0 when the message does not say (pre-1.8 format)
  std::vector<SchedulingReason> reasons;
  std::string preemption;  // the text after ". preemption: ", "" when absent
};

// Finds the scheduler's verdict anywhere in `message` (a PodScheduled condition message, an event
// note, a `kubectl describe` line): "0/3 nodes are available: 1 node(s) had untolerated taint
// {k: }, 2 Insufficient nvidia.com/gpu. preemption: ...", old servers' trailing "..", and the
// pre-1.8 "No nodes are available that match all of the following predicates:: Insufficient
// nvidia.com/gpu (2)." nullopt when the text holds neither.
std::optional<SchedulingVerdict> parse_scheduling_message(std::string_view message);

// Plain words for a verdict, e.g. "no node can take it now (3 nodes): 2 have too few free
// nvidia.com/gpu, 1 has a taint it does not tolerate (node-role.kubernetes.io/control-plane)".
// Reasons gpuctl does not know are kept as the scheduler wrote them.
std::string explain_scheduling(const SchedulingVerdict& verdict);

// What stands in the way of a pending pod the scheduler cannot place, named: judged against the
// node list by the scheduler's own rules (ops/common/placement_blockers.hpp), not read from its text.
struct UnboundClaim {
  std::string kind;    // "ResourceClaim" or "PersistentVolumeClaim"
  std::string name;    // "" when the claim a template makes has not been made yet
  std::string source;  // how the pod names it: "spec.resourceClaims[gpus]", "from template gpus", "volume data"
};
struct UnmatchedSelector {
  std::string selector;             // kube::describe_placement of the pod
  std::vector<LabelValues> labels;  // its keys no node satisfies, with the values nodes have
};
struct PendingDetail {
  std::string pod;                // the pod judged (the first unschedulable one by name)
  std::string scheduler_message;  // the scheduler's words about it
  // Taints it does not tolerate on nodes it could otherwise use (that offer its nvidia.com/*
  // request, when some do), each with those nodes; empty when the nodes were not read.
  std::vector<TaintedNodes> untolerated_taints;
  std::optional<UnmatchedSelector> unmatched_selector;  // when its placement matches no node
  // Its claims, when the scheduler's words are about claims (DRA's or volumes').
  std::vector<UnboundClaim> unbound_claims;
};

// explain_scheduling with what `detail` names put beside the entries it explains: "2 have taints
// it does not tolerate (gpu-maintenance=true:NoSchedule on gx-0, gx-1)".
std::string explain_scheduling(const SchedulingVerdict& verdict, const PendingDetail& detail);

struct JobFailure {
  std::string
      reason;  // the Job's Failed condition reason: BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy, ...
  std::string message;           // the condition's message
  std::optional<int> exit_code;  // the failed container's exit code (latest failed pod), when one terminated non-zero
  std::string pod, container;
  std::string termination_reason;  // the container's terminated reason: "Error", "OOMKilled", ... ("" when none)
  // What the container wrote to its termination log (terminationMessagePath, or the log's tail with
  // FallbackToLogsOnError), as the kubelet reports it: often the one line that says why
  // ("nvml error: driver/library version mismatch"). "" when none.
  std::string termination_message;
  std::string node;  // where that pod ran
  // What the termination message says about the GPU (CUDA, NVML, NCCL, Xid; see
  // ops/common/gpu_failure_text.hpp), std::nullopt when it says nothing about it. When it says
  // nothing, the readers (fetch_job_summary, collect_jobs) look in the last lines of that
  // container's log (job_failure_cause.hpp).
  std::optional<TextClass> gpu_cause;
  // Where gpu_cause was found, and the line that named it (trimmed, bounded); meaningful only
  // with gpu_cause.
  GpuCauseSource gpu_cause_source = GpuCauseSource::termination_message;
  std::string gpu_cause_evidence;
};

struct JobSummary {
  std::string namespace_name, name;
  JobPhase phase = JobPhase::pending;
  // True once the Job has a Complete or Failed condition (the controller is done with it).
  // A Job with only FailureTarget or SuccessCriteriaMet is already Failed/Succeeded in `phase`
  // but not yet finished: its pods are still being terminated.
  bool finished = false;
  bool gpu_job = false;           // the pod template requests some nvidia.com/* resource
  std::int64_t gpus_per_pod = 0;  // nvidia.com/gpu (kube::pod_requests over the template)
  // gpus_per_pod * parallelism (what the job asks for at once); parallelism is capped at
  // completions when that is smaller, as the Job controller never runs more pods than that.
  std::int64_t gpus = 0;
  std::vector<std::string> nodes;  // where its pods run/ran, sorted, unique
  // The node of each failed attempt (pod), oldest first; evicted or preempted pods left out.
  std::vector<std::string> failed_nodes;
  // The same attempts, one for one with failed_nodes: pod, node, the failed container's exit code
  // and, when found, its GPU cause. summarize_job fills in what termination messages say; the
  // readers add what the newest attempts' logs say (fetch_job_summary: the 5 newest;
  // collect_jobs: the failure's pod only).
  std::vector<FailedAttempt> failed_attempts;
  int active = 0, succeeded = 0, failed = 0;
  std::string created_at, started_at, finished_at;  // RFC 3339, "" when unknown
  std::int64_t age_seconds = 0;
  std::optional<std::int64_t> duration_seconds;  // start to finish, or to now while running
  std::string reason;                            // plain words for pending, suspended and failed jobs, "" otherwise
  std::optional<PendingDetail> pending;          // a pending job whose pod the scheduler cannot place
  std::optional<JobFailure> failure;
};

// "GPU cause: <what it means> on node <node> (<what to do>)", "" when the failure names none;
// a cause found in the log ends with "; its log says: <the line>".
std::string gpu_cause_text(const JobFailure& failure);

// True when the pod template (spec.template) requests any nvidia.com/* resource.
bool job_requests_gpu(const nlohmann::json& job);

// Pure: from the Job, its pods (label batch.kubernetes.io/job-name / controller-uid) and the
// events about the job and its pods (other events are ignored, so a namespace's events may be
// passed whole). `now` fixes ages and running durations.
// `nodes`, when given, names what stands in the way of an unschedulable pod (JobSummary::pending).
JobSummary summarize_job(const nlohmann::json& job, const std::vector<nlohmann::json>& pods,
                         const std::vector<nlohmann::json>& events, util::TimePoint now,
                         const std::vector<nlohmann::json>* nodes = nullptr);

// True when some pod waits unscheduled with the scheduler's verdict (PodScheduled False,
// Unschedulable): the node list then says why (summarize_job's `nodes`).
bool pods_unschedulable(const std::vector<nlohmann::json>& pods);

// The label selector of a Job's pods: spec.selector.matchLabels, else job-name=<name>.
std::string job_pod_selector(const nlohmann::json& job);

// GETs the Job, lists its pods and the events about the Job, and summarizes; then, for a GPU job,
// reads the log tails of its newest failed pods (at most 5, 4 at a time) whose termination
// messages name no GPU cause. A log that cannot be read leaves the cause unknown. A Job that does
// not exist is the API's NotFound error with a message naming the job.
Result<JobSummary> fetch_job_summary(kube::Client& client, std::string_view ns, std::string_view name,
                                     util::TimePoint now);

struct JobWaitOptions {
  std::chrono::milliseconds timeout{0};  // 0: wait forever
  std::chrono::milliseconds poll_interval{1000};
  std::function<void(const JobSummary&)>
      on_change;                    // progress: called on the first summary and whenever phase or reason changes
  std::function<bool()> cancelled;  // checked between polls
  // Called after every poll, before the finished check, so it sees the last state too
  // (gpuctl submit --follow streams the logs of newly started pods from here).
  std::function<void(const JobSummary&)> on_poll;
  // Seams for tests: defaults are std::this_thread::sleep_for and std::chrono::system_clock::now.
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<util::TimePoint()> clock;
};

// Returns the final summary once the Job is Complete or Failed (conditions, not counters);
// Errc::timeout when the timeout passes first; Errc::cancelled when `cancelled` says so; the job's
// NotFound error (with a clear message) if it does not exist or is deleted meanwhile.
Result<JobSummary> wait_for_job(kube::Client& client, std::string_view ns, std::string_view name,
                                const JobWaitOptions& options);

// One item of gpuctl's GPUJobList schema (see ops/jobs.hpp).
nlohmann::json to_json(const JobSummary& summary);

}  // namespace gpuctl::ops
