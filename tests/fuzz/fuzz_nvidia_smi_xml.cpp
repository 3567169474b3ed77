// `nvidia-smi -q -x` as a node prints it (anything may come back over ssh). Invariant: the model
// built from it serializes for -o json.
#include "fuzz_support.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  if (auto tree = gpuctl::gpu::parse_nvidia_smi_xml_tree(text)) {
    (void)tree->root.find("gpu/fb_memory_usage/total");
    (void)gpuctl::gpu::nvidia_smi_log_from_tree(tree->root);
  }
  if (auto log = gpuctl::gpu::parse_nvidia_smi_xml(text)) {
    gpuctl::fuzz::dump_checked(nlohmann::json(*log), "nvidia-smi -q -x model");
  }
  return 0;
}
