#pragma once
// --via ssh|pod|prometheus and the flags of each node source, for every command that reads live
// node data (gpus, nodes --live, diagnose): one place that turns them into an ops::NodeSource.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"
#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"
#include "gpuctl/ops/fleet/prometheus_source.hpp"
#include "probe_pod_flags.hpp"
#include "prometheus_flags.hpp"
#include "ssh_flags.hpp"

namespace gpuctl::cli {

class AppContext;

struct NodeSourceFlags {
  std::string via;  // empty: $GPUCTL_VIA, else ssh
  SshFlags ssh;
  ProbePodFlags pod;
  PrometheusFlags prometheus;
};

void add_node_source_flags(CLI::App& cmd, HelpData& help, NodeSourceFlags& flags);

struct NodeSourceRequest {
  ops::Via via = ops::Via::ssh;
  SshRequest ssh;
  ops::PodProbeOptions pod;  // --via pod
  // --via prometheus: the options without the secrets, and the files that hold them (the token
  // file of $GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE filled in), read by make_node_source.
  ops::PrometheusOptions prometheus;
  PrometheusFlags prometheus_files;
};

// Validates without I/O; the GPUCTL_* variables read through env.
Result<NodeSourceRequest> validate_node_source_flags(const NodeSourceFlags& flags, const EnvLookup& env);
Result<NodeSourceRequest> validate_node_source_flags(const NodeSourceFlags& flags);

// The source the request names, built over the context's client, ssh runner or HTTP transport
// (reading the credential files it names).
Result<std::unique_ptr<ops::NodeSource>> make_node_source(const NodeSourceRequest& request, AppContext& ctx);

// "over ssh", "through probe pods", "from Prometheus": for progress lines.
std::string_view via_words(ops::Via via);

}  // namespace gpuctl::cli
