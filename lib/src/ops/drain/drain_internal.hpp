#pragma once
// Helpers shared by the drain*.cpp files, and the one node's drain (NodeDrainer), whose steps live
// in drain_node.cpp (cordon, choose, the evict-and-wait loop) and drain_evict.cpp (one eviction
// pass, the wait for pods to go); not part of the library's interface.
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/drain/drain.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::drain_detail {

using Clock = std::chrono::steady_clock;

// Ctrl-C or SIGTERM (util/cancel.hpp), or the caller's own flag: start nothing new.
bool stop_requested(const DrainOptions& o);

// "interrupted by SIGINT", or "interrupted" when no signal is known.
std::string interrupted_by();

// A duration as people read it ("5s", "10m").
std::string seconds_text(std::chrono::milliseconds d);

// "ns/name" of a pod, and its metadata.uid.
std::string key_of(const nlohmann::json& pod);
std::string uid_of(const nlohmann::json& pod);

// Groups "ns/a", "ns/b" by message: "message: ns/a, ns/b; other: ns/c".
std::string grouped(const std::vector<std::pair<std::string, std::string>>& message_and_pod);

// Which DaemonSets (namespace, name) of these pods no longer exist (one GET per DaemonSet).
Result<std::vector<std::pair<std::string, std::string>>> missing_daemonsets(kube::Client& client,
                                                                            const std::vector<nlohmann::json>& pods);

// The pods bound to `node` that match `selector`; the list's resourceVersion when asked, for a
// watch that starts where the list ended.
Result<std::vector<nlohmann::json>> pods_on(kube::Client& client, const std::string& node, const std::string& selector,
                                            std::string* resource_version = nullptr);

// The drain of one node, from the cordon to the last pod gone. Every step either moves on or
// finishes the result (failed, timed out, interrupted) and says so by returning false.
class NodeDrainer {
 public:
  NodeDrainer(kube::Client& client, const nlohmann::json& node, const DrainOptions& options);

  NodeDrainResult run();

 private:
  struct Target {
    std::string ns, name, uid;
    std::string key() const { return ns + "/" + name; }
  };

  // drain_node.cpp: the steps, in order, and how a drain ends.
  void drain();
  bool cordon();
  bool choose_pods();
  std::optional<bool> deletes_instead_of_evicting();
  void evict_until_gone(bool use_delete);

  void progress(const std::string& message);
  void sleep(std::chrono::milliseconds d);
  bool cancelled() const;
  std::optional<std::chrono::milliseconds> left() const;
  void finish(DrainOutcome outcome, std::string message);
  void finish_interrupted();
  bool stop(DrainOutcome outcome, std::string message);
  bool stop_interrupted();
  std::vector<std::pair<std::string, std::string>> last_block_vec() const;
  std::string waiting_text() const;

  // drain_evict.cpp: one eviction pass, and the wait for evicted pods to go.
  bool evict_round(bool use_delete);
  Result<nlohmann::json> send_removal(const Target& t, bool use_delete);
  std::string budget_text(const Target& t, const Error& e);
  void gone(const std::string& key);
  void wait_for_gone(std::chrono::milliseconds window);

  kube::Client& client_;
  const nlohmann::json& node_;
  const DrainOptions& o_;
  std::string name_;
  NodeDrainResult result_;
  Clock::time_point start_;
  std::vector<Target> pending_;
  std::map<std::string, Target> waiting_;
  std::vector<std::pair<std::string, std::string>> failed_;  // key, message
  std::map<std::string, std::string> last_block_;            // key -> last PDB refusal
  std::size_t in_flight_ = 0;
};

}  // namespace gpuctl::ops::drain_detail
