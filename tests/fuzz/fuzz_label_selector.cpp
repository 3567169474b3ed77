// Label selectors (`-l`, `--selector`), turned into metav1.LabelSelector objects that are sent.
#include "fuzz_support.hpp"
#include "gpuctl/kube/label_selector.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto selector = gpuctl::kube::parse_label_selector(text);
  if (selector) {
    GPUCTL_FUZZ_CHECK(selector->is_object(), text);
    gpuctl::fuzz::dump_checked(*selector, "label selector");
  } else {
    GPUCTL_FUZZ_CHECK(!selector.error().message.empty(), text);
  }
  return 0;
}
