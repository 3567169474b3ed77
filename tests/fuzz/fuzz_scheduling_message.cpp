// Messages the cluster writes about pods: the scheduler's verdicts (PodScheduled conditions,
// FailedScheduling events) and quota/LimitRange admission refusals (403 Status messages,
// FailedCreate events), read back into numbers and explained in plain words.
#include "fuzz_support.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  if (auto verdict = gpuctl::ops::parse_scheduling_message(text)) {
    GPUCTL_FUZZ_CHECK(verdict->available >= 0 && verdict->total >= 0, text);
    (void)gpuctl::ops::explain_scheduling(*verdict);
  }
  if (auto denial = gpuctl::ops::parse_admission_denial(text)) {
    GPUCTL_FUZZ_CHECK(!gpuctl::ops::describe(*denial).empty(), text);
  }
  return 0;
}
