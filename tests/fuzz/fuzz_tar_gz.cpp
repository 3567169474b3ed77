// Backup archives (util/tar_gz.hpp): `gpuctl restore` reads whatever file it is given. Invariants:
// reading never crashes and never allocates past its limits (small here, so the fuzzer sees them);
// a refusal is one line naming the archive; what is accepted has safe, distinct paths within the
// limits, and writes back to an archive that reads back the same.
#include "fuzz_support.hpp"
#include "gpuctl/util/tar_gz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace util = gpuctl::util;
  const auto bytes = gpuctl::fuzz::as_text(data, size);
  util::TarReadLimits limits;
  limits.max_entries = 64;
  limits.max_total_bytes = 1 << 20;
  limits.max_entry_bytes = 256 << 10;
  auto entries = util::read_tar_gz(bytes, "fuzz.tar.gz", limits);
  if (!entries) {
    const std::string& message = entries.error().message;
    GPUCTL_FUZZ_CHECK(message.starts_with("fuzz.tar.gz ") && message.find('\n') == std::string::npos, message);
    return 0;
  }
  std::size_t total = 0;
  for (const auto& entry : *entries) {
    GPUCTL_FUZZ_CHECK(!entry.path.empty() && entry.path.front() != '/', entry.path);
    GPUCTL_FUZZ_CHECK(("/" + entry.path + "/").find("/../") == std::string::npos, entry.path);
    GPUCTL_FUZZ_CHECK(entry.data.size() <= limits.max_entry_bytes, entry.path);
    total += entry.data.size();
  }
  GPUCTL_FUZZ_CHECK(entries->size() <= limits.max_entries && total <= limits.max_total_bytes, std::string(bytes));
  // The writer takes every path the reader accepts (same rules, and they fit ustar's fields).
  auto rewritten = util::write_tar_gz(*entries, 0);
  GPUCTL_FUZZ_CHECK(rewritten.has_value(), rewritten ? std::string() : rewritten.error().message);
  auto again = util::read_tar_gz(*rewritten, "rewritten.tar.gz", limits);
  GPUCTL_FUZZ_CHECK(again.has_value() && *again == *entries, again ? std::string() : again.error().message);
  return 0;
}
