#include "gpuctl/ops/fleet/gpus.hpp"

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/protobuf.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"
#include "gpuctl/ops/fleet/probe_outcome.hpp"
#include "gpus_pods.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

NodeProbe read_probe_run(const ProbeTarget& target, const ssh::HostRun& run) {
  NodeProbe probe;
  probe.node = target.node;
  probe.address = target.address;
  probe.duration = run.duration;
  const ProbeOutput output{run.process.exit_code, run.process.stdout_text, run.process.stderr_text, run.truncated};
  if (run.verdict.outcome == ssh::HostOutcome::ok) {
    read_probe_output(probe, output);
    return probe;
  }
  probe.exit_code = run.process.exit_code;
  probe.outcome = std::string(ssh::to_string(run.verdict.outcome));
  probe.message = run.verdict.message;
  if (run.verdict.outcome == ssh::HostOutcome::timed_out) read_partial_probe_output(probe, output);
  return probe;
}

std::vector<ProbeTarget> probe_targets(const std::vector<json>& nodes, const ssh::AddressRule& rule) {
  std::vector<ProbeTarget> targets;
  for (const auto& n : nodes) {
    ProbeTarget t{kube::name_of(n), "", ""};
    auto address = ssh::node_ssh_address(n, rule);
    if (address) {
      t.address = *address;
    } else {
      t.address_error = address.error().message;
    }
    targets.push_back(std::move(t));
  }
  return targets;
}

Result<std::vector<NodeProbe>> probe_nodes(ssh::Runner& runner, const std::vector<ProbeTarget>& targets,
                                           const ProbeOptions& options) {
  std::vector<std::string> addresses;
  std::vector<std::size_t> host_target;  // host index -> target index
  std::vector<NodeProbe> probes(targets.size());
  for (std::size_t i = 0; i < targets.size(); i++) {
    if (targets[i].address.empty()) {
      probes[i].node = targets[i].node;
      probes[i].outcome = "no_address";
      probes[i].message = targets[i].address_error;
      continue;
    }
    addresses.push_back(targets[i].address);
    host_target.push_back(i);
  }
  std::size_t done = targets.size() - addresses.size();
  ssh::RunOptions run_options;
  run_options.max_parallel = options.fanout;
  run_options.output_cap = options.output_cap;
  run_options.on_finish = [&](std::size_t) {
    done++;
    if (options.on_progress) options.on_progress(done, targets.size());
  };
  GPUCTL_TRY_ASSIGN(auto runs, runner.run(addresses, gpu::probe_remote_command(), run_options));
  if (runs.size() != addresses.size()) {
    return fail(Errc::internal,
                fmt::format("the ssh runner returned {} results for {} hosts", runs.size(), addresses.size()));
  }
  for (std::size_t j = 0; j < runs.size(); j++)
    probes[host_target[j]] = read_probe_run(targets[host_target[j]], runs[j]);
  return probes;
}

std::vector<FailureGroup> group_failures(const std::vector<NodeProbe>& probes) {
  std::vector<FailureGroup> groups;
  for (const auto& p : probes) {
    if (p.outcome == "ok") continue;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const FailureGroup& g) { return g.outcome == p.outcome && g.message == p.message; });
    if (it == groups.end()) {
      groups.push_back({p.outcome, p.message, {p.node}});
    } else {
      it->nodes.push_back(p.node);
    }
  }
  // Biggest groups first: with hundreds of nodes, what broke most is the first thing to read.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const FailureGroup& a, const FailureGroup& b) { return a.nodes.size() > b.nodes.size(); });
  return groups;
}

namespace {

// Drops the nodes gpuctl cannot read, naming each in view.skipped; returns their names, so a node
// asked for by name is never reported as "no such node" when it was only malformed.
std::set<std::string> drop_malformed_nodes(std::vector<json>& nodes, std::vector<std::string>& skipped) {
  std::set<std::string> malformed;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (auto problem = kube::node_shape_problem(nodes[i]); !problem.empty()) {
      skipped.push_back(fmt::format("{} skipped: {}", kube::object_label("node", nodes[i], i), problem));
      malformed.insert(kube::name_of(nodes[i]));
      nodes[i] = nullptr;
    }
  }
  std::erase_if(nodes, [](const json& n) { return n.is_null(); });
  return malformed;
}

