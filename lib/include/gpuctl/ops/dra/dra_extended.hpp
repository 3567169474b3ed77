// GPUs a plain extended-resource request gets through DRA (DRAExtendedResource, Kubernetes 1.34+):
// on a node that does not advertise `nvidia.com/gpu`, the scheduler serves a pod's
// `nvidia.com/gpu: N` with N devices of the DeviceClass whose extendedResourceName is that
// resource, through a claim it makes for the pod. diagnose (why a pod pends) and submit (could
// the job ever run, does it fit now) count that room with the device plugin's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::ops {

struct DraExtendedRoom {
  std::int64_t devices = 0;  // healthy devices of the class on the node
  std::int64_t held = 0;     // of those, the ones a claim holds
};

// Per node, the devices the class serving `resource` may give (none when no class maps it). A
// device whose selectors gpuctl cannot evaluate counts as one the class may give, so the room is
// an upper bound and "can never run" stays true. Nodes that also advertise the resource are the
// caller's to leave out: the scheduler uses the device plugin there.
std::map<std::string, DraExtendedRoom> dra_extended_room(const DraInventory& inventory, std::string_view resource);

}  // namespace gpuctl::ops
