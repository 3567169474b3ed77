// What the GPU probe prints over ssh: the framed transcript and the nvidia-smi outputs inside it,
// read as complete and as cut off. Invariant: every report serializes for -o json.
#include "fuzz_support.hpp"
#include "gpuctl/gpu/probe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuctl::gpu;
  auto parts = gpuctl::fuzz::split_parts(gpuctl::fuzz::as_text(data, size), 2);
  (void)parse_probe_transcript(parts[0]);
  for (bool truncated : {false, true}) {
    NodeGpuReport report = parse_probe_output(0, parts[0], parts[1], truncated);
    GPUCTL_FUZZ_CHECK(!node_classification(report).empty(), parts[0]);
    gpuctl::fuzz::dump_checked(nlohmann::json(report), "probe report");
  }
  return 0;
}