// The nodes named (each once, in the order given), or every GPU node when none is named; a name
// that is not there fails the whole view.
Result<std::vector<json>> choose_nodes(const std::vector<json>& nodes, const GpuViewOptions& options,
                                       const std::set<std::string>& malformed) {
  std::vector<json> chosen;
  if (options.names.empty()) {
    for (auto& n : nodes) {
      if (is_gpu_node(n)) chosen.push_back(n);
    }
    return chosen;
  }
  std::vector<std::string> missing;
  for (const auto& name : options.names) {
    auto it = std::find_if(nodes.begin(), nodes.end(), [&](const json& n) { return kube::name_of(n) == name; });
    if (it == nodes.end()) {
      if (!malformed.contains(name)) missing.push_back(name);
    } else if (std::none_of(chosen.begin(), chosen.end(), [&](const json& n) { return kube::name_of(n) == name; })) {
      chosen.push_back(*it);
    }
  }
  if (!missing.empty()) {
    Error e;
    e.code = Errc::api;
    e.message =
        fmt::format("no such node{}: {} (list them with: gpuctl nodes --all{})", missing.size() > 1 ? "s" : "",
                    fmt::join(missing, ", "), options.label_selector.empty() ? "" : " -l " + options.label_selector);
    return fail(e);
  }
  return chosen;
}

// node name -> the running pods there that request nvidia.com/* resources, with those requests.
std::map<std::string, std::vector<GpuPod>> gpu_pods_by_node(const std::vector<json>& pods) {
  std::map<std::string, std::vector<GpuPod>> pods_by_node;
  for (const auto& pod : pods) {
    if (kube::pod_is_terminal(pod)) continue;
    GpuPod gp{kube::namespace_of(pod), kube::name_of(pod), {}};
    for (const auto& [resource, quantity] : kube::pod_requests(pod)) {
      if (is_nvidia_resource(resource) && quantity.value() > 0) gp.resources[resource] = quantity.value();
    }
    if (!gp.resources.empty()) pods_by_node[kube::string_field(kube::field(pod, "spec"), "nodeName")].push_back(gp);
  }
  return pods_by_node;
}

// The nodes the view may show: the named ones (each read by its name when few are named, so
// one node of a 5,000-node fleet costs one small answer), else every node the selector matches.
// The inventory's fields are what the view and the ssh address rules read (labels, annotations
// and addresses are kept whole).
Result<std::vector<json>> list_candidate_nodes(kube::Client& client, const GpuViewOptions& options) {
  kube::ListOptions list;
  list.label_selector = options.label_selector;
  list.fields = inventory_node_fields();
  if (options.names.empty() || options.names.size() > kPerNodePodListMax) {
    GPUCTL_TRY_ASSIGN(kube::ListResult nodes, client.list(kube::paths::nodes(), list));
    return std::move(nodes.items);
  }
  std::vector<json> nodes;
  for (const auto& name : std::set<std::string>(options.names.begin(), options.names.end())) {
    list.field_selector = "metadata.name=" + name;
    GPUCTL_TRY_ASSIGN(kube::ListResult one, client.list(kube::paths::nodes(), list));
    for (auto& n : one.items) nodes.push_back(std::move(n));
  }
  return nodes;
}

// Whether the chosen nodes' pods are cheaper read node by node than in one list of every bound
// pod: few nodes, or a small share of a larger cluster (when names or a selector narrowed the
// choice, the cluster's node count comes from one limit=1 list's remainingItemCount). At 5,000
// nodes the whole list takes ~8 s and competes for the CPU with the probe's ssh processes.
bool read_pods_per_node(kube::Client& client, const GpuViewOptions& options, std::size_t chosen) {
  if (chosen <= kPerNodePodListMax) return true;
  if (options.names.empty() && options.label_selector.empty()) return false;  // every GPU node
  auto first = client.get(kube::paths::nodes(), kube::Query().add("limit", "1"));
  if (!first) return false;  // the whole list will name what is wrong
  const json& meta = kube::field(*first, "metadata");
  const json& items = kube::field(*first, "items");
  const json& remaining = kube::field(meta, "remainingItemCount");
  if (!remaining.is_number_integer() || !items.is_array()) return false;
  auto cluster = remaining.get<std::int64_t>() + static_cast<std::int64_t>(items.size());
  return static_cast<std::int64_t>(chosen) * kPerNodeShare <= cluster;
}

}  // namespace

