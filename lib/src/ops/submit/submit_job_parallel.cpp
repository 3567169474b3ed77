// Jobs of several pods from flags: a distributed job over --nodes (an Indexed Job, one pod per
// node, a headless Service for rendezvous and torchrun's environment) or a plain parallel one
// (--completions, --parallelism); and --queue, which hands any job to Kueue. Pure.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "submit_job_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
using submit_job_detail::array_at;
using submit_job_detail::object_at;

namespace {

// The annotation the Job controller gives each pod of an Indexed Job (also in the
// JOB_COMPLETION_INDEX variable it adds, which a variable of our own cannot refer to reliably).
constexpr std::string_view kCompletionIndexPath = "metadata.annotations['batch.kubernetes.io/job-completion-index']";

std::string master_address(const std::string& job) { return fmt::format("{}-0.{}", job, job); }

// The port the rendezvous listens on: an --env MASTER_PORT (or PET_MASTER_PORT) the user set, so
// every variable and the Service agree with it, else torchrun's default.
std::int64_t rendezvous_port(const SubmitSpec& spec) {
  for (const auto& [name, value] : spec.env) {
    if (name != "MASTER_PORT" && name != "PET_MASTER_PORT") continue;
    std::int64_t port = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), port);
    if (ec == std::errc() && end == value.data() + value.size() && port > 0 && port < 65536) return port;
  }
  return kRendezvousPort;
}

// The variables torchrun reads (its PET_* flags' environment form, as PyTorchJob's pods get them)
// and the older launchers' MASTER_*/WORLD_SIZE/RANK; a variable the user set with --env wins.
json distributed_env(const SubmitSpec& spec, const json& user_env) {
  const std::string nodes = std::to_string(*spec.nodes);
  const std::string port = std::to_string(rendezvous_port(spec));
  const std::string master = master_address(spec.name);
  const json index = {{"fieldRef", {{"fieldPath", kCompletionIndexPath}}}};
  const std::vector<std::pair<std::string, json>> ours = {
      {"MASTER_ADDR", master},
      {"MASTER_PORT", port},
      {"WORLD_SIZE", nodes},
      {"RANK", index},
      {"NODE_RANK", index},
      {"PET_NNODES", nodes},
      {"PET_NPROC_PER_NODE", std::to_string(std::max<std::int64_t>(spec.gpus.value_or(1), 1))},
      {"PET_NODE_RANK", index},
      {"PET_MASTER_ADDR", master},
      {"PET_MASTER_PORT", port},
  };
  auto user_sets = [&](const std::string& name) {
    return std::any_of(user_env.begin(), user_env.end(), [&](const json& e) { return e.value("name", "") == name; });
  };
  json env = json::array();
  for (const auto& [name, value] : ours) {
    if (user_sets(name)) continue;
    if (value.is_string()) {
      env.push_back({{"name", name}, {"value", value}});
    } else {
      env.push_back({{"name", name}, {"valueFrom", value}});
    }
  }
  for (const auto& e : user_env) env.push_back(e);
  return env;
}

// Required anti-affinity to the job's own pods on the hostname: never two on one node. The Job
// controller's job-name label is on every pod it makes, so the term needs nothing of ours.
void one_pod_per_node(json& pod_spec, const std::string& job) {
  json& affinity = object_at(pod_spec, "affinity");
  json& anti = object_at(affinity, "podAntiAffinity");
  json& required = array_at(anti, "requiredDuringSchedulingIgnoredDuringExecution");
  required.push_back({{"labelSelector", {{"matchLabels", {{kJobNameLabel, job}}}}},
                      {"topologyKey", std::string(kDefaultColocateTopology)}});
}

void make_distributed(json& job, const SubmitSpec& spec, BuiltJob& built) {
  json& job_spec = object_at(job, "spec");
  const std::int64_t n = *spec.nodes;
  job_spec["completionMode"] = "Indexed";
  job_spec["completions"] = n;
  job_spec["parallelism"] = n;
  json& pod_spec = object_at(object_at(job_spec, "template"), "spec");
  pod_spec["subdomain"] = spec.name;
  one_pod_per_node(pod_spec, spec.name);
  json& container = pod_spec["containers"][0];
  container["env"] = distributed_env(spec, container.value("env", json::array()));
  container["ports"] = json::array({{{"name", "rendezvous"}, {"containerPort", rendezvous_port(spec)}}});
  built.service = build_rendezvous_service(spec, kube::namespace_of(job));
  built.notes.push_back(
      fmt::format("{} pods, one per node (required pod anti-affinity on {}), an Indexed Job: pod i is {}-i", n,
                  kDefaultColocateTopology, spec.name));
  built.notes.push_back(fmt::format(
      "rendezvous: headless Service {} (deleted with the job); MASTER_ADDR={} MASTER_PORT={} WORLD_SIZE={}, RANK and "
      "NODE_RANK the pod's index, and torchrun's PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, "
      "PET_MASTER_PORT",
      spec.name, master_address(spec.name), rendezvous_port(spec), n));
  built.notes.push_back(
      "a failed pod is replaced alone, under its index, while the others run on: the program must let it rejoin "
      "(torchrun --max-restarts) or fail as a whole");
}

}  // namespace

json build_rendezvous_service(const SubmitSpec& spec, const std::string& namespace_name) {
  json labels = {{kManagedByLabel, "gpuctl"}};
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", spec.name}, {"namespace", namespace_name}, {"labels", labels}}},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", {{kJobNameLabel, spec.name}}},
            {"publishNotReadyAddresses", true},
            {"ports", json::array({{{"name", "rendezvous"},
                                    {"port", rendezvous_port(spec)},
                                    {"targetPort", rendezvous_port(spec)},
                                    {"protocol", "TCP"}}})}}}};
}

void shape_parallel_job(json& job, const SubmitSpec& spec, BuiltJob& built) {
  if (spec.nodes) {
    make_distributed(job, spec, built);
    return;
  }
  json& job_spec = object_at(job, "spec");
  if (spec.completions) job_spec["completions"] = *spec.completions;
  if (spec.parallelism) job_spec["parallelism"] = *spec.parallelism;
}

void hand_to_queue(json& job, const SubmitSpec& spec, BuiltJob& built) {
  if (spec.queue.empty()) return;
  object_at(object_at(job, "metadata"), "labels")[kKueueQueueLabel] = spec.queue;
  // Kueue unsuspends the job when it admits it, all pods at once; its webhook would suspend it
  // too, but a job created running would start its pods before Kueue saw it.
  object_at(job, "spec")["suspend"] = true;
  built.notes.push_back(fmt::format(
      "queued: created suspended with label {}={}; Kueue starts it when the queue admits all its pods at once",
      kKueueQueueLabel, spec.queue));
}

}  // namespace gpuctl::ops
