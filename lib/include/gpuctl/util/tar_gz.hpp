#pragma once
// Backup archives: a gzip-compressed POSIX ustar archive of regular files, written and read in
// memory. The writer is deterministic (the same entries and mtime give the same bytes), so the
// same cluster state gives the same archive and the same checksum. The reader treats the archive
// as hostile: it is a file a person hands to `gpuctl restore`, possibly damaged, truncated or
// crafted, so every refusal is one line that names the archive, what is wrong and what to do.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/error.hpp"

namespace gpuctl::util {

// One regular file of an archive. `path` is relative, '/'-separated, printable ASCII, with no
// empty, "." or ".." segment, and fits ustar's name (100 bytes) + prefix (155 bytes) split.
struct TarEntry {
  std::string path;
  std::string data;

  bool operator==(const TarEntry&) const = default;
};

// The archive of `entries`, in their order: each a regular file with mode 0600, uid/gid 0 (user
// and group "root") and `mtime_unix` as its modification time; the gzip header carries no name and
// mtime 0. Errc::invalid_argument for a path that is unsafe or does not fit ustar (the message
// names it), a path given twice or used both as a file and as a folder ("a" and "a/b"), an entry of
// 8 GiB or more, or an mtime outside 0..8^11-1.
Result<std::string> write_tar_gz(const std::vector<TarEntry>& entries, std::int64_t mtime_unix);

// What read_tar_gz accepts at most, so a hostile archive cannot exhaust memory or time.
struct TarReadLimits {
  std::size_t max_entries = 100000;
  // The uncompressed tar stream (headers, data and padding): inflating stops past it, so a gzip
  // bomb costs no more memory than this.
  std::size_t max_total_bytes = std::size_t{1} << 30;
  std::size_t max_entry_bytes = std::size_t{64} << 20;
};

// The regular files of the gzip-compressed tar archive `bytes`, in archive order; directory
// entries are skipped. `source` names the archive in messages (its path). Everything is refused
// with Errc::invalid_argument: bytes that are not gzip; a compressed stream that is truncated or
// damaged (a CRC or length mismatch, an early end) or followed by other data; a tar header with a
// wrong checksum, a size that is not octal or an entry that runs past the end; a tar archive
// without its two zero blocks at the end, or non-zero data after them; links, devices and other
// non-regular entries; GNU and pax extension headers (gpuctl never writes them); unsafe paths (as
// for write_tar_gz: "../x", "/etc/x"); a path held twice or both as a file and a folder; and
// anything past `limits`. The gzip checksum is checked before anything is returned, so a result
// is never built from damaged data.
Result<std::vector<TarEntry>> read_tar_gz(std::string_view bytes, std::string_view source,
                                          const TarReadLimits& limits = {});

}  // namespace gpuctl::util
