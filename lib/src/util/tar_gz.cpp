#include "gpuctl/util/tar_gz.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "tar_gz_internal.hpp"

namespace gpuctl::util {
namespace tar_internal {

unsigned header_checksum(const unsigned char* block) {
  unsigned sum = 0;
  for (std::size_t i = 0; i < kBlockBytes; ++i) {
    const bool in_field = i >= kChecksum.offset && i < kChecksum.offset + kChecksum.width;
    sum += in_field ? unsigned{' '} : unsigned{block[i]};
  }
  return sum;
}

std::optional<std::string> unsafe_path_reason(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.front() == '/') return "is absolute";
  for (char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == 0) return "has a NUL byte";
    // Printable ASCII only: control bytes could rewrite a terminal showing the path, and bytes
    // past 0x7F are not what Kubernetes names are made of.
    if (byte < 0x20 || byte > 0x7E) return fmt::format("has the non-printable byte 0x{:02x}", byte);
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(start, end - start);
    if (segment.empty()) return "has an empty segment (\"//\" or a trailing \"/\")";
    if (segment == "..") return "has a \"..\" segment";
    if (segment == ".") return "has a \".\" segment";
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> path_clash(const std::vector<TarEntry>& entries) {
  std::set<std::string_view> paths;
  for (const auto& entry : entries) {
    if (!paths.insert(entry.path).second) return fmt::format("\"{}\" twice", entry.path);
  }
  for (const auto& entry : entries) {
    const std::string_view path = entry.path;
    for (std::size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
      if (paths.contains(path.substr(0, slash))) {
        return fmt::format("\"{}\" both as a file and as a folder (of \"{}\")", path.substr(0, slash), path);
      }
    }
  }
  return std::nullopt;
}

}  // namespace tar_internal

namespace {

using namespace tar_internal;

// 8^11 - 1: the most an 11-digit octal field (size, mtime) holds.
constexpr std::uint64_t kMaxOctal11 = 077777777777ULL;

void put_text(unsigned char* block, Field field, std::string_view text) {
  std::memcpy(block + field.offset, text.data(), std::min(text.size(), field.width));
}

// `value` as width-1 octal digits with leading zeros and a NUL, as GNU tar and bsdtar write them.
void put_octal(unsigned char* block, Field field, std::uint64_t value) {
  put_text(block, field, fmt::format("{:0{}o}", value, field.width - 1));
}

// Where `path` splits into ustar's prefix and name: the index of the '/' between them, 0 when the
// whole path fits the name field, or nothing when no split fits.
std::optional<std::size_t> ustar_split(std::string_view path) {
  if (path.size() <= kName.width) return 0;
  for (std::size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
    if (slash > kPrefix.width) break;
    if (path.size() - slash - 1 <= kName.width) return slash;
  }
  return std::nullopt;
}

std::array<unsigned char, kBlockBytes> file_header(const TarEntry& entry, std::size_t split, std::int64_t mtime) {
  std::array<unsigned char, kBlockBytes> block{};
  const std::string_view path = entry.path;
  if (split == 0) {
    put_text(block.data(), kName, path);
  } else {
    put_text(block.data(), kPrefix, path.substr(0, split));
    put_text(block.data(), kName, path.substr(split + 1));
  }
  put_octal(block.data(), kMode, 0600);
  put_octal(block.data(), kUid, 0);
  put_octal(block.data(), kGid, 0);
  put_octal(block.data(), kSize, entry.data.size());
  put_octal(block.data(), kMtime, static_cast<std::uint64_t>(mtime));
  block[kTypeflag.offset] = '0';
  put_text(block.data(), kMagic, std::string_view("ustar\0", 6));
  put_text(block.data(), kVersion, "00");
  put_text(block.data(), kUname, "root");
  put_text(block.data(), kGname, "root");
  put_octal(block.data(), kDevMajor, 0);
  put_octal(block.data(), kDevMinor, 0);
  // Six octal digits, a NUL and a space: the form POSIX and GNU tar use.
  put_text(block.data(), kChecksum, fmt::format("{:06o}", header_checksum(block.data())));
  block[kChecksum.offset + 7] = ' ';
  return block;
}

Result<void> check_entries(const std::vector<TarEntry>& entries, std::int64_t mtime_unix) {
  if (mtime_unix < 0 || static_cast<std::uint64_t>(mtime_unix) > kMaxOctal11) {
    return fail(Errc::invalid_argument,
                fmt::format("cannot write a tar archive with mtime {}: ustar holds 0 to {}", mtime_unix, kMaxOctal11));
  }
  for (const auto& entry : entries) {
    if (auto reason = unsafe_path_reason(entry.path)) {
      return fail(Errc::invalid_argument,
                  fmt::format("cannot put \"{}\" in a tar archive: the path {}", entry.path, *reason));
    }
    if (!ustar_split(entry.path)) {
      return fail(Errc::invalid_argument,
                  fmt::format("cannot put \"{}\" in a tar archive: ustar holds a path of up to 100 bytes after its "
                              "last folders, and 155 bytes of folders; shorten the path",
                              entry.path));
    }
    if (entry.data.size() > kMaxOctal11) {
      return fail(Errc::invalid_argument, fmt::format("cannot put \"{}\" in a tar archive: its {} bytes are more than "
                                                      "ustar holds (8 GiB - 1)",
                                                      entry.path, entry.data.size()));
    }
  }
  if (auto clash = path_clash(entries)) {
    return fail(Errc::invalid_argument, fmt::format("cannot write a tar archive that holds {}", *clash));
  }
  return {};
}

// `tar` compressed as one gzip member. The gzip header is fixed (no name, mtime 0, OS "Unix"), so
// the output depends on the input only.
Result<std::string> gzip(std::string_view tar) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    return fail(Errc::internal, "cannot start gzip compression (zlib's deflateInit2 failed)");
  }
  gz_header header{};
  header.os = 3;  // Unix, whatever the build machine: zlib's default depends on it
  deflateSetHeader(&stream, &header);

