// diagnose's gathering pass: every list the selected checks need, read once and in parallel; a
// list that fails is recorded and skips only its checks. Then, from what the lists hold, the
// device plugin's pods (wherever -n points) and the recent logs of those pods and of failed GPU
// Jobs' pods, a bounded number at a time. What resource.k8s.io holds (DRA) is read beside the
// lists, by the reader `gpuctl nodes` uses.
#include <algorithm>
#include <future>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "check_support.hpp"
#include "gather_internal.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/label_selector.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"
#include "gpuctl/ops/jobs/job_failure_cause.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

using json = nlohmann::json;
using kube::field;
using kube::string_field;

// The log lines read per container: enough for a plugin's start-up and its last errors.
constexpr int kLogTailLines = 200;
// Failed GPU Jobs whose latest failed pod's log is read (gather_job_logs.cpp): the newest
// failures; older ones keep their termination message.
constexpr std::size_t kJobLogsMax = 20;

struct ListPlan {
  std::string path;
  kube::ListOptions options;
};

// The pod fields the checks read: the inventory's (requests, phase, node) and container states,
// owners, placement, volumes and images, and the DRA claims they use (spec.resourceClaims and
// the names of the claims made for them). Whole pods are ~9 KiB each.
const kube::Projection& pod_fields() {
  static const kube::Projection fields = [] {
    std::vector<std::string> paths = kube::pod_request_paths();
    for (const char* more :
         {"metadata.uid", "metadata.labels", "metadata.creationTimestamp", "metadata.ownerReferences",
          "spec.nodeSelector", "spec.tolerations", "spec.affinity", "spec.volumes", "spec.containers[].image",
          "spec.containers[].env", "status.reason", "status.message", "status.conditions", "status.containerStatuses",
          "status.initContainerStatuses", "spec.resourceClaims", "status.resourceClaimStatuses",
          "status.extendedResourceClaimStatus"})
      paths.emplace_back(more);
    return kube::Projection(paths);
  }();
  return fields;
}

// The lists read in the first, parallel step; the others are derived from them.
bool is_list(Source s) {
  return s != Source::plugin_pods && s != Source::plugin_logs && s != Source::job_logs && s != Source::server_version &&
         s != Source::api_groups && s != Source::node_probes && s != Source::dra;
}

ListPlan plan_for(Source source, const GatherOptions& options) {
  const std::string& ns = options.namespace_name;
  ListPlan plan;
  switch (source) {
    case Source::nodes:
      plan.path = kube::paths::nodes();
      plan.options.label_selector = options.label_selector;
      plan.options.fields = inventory_node_fields();
      break;
    case Source::pods:
      plan.path = kube::paths::pods(ns);
      plan.options.fields = pod_fields();
      break;
    case Source::events: plan.path = kube::paths::events(ns); break;
    case Source::pvcs: plan.path = kube::paths::persistent_volume_claims(ns); break;
    case Source::pvs: plan.path = kube::paths::persistent_volumes(); break;
    case Source::storage_classes: plan.path = kube::paths::storage_classes(); break;
    case Source::quotas: plan.path = kube::paths::resource_quotas(ns); break;
    case Source::limit_ranges: plan.path = kube::paths::limit_ranges(ns); break;
    case Source::jobs: plan.path = kube::paths::jobs(ns); break;
    // The device plugin and the DCGM exporter live in kube-system or the operator's namespace,
    // whatever -n says about workloads.
    case Source::daemon_sets: plan.path = kube::paths::daemon_sets(); break;
    default: break;
  }
  return plan;
}

// Errors no other list would get past: nothing can be read at all.
bool stops_everything(const Error& e) {
  return e.code == Errc::transport || e.code == Errc::config || e.is_unauthorized() || e.code == Errc::cancelled;
}

// Events older than the window tell nothing about now, and at scale they are most of the list.
std::vector<json> within(std::vector<json> events, const Snapshot& snapshot) {
  std::vector<json> out;
  for (auto& e : events) {
    auto t = util::parse_rfc3339(support::event_time(e));
    if (!t || *t >= snapshot.now - snapshot.settings.since) out.push_back(std::move(e));
  }
  return out;
}

