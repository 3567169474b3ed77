#include "gpus_pods.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/protobuf.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;

constexpr const char* kNotFinished = "status.phase!=Succeeded,status.phase!=Failed";
constexpr std::size_t kPerNodeReaders = 4;  // threads reading per-node lists

// Folds pages into ChosenPods: a malformed pod is named, a pod on another node dropped.
struct PodFold {
  const std::set<std::string>& chosen;
  ChosenPods out;
  std::size_t seen = 0;

  void add(json& pod) {
    std::size_t index = seen++;
    if (auto problem = kube::pod_shape_problem(pod); !problem.empty()) {
      out.skipped.push_back(fmt::format("{} skipped: {}", kube::object_label("pod", pod, index), problem));
      return;
    }
    if (chosen.contains(kube::string_field(kube::field(pod, "spec"), "nodeName"))) out.pods.push_back(std::move(pod));
  }
};

Result<void> read_into(kube::Client& client, const std::string& field_selector, PodFold& fold,
                       const std::function<void()>& on_answer) {
  kube::ListOptions list;
  list.field_selector = field_selector;
  // The inventory's fields are all that the view reads of a pod; whole pods are ~90 KiB each.
  list.fields = kube::pod_request_fields();
  list.protobuf = &kube::proto::pod();
  kube::ListPageSink sink;
  sink.on_items = [&fold, &on_answer](std::vector<json>& pods) -> Result<void> {
    for (json& pod : pods) fold.add(pod);
    on_answer();
    return {};
  };
  // A restart re-reads this list from its beginning: forget what it handed so far (pods of
  // earlier per-node lists stay; they are other nodes').
  std::size_t kept_before = fold.out.pods.size();
  std::size_t skipped_before = fold.out.skipped.size();
  sink.on_restart = [&fold, kept_before, skipped_before] {
    fold.out.pods.resize(kept_before);
    fold.out.skipped.resize(skipped_before);
  };
  GPUCTL_TRY(client.list_pages(kube::paths::pods(), list, sink));
  return {};
}

}  // namespace

Result<ChosenPods> read_chosen_pods(kube::Client& client, const std::set<std::string>& chosen, bool per_node,
                                    const std::function<void()>& on_answer) {
  if (!per_node) {
    PodFold fold{chosen, {}};
    GPUCTL_TRY(read_into(client, fmt::format("spec.nodeName!=,{}", kNotFinished), fold, on_answer));
    return std::move(fold.out);
  }
  // One small list per node, from a few threads: each costs the API server a lookup in its
  // node index and a round trip, and 256 of them one after another would be 256 round trips.
  const std::vector<std::string> nodes(chosen.begin(), chosen.end());
  const std::size_t readers = std::min<std::size_t>(kPerNodeReaders, nodes.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<PodFold> folds(readers, PodFold{chosen, {}});
  std::vector<Result<void>> results(readers);
  auto read_some = [&](std::size_t r) {
    for (std::size_t i = next++; i < nodes.size() && !failed; i = next++) {
      results[r] = read_into(client, fmt::format("spec.nodeName={},{}", nodes[i], kNotFinished), folds[r], on_answer);
      if (!results[r]) failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t r = 1; r < readers; ++r) threads.emplace_back(read_some, r);
  if (readers > 0) read_some(0);
  for (auto& t : threads) t.join();
  ChosenPods out;
  for (std::size_t r = 0; r < readers; ++r) {
    GPUCTL_TRY(results[r]);
    for (auto& pod : folds[r].out.pods) out.pods.push_back(std::move(pod));
    for (auto& s : folds[r].out.skipped) out.skipped.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpuctl::ops
