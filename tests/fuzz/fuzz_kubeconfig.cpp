// Kubeconfig files, read as `--kubeconfig FILE` is: the input is written to a file in a private
// temporary folder (relative paths in it resolve there, to nothing) and resolved with and without
// a --context. Only the parsing and resolution run; nothing connects or starts a plugin.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "fuzz_support.hpp"
#include "gpuctl/kube/config.hpp"

namespace {

const std::string& scratch_folder() {
  static const std::string folder = [] {
    std::string pattern = "/tmp/gpuctl-fuzz-kubeconfig.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    return pattern;
  }();
  return folder;
}

void resolve(const std::string& path, std::optional<std::string> context) {
  gpuctl::kube::LoadOptions options;
  options.kubeconfig = path;
  options.context = std::move(context);
  options.home = scratch_folder();
  auto config = gpuctl::kube::load_rest_config(options);
  if (!config) {
    GPUCTL_FUZZ_CHECK(!config.error().message.empty(), path);
    return;
  }
  GPUCTL_FUZZ_CHECK(!config->namespace_name.empty(), config->origin);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = scratch_folder() + "/config";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  resolve(path, std::nullopt);
  resolve(path, "prod");
  ::unlink(path.c_str());
  return 0;
}
