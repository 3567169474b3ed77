// The text outputs of nvidia-smi: `-q` (any -d subset), the default table and `-L`. Invariant:
// the models built from them serialize for -o json.
#include "fuzz_support.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuctl::gpu;
  auto text = gpuctl::fuzz::as_text(data, size);
  auto query = parse_nvidia_smi_query_text(text);
  if (query) gpuctl::fuzz::dump_checked(nlohmann::json(*query), "nvidia-smi -q model");
  if (auto table = parse_nvidia_smi_table(text)) {
    gpuctl::fuzz::dump_checked(nlohmann::json(*table), "nvidia-smi table model");
  }
  GpuList list = parse_nvidia_smi_list(text);
  if (query) {
    merge_gpu_lists(query->gpus, list);
    gpuctl::fuzz::dump_checked(nlohmann::json(*query), "nvidia-smi -q model merged with -L");
  }
  return 0;
}
