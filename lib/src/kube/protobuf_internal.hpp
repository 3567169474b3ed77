#pragma once
// The schemas protobuf.cpp reads besides the public ones: a list's metadata and metav1.Status.
#include "gpuctl/kube/protobuf.hpp"

namespace gpuctl::kube::proto {
const Message& list_meta();
const Message& status();
}  // namespace gpuctl::kube::proto
