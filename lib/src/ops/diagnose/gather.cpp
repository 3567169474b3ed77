// diagnose's gathering pass: every list the selected checks need, read once and in parallel; a
// list that fails is recorded and skips only its checks.
#include <future>
#include <map>
#include <optional>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"

namespace gpuctl::ops::diagnose {
namespace {

struct ListPlan {
  std::string path;
  kube::ListOptions options;
};

// The pod fields the checks read: the inventory's (requests, phase, node) and, for the checks of
// the next slices, container states, owners, placement and volumes. Whole pods are ~9 KiB each.
const kube::Projection& pod_fields() {
  static const kube::Projection fields = [] {
    std::vector<std::string> paths = kube::pod_request_paths();
    for (const char* more :
         {"metadata.uid", "metadata.labels", "metadata.creationTimestamp", "metadata.ownerReferences",
          "spec.nodeSelector", "spec.tolerations", "spec.affinity", "spec.volumes", "status.reason",
          "status.conditions", "status.containerStatuses", "status.initContainerStatuses"})
      paths.emplace_back(more);
    return kube::Projection(paths);
  }();
  return fields;
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
    case Source::daemon_sets: plan.path = kube::paths::daemon_sets(ns); break;
  }
  return plan;
}

// Errors no other list would get past: nothing can be read at all.
bool stops_everything(const Error& e) {
  return e.code == Errc::transport || e.code == Errc::config || e.is_unauthorized() || e.code == Errc::cancelled;
}

}  // namespace

std::set<Source> needed_sources(const std::vector<const Check*>& selected) {
  std::set<Source> out;
  for (const Check* c : selected) out.insert(c->needs.begin(), c->needs.end());
  return out;
}

Result<Snapshot> gather(kube::Client& client, const GatherOptions& options) {
  std::map<Source, std::future<Result<kube::ListResult>>> reads;
  for (Source source : options.sources) {
    reads[source] = std::async(std::launch::async, [&client, plan = plan_for(source, options)] {
      return client.list(plan.path, plan.options);
    });
  }
  Snapshot snapshot;
  snapshot.now = std::chrono::system_clock::now();
  std::optional<Error> fatal;
  for (auto& [source, read] : reads) {
    Result<kube::ListResult> result = read.get();
    if (result) {
      snapshot.lists[source] = std::move(result->items);
    } else if (stops_everything(result.error())) {
      if (!fatal) fatal = result.error();
    } else {
      snapshot.unavailable[source] = result.error().message;
    }
  }
  if (fatal) return fail(*fatal);
  return snapshot;
}

}  // namespace gpuctl::ops::diagnose
