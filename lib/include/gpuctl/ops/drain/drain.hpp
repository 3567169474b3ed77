#pragma once
// Draining nodes with kubectl's semantics (k8s.io/kubectl/pkg/drain): cordon first, choose the
// pods through a fixed chain of small pure filters (policies as data), evict them through the
// policy/v1 Eviction API (or delete them with --disable-eviction), retry evictions a
// PodDisruptionBudget refuses (429) naming the budget, and wait for the pods to go away with a
// watch (a replacement with the same name and a new UID counts as gone). A dry run builds the
// same decisions into a plan and writes nothing. Progress is reported through callbacks.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops {

// ---- Filters ----------------------------------------------------------------------------------

// kubectl's drain flags that decide which pods may go.
struct DrainPolicy {
  bool ignore_daemonsets = false;     // --ignore-daemonsets: skip DaemonSet pods instead of refusing
  bool delete_emptydir_data = false;  // --delete-emptydir-data: evict pods with emptyDir volumes
  bool force = false;                 // --force: evict pods no controller would recreate
  bool gpu_pods_only = false;         // --gpu-pods-only: leave pods without nvidia.com/* requests
  // --skip-wait-for-delete-timeout: pods terminating for longer than this are skipped; 0: never.
  int skip_wait_for_delete_timeout_seconds = 0;
};

enum class PodAction {
  evict,    // will be evicted (or deleted)
  skip,     // left on the node, which does not stop the drain (mirror, ignored DaemonSet pods)
  refuse,   // stops the drain of its node: nothing there is evicted (kubectl's errors)
  blocked,  // plan only: would be evicted, but its PodDisruptionBudget allows no disruption now
};
std::string_view to_string(PodAction action);

struct PodVerdict {
  PodAction action = PodAction::evict;
  std::string reason;   // short, stable: "daemonset", "mirror", "local-storage", "unmanaged", ...
  std::string message;  // for a person, with the flag that changes it
};

// What a filter may need besides the pod; gathered by the caller (I/O), so filters stay pure.
struct PodFacts {
  // For a pod whose controller is a DaemonSet: whether that DaemonSet still exists.
  bool daemonset_exists = true;
  std::chrono::system_clock::time_point now{};
};

// One filter: nullopt lets the pod through to the next filter; a verdict ends the chain.
using PodFilter = std::optional<PodVerdict> (*)(const nlohmann::json& pod, const DrainPolicy& policy,
                                                const PodFacts& facts);

std::optional<PodVerdict> filter_long_deleted(const nlohmann::json& pod, const DrainPolicy& policy,
                                              const PodFacts& facts);
std::optional<PodVerdict> filter_daemonset(const nlohmann::json& pod, const DrainPolicy& policy, const PodFacts& facts);
std::optional<PodVerdict> filter_mirror(const nlohmann::json& pod, const DrainPolicy& policy, const PodFacts& facts);
std::optional<PodVerdict> filter_local_storage(const nlohmann::json& pod, const DrainPolicy& policy,
                                               const PodFacts& facts);
std::optional<PodVerdict> filter_unmanaged(const nlohmann::json& pod, const DrainPolicy& policy, const PodFacts& facts);
std::optional<PodVerdict> filter_non_gpu(const nlohmann::json& pod, const DrainPolicy& policy, const PodFacts& facts);

// kubectl's order, then --gpu-pods-only.
const std::vector<PodFilter>& drain_filters();
// Runs the chain: the first verdict, else evict (with reason "finished" for Succeeded/Failed).
PodVerdict classify_pod(const nlohmann::json& pod, const DrainPolicy& policy, const PodFacts& facts);

// The controlling owner reference, or null.
nlohmann::json controller_of(const nlohmann::json& pod);
// Requests any nvidia.com/* resource; the count of nvidia.com/gpu.
bool requests_gpus(const nlohmann::json& pod);
std::int64_t gpu_request(const nlohmann::json& pod);

// ---- PodDisruptionBudgets ---------------------------------------------------------------------

