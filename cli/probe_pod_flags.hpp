#pragma once
// The flags of `--via pod` (issue 21): where and how the probe pods run. Composed into `--via`
// with the ssh and Prometheus flags by node_source_flags.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"
#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/probe_pods.hpp"
#include "ssh_flags.hpp"

namespace gpuctl::cli {

struct ProbePodFlags {
  std::string namespace_name;  // empty: $GPUCTL_PROBE_NAMESPACE, else gpuctl-system
  std::string image;           // empty: $GPUCTL_PROBE_IMAGE, else the default image
  std::string image_pull_policy;
  std::vector<std::string> image_pull_secrets;
  std::string runtime_class = "nvidia";
  std::vector<std::string> env;  // KEY=VALUE; given: replaces the NVIDIA defaults
  bool privileged = false;
  std::string timeout = "60s";
};

void add_probe_pod_flags(CLI::App& cmd, HelpData& help, ProbePodFlags& flags);

// Validates without I/O; the GPUCTL_PROBE_* variables are read through env; `fanout` is
// --fanout (SshFlags), the most probe pods in flight.
Result<ops::PodProbeOptions> validate_probe_pod_flags(const ProbePodFlags& flags, int fanout, const EnvLookup& env);

}  // namespace gpuctl::cli
