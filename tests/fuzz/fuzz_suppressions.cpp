// diagnose --suppress files. Invariant: a file either fails with one non-empty line, or gives
// rules that each name a check, a reason and an object or node, and that apply to a report
// without harm.
#include "fuzz_support.hpp"
#include "gpuctl/ops/diagnose/suppress.hpp"

namespace dx = gpuctl::ops::diagnose;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto rules = dx::parse_suppressions(text, "fuzz.yaml");
  if (!rules) {
    const std::string& message = rules.error().message;
    GPUCTL_FUZZ_CHECK(!message.empty() && message.find('\n') == std::string::npos, text);
    return 0;
  }
  for (const auto& rule : *rules) {
    GPUCTL_FUZZ_CHECK(!rule.check.empty() && !rule.reason.empty(), text);
    GPUCTL_FUZZ_CHECK(!rule.object.empty() || !rule.node.empty(), text);
  }
  dx::Report report;
  report.checks = {{"gpu-unhealthy-devices", dx::CheckStatus::fail, "", {}}};
  dx::Finding finding;
  finding.check = "gpu-unhealthy-devices";
  finding.object = {"Node", "", "gpu-7"};
  finding.node = "gpu-7";
  report.findings = {finding};
  (void)dx::apply_suppressions(report, dx::Snapshot{}, *rules);
  GPUCTL_FUZZ_CHECK(report.findings.size() + report.suppressed.size() == 1, text);
  return 0;
}
