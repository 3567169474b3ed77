// queue and gang: whether a job handed to Kueue can be admitted at all, and what starts the pods
// of a distributed job together (nothing, without a gang scheduler: said, not hidden).
#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/discovery.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "submit_preflight_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace {

using namespace preflight_detail;

constexpr std::string_view kKueueGroup = "kueue.x-k8s.io";

std::string queue_of(const json& job) {
  return string_field(field(field(job, "metadata"), "labels"), kKueueQueueLabel);
}

// A job of one pod per node on several nodes, for the default scheduler (another scheduler, such
// as Volcano's or KAI's, may gang them itself).
bool runs_spread_apart(const json& job) {
  std::string scheduler = string_field(pod_spec(job), "schedulerName");
  return (scheduler.empty() || scheduler == "default-scheduler") && one_pod_per_node(job) &&
         concurrent_pods(job, false) > 1;
}

std::string queue_names(const KueueView& kueue) {
  return kueue.local_queues.empty() ? std::string("none") : join(kueue.local_queues, ", ");
}

}  // namespace

std::optional<KueueView> read_kueue(kube::Client& client, const json& job) {
  if (queue_of(job).empty() && !runs_spread_apart(job)) return std::nullopt;
  auto version = kube::served_version(client, kKueueGroup, "localqueues");
  if (!version) return std::nullopt;
  KueueView view;
  view.served = !version->empty();
  if (!view.served) return view;
  auto queues = client.list(
      kube::paths::resources(fmt::format("{}/{}", kKueueGroup, *version), "localqueues", true, job_namespace(job)));
  if (!queues) return view;  // 403: the queue's existence stays unknown, never refused on
  view.queues_listed = true;
  for (const auto& q : queues->items) view.local_queues.push_back(kube::name_of(q));
  std::sort(view.local_queues.begin(), view.local_queues.end());
  return view;
}

std::vector<PreflightFinding> check_queue(const PreflightInput& input) {
  const std::string queue = queue_of(input.job);
  if (queue.empty() || !input.kueue) return {};
  const KueueView& kueue = *input.kueue;
  if (!kueue.served) {
    return {refusal("queue",
                    fmt::format("the job is for Kueue's LocalQueue {:?} ({}), but this cluster does not serve Kueue "
                                "(no {} API): the job would stay suspended for ever; install Kueue, or leave out "
                                "--queue (and the label)",
                                queue, kKueueQueueLabel, kKueueGroup))};
  }
  if (!kueue.queues_listed) return {};
  if (std::find(kueue.local_queues.begin(), kueue.local_queues.end(), queue) != kueue.local_queues.end()) return {};
  return {refusal("queue", fmt::format("namespace {} has no LocalQueue {:?}, so Kueue would never admit the job; its "
                                       "LocalQueues: {} (kubectl get localqueues -n {})",
                                       job_namespace(input.job), queue, queue_names(kueue), job_namespace(input.job)))};
}

std::vector<PreflightFinding> check_gang(const PreflightInput& input) {
  if (!queue_of(input.job).empty() || !runs_spread_apart(input.job) || !input.kueue) return {};
  const std::int64_t pods = concurrent_pods(input.job, false);
  const std::string what = fmt::format(
      "the {} pods are scheduled one at a time, not as a gang: some may start long after the others (or not at all "
      "while the GPUs are busy), and those started wait at the rendezvous holding their GPUs",
      pods);
  if (!input.kueue->served) {
    return {warning("gang", fmt::format("no gang scheduler here (Kueue is not installed): {}", what))};
  }
  return {warning("gang", fmt::format("{}; pass --queue LOCALQUEUE and Kueue admits them together (LocalQueues in {}: "
                                      "{})",
                                      what, job_namespace(input.job), queue_names(*input.kueue)))};
}

}  // namespace gpuctl::ops