struct PdbBudget {
  std::string ns;
  std::string name;
  std::int64_t disruptions_allowed = 0;
  std::int64_t desired_healthy = 0;
  std::int64_t current_healthy = 0;
  std::int64_t expected_pods = 0;
  bool observed = true;  // status.observedGeneration >= metadata.generation
};
PdbBudget pdb_budget(const nlohmann::json& pdb);
// "pdb train/ddp-pdb allows 0 disruptions, needs 4 healthy, has 4"
std::string describe_budget(const PdbBudget& budget);
// Does this label selector (matchLabels + matchExpressions) select these labels? An empty or
// null selector selects nothing, as the eviction API treats PDBs.
bool selector_matches(const nlohmann::json& selector, const nlohmann::json& labels);
// The PDBs (of any namespace in `pdbs`) that govern this pod: same namespace, selector matches.
std::vector<const nlohmann::json*> pdbs_for_pod(const nlohmann::json& pod, const std::vector<nlohmann::json>& pdbs);

// ---- The plan (--dry-run) ---------------------------------------------------------------------

struct PodPlan {
  std::string ns;
  std::string name;
  PodAction action = PodAction::evict;
  std::string reason;
  std::string message;
  std::vector<PdbBudget> pdbs;  // governing PDBs (more than one: the eviction API refuses, 500)
  std::int64_t gpus = 0;        // nvidia.com/gpu requested
  bool gpu_pod = false;         // requests any nvidia.com/* resource
  // GPU pods: free nvidia.com/gpu of the same product on other schedulable Ready nodes that are
  // not being drained.
  std::string product;
  std::int64_t free_gpus_elsewhere = 0;
  bool fits_elsewhere = true;
  // Pods holding DRA devices through their claims: whether every claim's requests could be
  // allocated again on one node that stays (free, untainted devices its classes and selectors
  // match). dra_fit is "fits", "no-room" or "unknown" (a selector gpuctl cannot evaluate).
  std::int64_t dra_devices = 0;
  std::string dra_fit;
  std::string dra_node;     // where it would fit
  std::string dra_message;  // why not, or what could not be judged
};

struct NodePlan {
  std::string node;
  bool already_cordoned = false;
  std::vector<PodPlan> pods;
  bool completes = true;  // no pod refused or blocked
  std::string message;
};

struct DrainPlan {
  std::vector<NodePlan> nodes;
};

struct PlanInputs {
  std::vector<nlohmann::json> nodes;                                    // the nodes to drain
  std::vector<std::vector<nlohmann::json>> pods;                        // pods on each, same order
  std::vector<nlohmann::json> pdbs;                                     // every PDB
  std::optional<NodeInventory> inventory;                               // for room elsewhere; nullopt: not checked
  std::optional<DraInventory> dra;                                      // DRA devices and claims, where served
  std::vector<std::pair<std::string, std::string>> missing_daemonsets;  // (ns, name) that do not exist
};

// Pure: room for a pod's DRA claims on the nodes that stay, each device promised once across the
// pods of one plan (`promised` holds "driver/pool/device" keys). Sets dra_* of `pod`.
struct DraRoom {
  const DraInventory* dra = nullptr;
  std::set<std::string> staying_nodes;                                   // schedulable, Ready, not drained
  std::map<std::string, std::vector<const DraDevice*>> devices_by_node;  // of `dra`, node-local ones
  std::set<std::string> promised;
};
void plan_dra_move(PodPlan& pod, DraRoom& room);

// Pure: what a drain would do with every pod.
DrainPlan build_drain_plan(const PlanInputs& inputs, const DrainPolicy& policy,
                           std::chrono::system_clock::time_point now);
// Reads nodes' pods, PDBs, DaemonSets and the GPU inventory; writes nothing.
Result<DrainPlan> plan_drain(kube::Client& client, const std::vector<nlohmann::json>& nodes, const DrainPolicy& policy,
                             const std::string& pod_selector);
// gpuctl's schema: apiVersion gpuctl.io/v1alpha1, kind DrainPlan.
nlohmann::json to_json(const DrainPlan& plan);

// ---- Carrying out a drain -----------------------------------------------------------------------

// A bound on evictions in flight (accepted but the pod not yet gone) shared by parallel drains.
class EvictionSlots {
 public:
  explicit EvictionSlots(int capacity) : free_(capacity) {}
  bool try_acquire();
  void release();

 private:
  std::mutex mutex_;
  int free_;
};

struct DrainProgress {
  std::string node;
  std::string message;  // "cordoned: reason \"ECC\"", "evicting ml/a", "waiting for 3 pod(s) to go: ..."
  int remaining = 0;    // pods still to go on the node
};

