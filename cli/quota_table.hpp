#pragma once
// The table of `gpuctl quota`: one row per GPU quota key (extended resources, then the DRA device
// class keys and the claim count), a bar of use, the per-pod maximum and what admission held back.
#include <string>

#include "gpuctl/ops/quota/quota.hpp"

namespace gpuctl::cli {

// The table, then (with headers) the held-back objects below it.
std::string quota_table(const ops::GpuQuotaList& list, bool wide, bool headers, bool color);

}  // namespace gpuctl::cli
