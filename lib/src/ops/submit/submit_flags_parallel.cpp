// The flags that make a job of several pods (a distributed job over --nodes, or a plain parallel
// one), put it in a Kueue queue, or keep its retries off nodes where it failed for the GPU.
#include <fmt/format.h>

#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "submit_flags_internal.hpp"

namespace gpuctl::ops::submit_flags_detail {

namespace {

// Pods of one job: the Job controller's own bound on completions for an Indexed job is 100000;
// a job of more nodes than this is a typing mistake, not a training run.
constexpr std::int64_t kMaxNodes = 10000;
constexpr std::int64_t kMaxPods = 100000;

Result<void> parse_distributed(const SubmitFlags& f, SubmitSpec& s) {
  if (!f.gpus_per_node.empty()) {
    if (!f.gpus.empty()) {
      return usage(
          "--gpus and --gpus-per-node both say the GPUs of each pod; give one (with --nodes each pod has a node of "
          "its own, so --gpus-per-node is the usual spelling)");
    }
    GPUCTL_TRY_ASSIGN(s.gpus, whole_number("--gpus-per-node", f.gpus_per_node, 0, 1024));
  }
  if (f.nodes.empty()) return {};
  GPUCTL_TRY_ASSIGN(s.nodes, whole_number("--nodes", f.nodes, 1, kMaxNodes));
  if (!f.gpus.empty()) {
    return usage(fmt::format(
        "--nodes {} with --gpus is ambiguous (GPUs per pod or in all?): give --gpus-per-node, the GPUs each of the "
        "{} pods gets on its node",
        f.nodes, f.nodes));
  }
  if (!f.completions.empty() || !f.parallelism.empty()) {
    return usage(fmt::format("--nodes {} runs {} pods at once, one per node: leave out --completions and --parallelism",
                             f.nodes, f.nodes));
  }
  // The job's name is the rendezvous Service's name too, and a Service name must start with a letter.
  if (!f.name.empty() && !(f.name.front() >= 'a' && f.name.front() <= 'z')) {
    return usage(fmt::format(
        "job name {:?}: with --nodes the name also names the rendezvous Service, which must start with a letter",
        f.name));
  }
  return {};
}

Result<void> parse_plain_parallel(const SubmitFlags& f, SubmitSpec& s) {
  if (!f.completions.empty()) {
    GPUCTL_TRY_ASSIGN(s.completions, whole_number("--completions", f.completions, 1, kMaxPods));
  }
  if (!f.parallelism.empty()) {
    GPUCTL_TRY_ASSIGN(s.parallelism, whole_number("--parallelism", f.parallelism, 1, kMaxPods));
  }
  return {};
}

Result<void> parse_queue(const SubmitFlags& f, SubmitSpec& s) {
  if (f.queue.empty()) return {};
  // A LocalQueue's name, carried in a label: a DNS subdomain that is also a label value.
  if (auto problem = kube::paths::dns_subdomain_problem(f.queue); !problem.empty())
    return usage(fmt::format("--queue {:?} is not a LocalQueue name: {}", f.queue, problem));
  if (!is_label_value(f.queue))
    return usage(fmt::format("--queue {:?}: a queue name is carried in a label, so at most 63 characters", f.queue));
  s.queue = f.queue;
  return {};
}

}  // namespace

Result<void> parse_parallel_flags(const SubmitFlags& f, SubmitSpec& s) {
  GPUCTL_TRY(parse_distributed(f, s));
  GPUCTL_TRY(parse_plain_parallel(f, s));
  GPUCTL_TRY(parse_queue(f, s));
  s.avoid_failed_nodes = f.avoid_failed_nodes;
  return {};
}

}  // namespace gpuctl::ops::submit_flags_detail
