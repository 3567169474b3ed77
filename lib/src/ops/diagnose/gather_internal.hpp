#pragma once
// What gather.cpp shares with the files that plan its derived reads; not part of the library's
// interface.
#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/ops/diagnose/diagnose.hpp"

namespace gpuctl::ops::diagnose {

// gather_job_logs.cpp: the logs gpu-job-failed reads, one per GPU Job that failed within
// --since whose latest failed pod's termination message names no GPU cause: that pod's failed
// container (its previous instance when it restarted since), the newest failures first, at most
// max_jobs. Each item: namespace, pod, container, node, previous, job, causeTail (read as
// `gpuctl jobs` reads it: the last lines, bounded in bytes and time).
std::vector<nlohmann::json> job_log_reads(const Snapshot& snapshot, std::size_t max_jobs);

}  // namespace gpuctl::ops::diagnose
