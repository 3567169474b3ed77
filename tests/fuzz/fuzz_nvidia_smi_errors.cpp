// The verdict on one nvidia-smi run: exit code, stdout and stderr (split at a form feed). Every
// exit code nvidia-smi documents is tried, and an unknown one.
#include "fuzz_support.hpp"
#include "gpuctl/gpu/nvidia_smi_errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuctl::gpu;
  auto parts = gpuctl::fuzz::split_parts(gpuctl::fuzz::as_text(data, size), 2);
  for (std::optional<int> exit_code :
       {std::optional<int>{}, std::optional<int>{0}, std::optional<int>{6}, std::optional<int>{9},
        std::optional<int>{14}, std::optional<int>{15}, std::optional<int>{127}, std::optional<int>{-1}}) {
    NvsmiDiagnosis verdict = classify_nvidia_smi_run(exit_code, parts[0], parts[1]);
    GPUCTL_FUZZ_CHECK(verdict.ok() || !verdict.message.empty(), to_string(verdict.kind));
    GPUCTL_FUZZ_CHECK(verdict.excerpt.size() <= 4096, verdict.excerpt);
    gpuctl::fuzz::dump_checked(nlohmann::json(verdict), "nvidia-smi diagnosis");
  }
  (void)nvidia_smi_exit_code_meaning(size > 0 ? data[0] : 0);
  return 0;
}