struct LogWanted {
  json item;  // namespace, pod, container, node, previous (+ job)
};

// Reads each wanted log (tailLines, sinceSeconds, timestamps), 4 at a time; a log that cannot be
// read keeps its error in the item, so one gone pod does not hide the others.
Result<std::vector<json>> read_logs(kube::Client& client, std::vector<LogWanted> wanted, const Settings& settings) {
  std::vector<json> out;
  constexpr std::size_t kParallel = 4;
  for (std::size_t i = 0; i < wanted.size(); i += kParallel) {
    std::vector<std::future<Result<std::string>>> reads;
    for (std::size_t j = i; j < std::min(wanted.size(), i + kParallel); ++j) {
      const json& w = wanted[j].item;
      // A failed job's cause is in its log's last lines, however long ago they were printed
      // (a rank that hangs after NCCL's error is killed by the watchdog half an hour later).
      const bool cause_tail = kube::bool_field(w, "causeTail");
      kube::Query query;
      query.add("container", string_field(w, "container"))
          .add("tailLines", std::to_string(cause_tail ? kGpuCauseLogTailLines : kLogTailLines))
          .add_if(!cause_tail, "sinceSeconds", std::to_string(settings.since.count()))
          .add_if(cause_tail, "limitBytes", std::to_string(kGpuCauseLogLimitBytes))
          .add("timestamps", "true")
          .add_if(kube::bool_field(w, "previous"), "previous", "true");
      std::string path = kube::paths::pod_log(string_field(w, "namespace"), string_field(w, "pod"));
      auto timeout = cause_tail ? kGpuCauseLogTimeout : std::chrono::milliseconds(0);
      reads.push_back(std::async(std::launch::async, [&client, path, query, timeout] {
        return timeout.count() > 0 ? client.get_text(path, query, timeout) : client.get_text(path, query);
      }));
    }
    for (std::size_t j = i; j < i + reads.size(); ++j) {
      Result<std::string> text = reads[j - i].get();
      json item = std::move(wanted[j].item);
      if (text) {
        item["text"] = std::move(*text);
      } else if (stops_everything(text.error()) || text.error().is_forbidden()) {
        return fail(text.error());
      } else {
        item["error"] = text.error().message;
      }
      out.push_back(std::move(item));
    }
  }
  return out;
}