Result<GpuView> collect_gpu_view(kube::Client& client, NodeSource& source, const GpuViewOptions& options) {
  GPUCTL_TRY_ASSIGN(std::vector<json> nodes, list_candidate_nodes(client, options));
  GpuView view;
  std::set<std::string> malformed = drop_malformed_nodes(nodes, view.skipped);
  GPUCTL_TRY_ASSIGN(std::vector<json> chosen, choose_nodes(nodes, options, malformed));

  // The pods are read while the probe runs: at 5,000 nodes the list of every bound pod takes
  // ~8 s, which came on top of the probe's deadline. The probe starts once the list has answered
  // (a refused list fails before any ssh).
  std::set<std::string> names;
  for (const auto& n : chosen) names.insert(kube::name_of(n));
  bool per_node = read_pods_per_node(client, options, names.size());
  std::promise<bool> answered;  // true: the list failed before any page came
  std::once_flag answered_once;
  auto signal = [&](bool failed) { std::call_once(answered_once, [&] { answered.set_value(failed); }); };
  std::future<bool> first_answer = answered.get_future();
  auto pods_read = std::async(std::launch::async, [&] {
    auto read = read_chosen_pods(client, names, per_node, [&] { signal(false); });
    signal(!read);
    return read;
  });
  if (first_answer.get()) return fail(pods_read.get().error());
  // The DRA devices and their claims, for the GPU -> claim -> pod join, also while the probe runs.
  auto dra_read = std::async(std::launch::async, [&client, wanted = options.dra]() -> Result<DraInventory> {
    if (!wanted) return DraInventory{};
    DraReadOptions dra_options;
    dra_options.classes = false;
    return collect_dra(client, dra_options);
  });
  auto probed = source.read(chosen, options.on_progress);
  GPUCTL_TRY_ASSIGN(ChosenPods pods, pods_read.get());
  GPUCTL_TRY_ASSIGN(DraInventory dra, dra_read.get());
  GPUCTL_TRY(probed);
  std::vector<NodeProbe>& probes = *probed;

  for (auto& s : pods.skipped) view.skipped.push_back(std::move(s));
  NodeInventory inventory = build_node_inventory(chosen, pods.pods, true, std::chrono::system_clock::now(), &dra);
  for (auto& s : inventory.skipped) view.skipped.push_back(std::move(s));
  view.warnings = std::move(inventory.warnings);
  std::map<std::string, std::vector<GpuPod>> pods_by_node = gpu_pods_by_node(pods.pods);
  std::map<std::string, std::vector<DraDeviceHolding>> holdings = dra_holdings_by_node(dra);

  // One row per node: what Kubernetes says, the GPU pods there, and what the probe found.
  std::map<std::string, NodeProbe*> probe_by_node;
  for (auto& p : probes) probe_by_node[p.node] = &p;
  for (auto& info : inventory.nodes) {
    NodeGpuView v;
    v.pods = pods_by_node[info.name];
    v.probe = *probe_by_node[info.name];
    v.dra_devices = std::move(holdings[info.name]);
    v.kube = std::move(info);
    view.nodes.push_back(std::move(v));
  }
  std::sort(view.nodes.begin(), view.nodes.end(),
            [](const NodeGpuView& a, const NodeGpuView& b) { return a.kube.name < b.kube.name; });
  std::vector<NodeProbe> sorted;
  for (const auto& v : view.nodes) sorted.push_back(v.probe);
  view.failures = group_failures(sorted);
  return view;
}

}  // namespace gpuctl::ops