struct DrainOptions {
  DrainPolicy policy;
  std::string pod_selector;
  int grace_period_seconds = -1;                         // -1: the pod's own terminationGracePeriodSeconds
  std::chrono::milliseconds timeout{0};                  // per node, evicting and waiting; 0: no limit
  bool disable_eviction = false;                         // DELETE instead of evict (skips PDBs)
  CordonRequest cordon;                                  // reason, by, at
  std::chrono::milliseconds retry_delay{5000};           // after a 429, as kubectl
  EvictionSlots* slots = nullptr;                        // shared bound on evictions in flight; null: none
  std::function<void(std::chrono::milliseconds)> sleep;  // tests; default sleeps
  std::function<void(const DrainProgress&)> on_progress;
  // Stops the drain as Ctrl-C does (util/cancel.hpp, always honoured): nothing new is started,
  // accepted evictions stand, the node stays cordoned, the result says interrupted.
  const std::atomic<bool>* cancel = nullptr;
};

enum class DrainOutcome { drained, failed, timed_out, interrupted };
std::string_view to_string(DrainOutcome outcome);

struct NodeDrainResult {
  std::string node;
  DrainOutcome outcome = DrainOutcome::failed;
  std::string cordon;  // "cordoned", "already cordoned", "failed"
  int evicted = 0;     // pods evicted or deleted that are now gone
  int skipped = 0;
  std::vector<std::string> remaining;  // ns/name still on the node that should have gone
  std::chrono::milliseconds elapsed{0};
  std::string message;
};

// Whether the server offers pods/eviction (GET /api/v1 discovery).
Result<bool> eviction_supported(kube::Client& client);

// Cordons, evicts and waits. Never throws; failures are in the result.
NodeDrainResult drain_node(kube::Client& client, const nlohmann::json& node, const DrainOptions& options);

// Drains nodes, at most `max_concurrent` at once (threads), in the given order. Once
// interrupted, the nodes not started yet are results with outcome interrupted and cordon "-".
std::vector<NodeDrainResult> drain_nodes(kube::Client& client, const std::vector<nlohmann::json>& nodes,
                                         const DrainOptions& options, int max_concurrent);

// ---- Rolling maintenance ------------------------------------------------------------------------

struct RollingOptions {
  DrainOptions drain;
  int max_unavailable = 1;
  std::string exec;  // run as /bin/sh -c EXEC sh NODE, with GPUCTL_NODE=NODE; empty: none
  std::optional<std::chrono::milliseconds> exec_timeout;
  bool uncordon = false;
  std::chrono::milliseconds wait_ready{0};  // wait this long for Ready after exec; 0: don't wait
  bool continue_on_error = false;
  std::chrono::milliseconds poll_interval{2000};  // while waiting for Ready
  // --verify (with uncordon): called with the node as read just before its uncordon; a node that
  // does not pass is not uncordoned, stays cordoned with the reason recorded (a failed one; an
  // unverified one keeps its record), and fails like a failed --exec. Empty: no verification.
  NodeVerifier verify;
};

struct RollingResult {
  NodeDrainResult drain;
  std::string exec;      // "ok", "failed: exited with code 3", "" (none)
  std::string ready;     // "ready", "not ready after 5m", ""
  std::string uncordon;  // "uncordoned", "failed: ...", ""
  bool ok = false;
  bool not_started = false;  // stopped before this node (after a failure, or interrupted)
  bool interrupted = false;  // Ctrl-C or SIGTERM stopped this node's maintenance part-way
  std::string verify = "";   // "passed", "failed", "unverified", "" (not verified)
};

std::vector<RollingResult> rolling_maintenance(kube::Client& client, const std::vector<nlohmann::json>& nodes,
                                               const RollingOptions& options);

// ---- Schemas (-o json|yaml) ---------------------------------------------------------------------

// "not_started", "done", "interrupted" or "failed".
std::string_view rolling_result(const RollingResult& r);
// apiVersion gpuctl.io/v1alpha1, kind DrainResultList: one item per node drained, then one per
// node that could not be read (result "failed", the reason in message).
nlohmann::json to_json(const std::vector<NodeDrainResult>& results, const std::vector<NodeChange>& missing);
// kind RollingMaintenanceResult: each node's drain fields plus rollingResult, exec, ready, verify,
// uncordon.
nlohmann::json to_json(const std::vector<RollingResult>& results);

}  // namespace gpuctl::ops
