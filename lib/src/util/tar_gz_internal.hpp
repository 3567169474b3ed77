#pragma once
// What the writer (tar_gz.cpp) and the reader (tar_gz_read.cpp) of backup archives share: the
// ustar header layout (POSIX.1-1988, as pax(1) documents it) and the rules for paths.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/util/tar_gz.hpp"

namespace gpuctl::util::tar_internal {

constexpr std::size_t kBlockBytes = 512;

// Offsets and widths of the ustar header fields gpuctl writes or reads.
struct Field {
  std::size_t offset;
  std::size_t width;
};
constexpr Field kName{0, 100};
constexpr Field kMode{100, 8};
constexpr Field kUid{108, 8};
constexpr Field kGid{116, 8};
constexpr Field kSize{124, 12};
constexpr Field kMtime{136, 12};
constexpr Field kChecksum{148, 8};
constexpr Field kTypeflag{156, 1};
constexpr Field kMagic{257, 6};
constexpr Field kVersion{263, 2};
constexpr Field kUname{265, 32};
constexpr Field kGname{297, 32};
constexpr Field kDevMajor{329, 8};
constexpr Field kDevMinor{337, 8};
constexpr Field kPrefix{345, 155};

// The sum of the header's bytes as unsigned values, the checksum field counted as eight spaces.
unsigned header_checksum(const unsigned char* block);

// Why `path` may not be an archive path ("has a \"..\" segment"), or nothing when it may. The
// rules make extraction safe anywhere: relative, no empty, "." or ".." segment, printable ASCII.
std::optional<std::string> unsafe_path_reason(std::string_view path);

// The first clash among the paths of `entries`, for a message: "\"a\" twice", or "\"a\" both as
// a file and as a folder (of \"a/b\")"; nothing when every path can be extracted beside the others.
std::optional<std::string> path_clash(const std::vector<TarEntry>& entries);

}  // namespace gpuctl::util::tar_internal
