// Manifests (`-f job.yaml`), YAML or JSON. Invariant: what parses can be sent, i.e. serialized
// as JSON (the client dumps it strictly), and renders as YAML for -o yaml.
#include "fuzz_support.hpp"
#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/output/yaml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto manifest = gpuctl::kube::parse_manifest(text, "fuzz.yaml");
  if (!manifest) {
    GPUCTL_FUZZ_CHECK(!manifest.error().message.empty(), text);
    return 0;
  }
  gpuctl::fuzz::dump_checked(*manifest, "manifest");
  (void)gpuctl::output::to_yaml(*manifest);
  return 0;
}
