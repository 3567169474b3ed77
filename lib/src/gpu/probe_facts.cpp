// What the probe read besides nvidia-smi's GPU queries: the kernel log's NVIDIA events, the node's
// clock, NVSwitches and Fabric Manager, NVLink status. See probe.hpp for the script.
#include <fmt/format.h>

#include "gpu/probe_internal.hpp"
#include "gpu/util.hpp"

namespace gpuctl::gpu::detail {

namespace {

// The first step of a name, as the report's lookups take it.
const ProbeStep* find_step(const ProbeTranscript& t, std::string_view name) {
  for (const ProbeStep& s : t.steps) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The kernel log's NVIDIA events, with unix times for dmesg's seconds-since-boot, or why it could
// not be read.
void read_kernel_log(NodeFacts& facts, const ProbeTranscript& t) {
  facts.kernel_log_source = t.kernel_source;
  facts.clock_unix_s = t.clock_unix_s;
  const ProbeStep* step = find_step(t, "kernel");
  if (t.kernel_source.empty()) return;  // an older probe, or cut off before it
  if (t.kernel_source == "skipped") {
    facts.kernel_log_error =
        "the kernel log is not read by an unprivileged probe pod: run with --probe-privileged to read it";
    return;
  }
  if (step == nullptr || !step->exit_code) {
    facts.kernel_log_error = "the kernel log was cut off (output cap or deadline)";
    return;
  }
  facts.kernel_events = parse_kernel_log(step->stdout_text);
  if (t.kernel_source == "none") {
    std::vector<std::string_view> lines = detail::split_lines(step->stderr_text);
    facts.kernel_log_error = fmt::format(
        "no kernel log: the journal holds no kernel messages and dmesg was refused ({}); run the probe as root or "
        "set kernel.dmesg_restrict=0",
        lines.empty() ? std::string("no message") : detail::one_line(lines.front(), 160));
  }
  if (!t.clock_unix_s || !t.uptime_s) return;
  const double boot = static_cast<double>(*t.clock_unix_s) - *t.uptime_s;
  for (KernelLogEvent& e : facts.kernel_events) {
    if (!e.unix_time_s && e.monotonic_s) e.unix_time_s = static_cast<std::int64_t>(boot + *e.monotonic_s);
  }
}

}  // namespace

NodeFacts read_node_facts(const ProbeTranscript& t) {
  NodeFacts facts;
  read_kernel_log(facts, t);
  facts.nvswitches = t.nvswitches;
  if (const ProbeStep* fm = find_step(t, "fabricmanager"); fm && fm->exit_code && (*fm->exit_code <= 1)) {
    facts.fabric_manager_running = *fm->exit_code == 0;  // pgrep: 0 found, 1 none
  }
  if (const ProbeStep* nv = find_step(t, "nvlink"); nv && nv->exit_code == 0) {
    facts.nvlinks = parse_nvlink_status(nv->stdout_text);
  }
  return facts;
}

}  // namespace gpuctl::gpu::detail
