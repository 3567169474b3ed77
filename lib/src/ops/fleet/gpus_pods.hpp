#pragma once
// The pods `gpuctl gpus` shows beside each probed node: read while the probe runs, and only those
// on the chosen nodes kept.
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/client.hpp"

namespace gpuctl::ops {

struct ChosenPods {
  std::vector<nlohmann::json> pods;  // non-terminal pods bound to a chosen node, projected
  std::vector<std::string> skipped;  // pods with a field of the wrong type ("pod ns/x skipped: ...")
};

// The non-terminal pods on `chosen` (node names). `per_node`: one list per node (see
// kPerNodePodListMax in gpus.hpp) instead of one list of the cluster's bound pods. `on_answer` is called after
// each page is folded in (the caller waits for the first before it starts ssh).
Result<ChosenPods> read_chosen_pods(kube::Client& client, const std::set<std::string>& chosen, bool per_node,
                                    const std::function<void()>& on_answer);

}  // namespace gpuctl::ops
