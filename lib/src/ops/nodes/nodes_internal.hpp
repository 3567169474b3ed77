#pragma once
// What nodes.cpp and nodes_dra.cpp share: a node's DRA facts and how they replace the device
// plugin's counts.
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"

namespace gpuctl::ops::nodes_internal {

// One node's GPUs as NVIDIA's DRA driver publishes them.
struct DraNodeFacts {
  std::vector<DraCount> counts;         // full GPUs, then MIG profiles
  std::set<std::string> pods;           // "namespace/name" of the pods its allocated devices are reserved for
  std::vector<NodeDeviceTaint> taints;  // every taint of its devices, any effect
};

std::unordered_map<std::string, DraNodeFacts> dra_facts_by_node(const DraInventory& dra);

// Makes `info` count its GPUs from DRA (source "dra"): whole GPUs and MIG profiles replace the
// device plugin's rows of the same name; a device plugin's own nvidia.com/gpu is kept apart in
// device_plugin_gpus. `gpu_pods` (the pods requesting nvidia.com/* on the node, by key) is
// joined with the claims' pods, each pod counted once.
void apply_dra(NodeGpuInfo& info, DraNodeFacts facts, const std::set<std::string>& gpu_pods);

}  // namespace gpuctl::ops::nodes_internal