  std::string out;
  std::array<unsigned char, 64 * 1024> buffer{};
  std::size_t fed = 0;
  int status = Z_OK;
  while (status == Z_OK) {
    if (stream.avail_in == 0 && fed < tar.size()) {
      // avail_in is 32 bits wide: a larger input goes in pieces.
      const std::size_t piece = std::min<std::size_t>(tar.size() - fed, std::numeric_limits<uInt>::max());
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(tar.data() + fed));
      stream.avail_in = static_cast<uInt>(piece);
      fed += piece;
    }
    stream.next_out = buffer.data();
    stream.avail_out = static_cast<uInt>(buffer.size());
    status = deflate(&stream, fed == tar.size() ? Z_FINISH : Z_NO_FLUSH);
    out.append(reinterpret_cast<const char*>(buffer.data()), buffer.size() - stream.avail_out);
  }
  deflateEnd(&stream);
  if (status != Z_STREAM_END) {
    return fail(Errc::internal, fmt::format("gzip compression failed (zlib status {})", status));
  }
  return out;
}

}  // namespace

Result<std::string> write_tar_gz(const std::vector<TarEntry>& entries, std::int64_t mtime_unix) {
  GPUCTL_TRY(check_entries(entries, mtime_unix));
  try {
    std::string tar;
    for (const auto& entry : entries) {
      const auto header = file_header(entry, *ustar_split(entry.path), mtime_unix);
      tar.append(reinterpret_cast<const char*>(header.data()), header.size());
      tar.append(entry.data);
      tar.append((kBlockBytes - entry.data.size() % kBlockBytes) % kBlockBytes, '\0');
    }
    tar.append(2 * kBlockBytes, '\0');  // the end of the archive
    return gzip(tar);
  } catch (const std::bad_alloc&) {
    return fail(Errc::internal, "not enough memory to build the tar archive");
  }
}

}  // namespace gpuctl::util