// The plugin pods, one list per plugin DaemonSet (its namespace and selector), on the nodes read
// (-l scopes the node-bound infrastructure too); unscheduled ones are the DaemonSet's business.
Result<std::vector<json>> read_plugin_pods(kube::Client& client, const Snapshot& snapshot) {
  std::set<std::string> nodes;
  for (const auto& n : snapshot.list(Source::nodes)) nodes.insert(kube::name_of(n));
  bool nodes_read = snapshot.lists.count(Source::nodes) > 0;
  std::set<std::string> seen;
  std::optional<json> selector;
  if (!snapshot.settings.device_plugin_selector.empty()) {
    GPUCTL_TRY_ASSIGN(json parsed, kube::parse_label_selector(snapshot.settings.device_plugin_selector));
    selector = parsed;
  }
  std::vector<json> out;
  for (const auto& ds : snapshot.list(Source::daemon_sets)) {
    if (!support::is_device_plugin(ds, selector ? &*selector : nullptr)) continue;
    kube::ListOptions options;
    options.label_selector = support::selector_string(ds);
    options.fields = pod_fields();
    GPUCTL_TRY_ASSIGN(kube::ListResult pods, client.list(kube::paths::pods(kube::namespace_of(ds)), options));
    for (auto& p : pods.items) {
      // Two DaemonSets' selectors may overlap; a pod is kept once.
      if (!seen.insert(kube::namespace_of(p) + "/" + kube::name_of(p)).second) continue;
      std::string node = string_field(field(p, "spec"), "nodeName");
      if (!nodes_read || nodes.count(node)) out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<LogWanted> plugin_logs_wanted(const Snapshot& snapshot) {
  std::vector<LogWanted> out;
  for (const auto& pod : snapshot.list(Source::plugin_pods)) {
    for (const auto& status : kube::array_field(field(pod, "status"), "containerStatuses")) {
      json base = {{"namespace", kube::namespace_of(pod)},
                   {"pod", kube::name_of(pod)},
                   {"container", string_field(status, "name")},
                   {"node", string_field(field(pod, "spec"), "nodeName")},
                   {"previous", false}};
      out.push_back({base});
      if (kube::integer_field(status, "restartCount").value_or(0) > 0) {
        base["previous"] = true;
        out.push_back({base});
      }
    }
  }
  return out;
}

std::vector<LogWanted> job_logs_wanted(const Snapshot& snapshot) {
  std::vector<LogWanted> out;
  for (auto& item : job_log_reads(snapshot, kJobLogsMax)) out.push_back({std::move(item)});
  return out;
}

// Records a derived read: its items, or why it is unavailable; stops on what stops everything.
Result<void> record(Snapshot& snapshot, Source source, Result<std::vector<json>> read) {
  if (read) {
    snapshot.lists[source] = std::move(*read);
  } else if (stops_everything(read.error())) {
    return fail(read.error());
  } else {
    snapshot.unavailable[source] = read.error().message;
  }
  return {};
}

Result<std::vector<json>> read_one(kube::Client& client, std::string_view path) {
  GPUCTL_TRY_ASSIGN(json doc, client.get(path));
  return std::vector<json>{std::move(doc)};
}

Result<void> read_derived(kube::Client& client, const GatherOptions& options, Snapshot& snapshot) {
  const auto& wanted = options.sources;
  auto unavailable_because = [&](Source s) { return snapshot.unavailable.count(s) > 0; };
  if (wanted.count(Source::server_version)) {
    GPUCTL_TRY(record(snapshot, Source::server_version, read_one(client, "/version")));
  }
  if (wanted.count(Source::api_groups)) GPUCTL_TRY(record(snapshot, Source::api_groups, read_one(client, "/apis")));
  if (wanted.count(Source::plugin_pods)) {
    if (unavailable_because(Source::daemon_sets)) {
      snapshot.unavailable[Source::plugin_pods] = "could not list daemonsets";
    } else {
      GPUCTL_TRY(record(snapshot, Source::plugin_pods, read_plugin_pods(client, snapshot)));
    }
  }
  if (wanted.count(Source::plugin_logs)) {
    if (unavailable_because(Source::plugin_pods)) {
      snapshot.unavailable[Source::plugin_logs] = snapshot.unavailable[Source::plugin_pods];
    } else {
      GPUCTL_TRY(
          record(snapshot, Source::plugin_logs, read_logs(client, plugin_logs_wanted(snapshot), options.settings)));
    }
  }
  if (wanted.count(Source::job_logs) && !unavailable_because(Source::pods)) {
    GPUCTL_TRY(record(snapshot, Source::job_logs, read_logs(client, job_logs_wanted(snapshot), options.settings)));
  }
  return {};
}

// The GPU nodes of the snapshot read through the node source, while the other lists are still
// being read.
using Probing = std::future<Result<std::vector<NodeProbe>>>;
Probing start_probing(const NodeProbing& probing, const std::vector<json>& nodes) {
  std::vector<json> gpu_nodes;
  for (const auto& n : nodes) {
    if (is_gpu_node(n)) gpu_nodes.push_back(n);
  }
  return std::async(std::launch::async, [&probing, gpu_nodes = std::move(gpu_nodes)] {
    return probing.source->read(gpu_nodes, probing.on_progress);
  });
}

// DRA's objects, read while the lists are: discovery, then its own lists in parallel. A cluster
// without resource.k8s.io/v1 is an inventory with served == false, not an error.
using DraReading = std::future<Result<DraInventory>>;
DraReading start_dra(kube::Client& client) {
  return std::async(std::launch::async, [&client] { return collect_dra(client); });
}

// The DRA checks stand on the slices and the classes: with either refused they would pass on
// nothing, so the source is unavailable. Refused claims or taint rules are said by the checks
// that read them (who holds a device, what a rule taints are not known).
void record_dra(Snapshot& snapshot, DraInventory inventory) {
  std::vector<std::string_view> refused;
  for (std::string_view plural : {"resourceslices", "resourceclaims", "deviceclasses", "devicetaintrules"}) {
    if (!support::dra_unread(inventory, plural).empty()) refused.push_back(plural);
  }
  auto named = [&](std::string_view plural) {
    return std::find(refused.begin(), refused.end(), plural) != refused.end();
  };
  if (named("resourceslices") || named("deviceclasses")) {
    snapshot.unavailable[Source::dra] = fmt::format("forbidden: {}", fmt::join(refused, ", "));
    return;
  }
  snapshot.dra = std::move(inventory);
}

void record_probes(Snapshot& snapshot, Result<std::vector<NodeProbe>> probed) {
  if (!probed) {
    snapshot.unavailable[Source::node_probes] = probed.error().message;
    return;
  }
  for (auto& p : *probed) {
    std::string name = p.node;
    snapshot.probes.emplace(std::move(name), std::move(p));
  }
}

}  // namespace

std::set<Source> needed_sources(const std::vector<const Check*>& selected) {
  std::set<Source> out;
  for (const Check* c : selected) {
    out.insert(c->needs.begin(), c->needs.end());
    out.insert(c->uses_if_readable.begin(), c->uses_if_readable.end());
  }
  // What the derived reads are read from.
  if (out.count(Source::plugin_logs)) out.insert(Source::plugin_pods);
  if (out.count(Source::plugin_pods)) {
    out.insert(Source::daemon_sets);
    out.insert(Source::nodes);  // -l scopes the plugin pods to the nodes it selects
  }
  if (out.count(Source::job_logs)) out.insert(Source::pods);
  if (out.count(Source::node_probes)) out.insert(Source::nodes);  // the nodes to probe
  return out;
}

Result<Snapshot> gather(kube::Client& client, const GatherOptions& options) {
  if (!options.settings.device_plugin_selector.empty()) {
    GPUCTL_TRY(kube::parse_label_selector(options.settings.device_plugin_selector));
  }
  std::map<Source, std::future<Result<kube::ListResult>>> reads;
  for (Source source : options.sources) {
    if (!is_list(source)) continue;
    reads[source] = std::async(std::launch::async, [&client, plan = plan_for(source, options)] {
      return client.list(plan.path, plan.options);
    });
  }
  Snapshot snapshot;
  snapshot.now = std::chrono::system_clock::now();
  snapshot.settings = options.settings;
  const bool probe = options.sources.count(Source::node_probes) > 0;
  if (probe && options.probing.source == nullptr)
    snapshot.not_wanted[Source::node_probes] = options.probing.disabled_because;
  std::optional<DraReading> dra;
  if (options.sources.count(Source::dra)) dra = start_dra(client);
  std::optional<Probing> probing;
  std::optional<Error> fatal;
  for (auto& [source, read] : reads) {  // nodes first (the lowest Source): the probe starts early
    Result<kube::ListResult> result = read.get();
    if (result) {
      snapshot.lists[source] =
          source == Source::events ? within(std::move(result->items), snapshot) : std::move(result->items);
    } else if (stops_everything(result.error())) {
      if (!fatal) fatal = result.error();
    } else {
      snapshot.unavailable[source] = result.error().message;
    }
    if (source == Source::nodes && result && probe && options.probing.source != nullptr) {
      probing = start_probing(options.probing, snapshot.lists[Source::nodes]);
    }
  }
  if (dra) {
    Result<DraInventory> inventory = dra->get();
    if (inventory) {
      record_dra(snapshot, std::move(*inventory));
    } else if (stops_everything(inventory.error())) {
      if (!fatal) fatal = inventory.error();
    } else {
      snapshot.unavailable[Source::dra] = inventory.error().message;
    }
  }
  if (probe && options.probing.source != nullptr && !probing) {
    snapshot.unavailable[Source::node_probes] = "could not list nodes";
  }
  Result<void> derived = fatal ? Result<void>{} : read_derived(client, options, snapshot);
  if (probing) {
    snapshot.probes_via = std::string(to_string(options.probing.source->via()));
    record_probes(snapshot, probing->get());
  }  // waited for whatever happened above
  if (fatal) return fail(*fatal);
  GPUCTL_TRY(derived);
  return snapshot;
}

}  // namespace gpuctl::ops::diagnose
