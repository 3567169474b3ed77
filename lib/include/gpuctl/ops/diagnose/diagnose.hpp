#pragma once
// gpuctl diagnose (issue 15): the cluster's GPU failures, found, explained and ranked. Checks are
// data, like submit's pre-flight table: each has a stable id, a title, the layer of a GPU node it
// judges, the lists it needs and a pure function from one gathered snapshot to findings. The
// snapshot is read once, whatever the number of checks; a list that could not be read (RBAC, an
// error) skips the checks that need it, with the reason, and never stops the others.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::ops::diagnose {

enum class Severity { info, warning, error, critical };
std::string_view to_string(Severity severity);
// "critical", "error", "warning" or "info"; nullopt otherwise.
std::optional<Severity> parse_severity(std::string_view text);

// The layers of a GPU node, in the order an admin rules them out: the first failing one is the
// node's verdict ("gpu-7: first failing layer: device plugin").
enum class Layer { node, network, device_plugin, gpus_registered, gpus_healthy, gpu_pods, workload };
std::string_view to_string(Layer layer);

// The lists the snapshot holds; a check names the ones it reads.
enum class Source { nodes, pods, events, pvcs, pvs, storage_classes, quotas, limit_ranges, jobs, daemon_sets };
std::string_view to_string(Source source);

struct ObjectRef {
  std::string kind;  // Node, Pod, Job, PersistentVolumeClaim, ...
  std::string namespace_name;
  std::string name;
};

// What proves a finding: the exact condition, event, log line or field, where it came from and when.
struct Evidence {
  std::string source;  // "node gpu-7 condition Ready", "event FailedMount", "pod log nvidia-device-plugin-x"
  std::string text;    // verbatim
  std::string time;    // RFC 3339, "" when the source has none
};

struct Finding {
  std::string check;  // the check's id
  Severity severity = Severity::warning;
  ObjectRef object;
  std::string node;     // the node it concerns, "" when none
  std::string summary;  // one line, with the numbers
  std::vector<Evidence> evidence;
  std::vector<std::string> remedy;  // commands to run, with the real names filled in
};

// One read of the cluster. `now` is when it was read, so ages in findings are reproducible.
struct Snapshot {
  std::chrono::system_clock::time_point now;
  std::map<Source, std::vector<nlohmann::json>> lists;
  std::map<Source, std::string> unavailable;  // why a list could not be read ("forbidden: ...")

  // The list, or an empty one when it was not read.
  const std::vector<nlohmann::json>& list(Source source) const;
};

struct Check {
  std::string_view id;     // kebab-case, stable: --check, --skip, suppressions and JSON use it
  std::string_view title;  // what it looks for, one line
  Layer layer;
  std::vector<Source> needs;
  Severity severity;  // the default severity of its findings
  std::vector<Finding> (*run)(const Snapshot&);
};

// Every check, in the order they run and are listed.
const std::vector<Check>& checks();
const Check* find_check(std::string_view id);

// The checks' own functions, for tests and callers. Each reads only its `needs`.
//
// node-not-ready (critical): a GPU node whose Ready condition is False or Unknown, how long since
// it changed, and the GPU pods stranded there (needs nodes, pods).
std::vector<Finding> check_node_not_ready(const Snapshot& snapshot);
// node-network-unavailable (error): NetworkUnavailable=True on a GPU node: pods placed there hang.
std::vector<Finding> check_node_network_unavailable(const Snapshot& snapshot);
// node-pressure (warning): MemoryPressure, DiskPressure or PIDPressure True on a GPU node.
std::vector<Finding> check_node_pressure(const Snapshot& snapshot);
// gpu-unhealthy-devices (error): allocatable below capacity for an nvidia.com/* resource: the
// device plugin marked GPUs unhealthy.
std::vector<Finding> check_gpu_unhealthy_devices(const Snapshot& snapshot);
// device-plugin-missing (critical): a node that looks like a GPU node (a GPU product label or
// nvidia.com/gpu.present=true) but advertises no nvidia.com/* capacity: the plugin never registered.
std::vector<Finding> check_device_plugin_missing(const Snapshot& snapshot);

enum class CheckStatus { pass, fail, skipped };
std::string_view to_string(CheckStatus status);

struct CheckRun {
  std::string id;
  CheckStatus status = CheckStatus::pass;
  std::string skipped_because;  // the unavailable list and why
};

struct Report {
  std::vector<CheckRun> checks;
  std::vector<Finding> findings;  // ordered by severity (critical first), then node, then check
};

// Which checks run: every one unless `only` names some; never those in `skip`. Unknown ids are
// refused (Errc::invalid_argument, naming the id and `gpuctl diagnose --list-checks`).
struct Selection {
  std::vector<std::string> only;
  std::vector<std::string> skip;
};
Result<std::vector<const Check*>> select_checks(const Selection& selection);

// Pure: runs the selected checks over the snapshot.
Report run_checks(const Snapshot& snapshot, const std::vector<const Check*>& selected);

// The stable schema (`-o json|yaml`): {"apiVersion": "gpuctl.io/v1alpha1", "kind":
// "DiagnoseReport", "checks": [{id, title, layer, severity, status, skippedBecause}], "findings":
// [{check, severity, object{kind, namespace, name}, node, summary, evidence[{source, text, time}],
// remedy[]}], "summary": {critical, error, warning, info, checksPassed, checksFailed,
// checksSkipped}}.
nlohmann::json to_json(const Report& report);
// `--list-checks -o json|yaml`: {"kind": "DiagnoseCheckList", "items": [{id, title, layer,
// severity, needs[]}]}.
nlohmann::json checks_to_json(const std::vector<const Check*>& listed);

// What to read: the lists the selected checks need (needed_sources), nodes by `label_selector`
// (-l), the namespaced lists of `namespace_name` ("" for every namespace).
struct GatherOptions {
  std::set<Source> sources;
  std::string label_selector;
  std::string namespace_name;
};
std::set<Source> needed_sources(const std::vector<const Check*>& selected);

// One gathering pass: each needed list read once, all of them at the same time, paginated and
// projected to the fields the checks read. A list that fails (403, 404 for an API the server
// lacks, a server error) is named in Snapshot::unavailable and stops nothing. Only what stops
// every list is returned as an error: the cluster cannot be reached, or it refuses the
// credentials (401), or the local configuration is unusable.
Result<Snapshot> gather(kube::Client& client, const GatherOptions& options);

}  // namespace gpuctl::ops::diagnose
