#pragma once
// Steps of the Job builder kept in files of their own; not part of the library's interface.
#include <nlohmann/json.hpp>

#include "gpuctl/ops/submit/submit.hpp"

namespace gpuctl::ops {

// Flags only: --nodes (completionMode Indexed, completions = parallelism = nodes, the subdomain,
// anti-affinity, the environment, built.service) or --completions/--parallelism.
void shape_parallel_job(nlohmann::json& job, const SubmitSpec& spec, BuiltJob& built);

// --queue, from flags or beside -f: Kueue's queue label on the Job, and suspend: true.
void hand_to_queue(nlohmann::json& job, const SubmitSpec& spec, BuiltJob& built);

}  // namespace gpuctl::ops
