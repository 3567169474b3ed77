// The corpus replay: a main() for a fuzz target built with the normal compiler (no libFuzzer), so
// ctest feeds every saved input (seed corpus, fixtures, regressions) to LLVMFuzzerTestOneInput in
// seconds. Arguments are files or folders (searched recursively); those after `--if-present` may
// be missing (a target's regressions folder exists once a crash was found). Exit 1 when the target
// returns non-zero for an input, an argument cannot be read or nothing was replayed; a crash or a
// failed invariant aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_under(const fs::path& root, bool may_be_missing, bool& ok) {
  std::vector<fs::path> files;
  std::error_code error;
  if (fs::is_regular_file(root, error)) return {root};
  if (may_be_missing && !fs::exists(root, error)) return files;
  if (!fs::is_directory(root, error)) {
    std::fprintf(stderr, "replay: %s: not a file or folder\n", root.c_str());
    ok = false;
    return files;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // a stable order, so a failure reproduces
  return files;
}

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy on the heap of exactly `size` bytes, so ASan sees reads past the end.
  std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
  std::fprintf(stderr, "replay: %s\n", file.c_str());
  int rc = LLVMFuzzerTestOneInput(data.data(), data.size());
  if (rc != 0) std::fprintf(stderr, "replay: %s: the target returned %d\n", file.c_str(), rc);
  return rc == 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool ok = true;
  bool may_be_missing = false;
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--if-present") {
      may_be_missing = true;
      continue;
    }
    for (const auto& file : inputs_under(argv[i], may_be_missing, ok)) {
      ok = replay(file) && ok;
      ++count;
    }
  }
  std::printf("replayed %zu inputs: %s\n", count, ok ? "ok" : "FAILED");
  return ok && count > 0 ? 0 : 1;
}
