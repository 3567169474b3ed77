#pragma once
// gpuctl submit -f with a JobSet or a PyTorchJob (ops/submit/submit_workloads.hpp): the same
// pre-flight verdicts, dry runs and output forms as a Job, for an object of another kind.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app.hpp"
#include "common_flags.hpp"
#include "exit_code.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {

struct WorkloadSubmit {
  const ops::SubmitSpec& spec;
  const nlohmann::json& manifest;
  std::string source;  // the -f path, for errors
  DryRun dry_run = DryRun::none;
  std::optional<OutputFormat> format;
  bool parsable = false;
  bool force = false;
  bool wait_or_follow = false;  // refused: --wait and --follow read a batch/v1 Job's status and pods
};

// Whether run_submit hands the manifest here: a kind ops::find_workload_kind knows.
bool is_workload_manifest(const nlohmann::json& manifest);

Result<ExitCode> submit_workload(AppContext& ctx, const WorkloadSubmit& request);

}  // namespace gpuctl::cli
