// The reader of backup archives. The gzip stream is inflated on demand, straight into the entries'
// data: nothing holds the whole uncompressed archive, and inflating stops at
// TarReadLimits::max_total_bytes, so a gzip bomb costs at most that much memory. The gzip trailer
// (CRC-32 and length) is always checked before a result is returned.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <span>

#include <fmt/format.h>

#include "gpuctl/util/tar_gz.hpp"
#include "tar_gz_internal.hpp"

namespace gpuctl::util {
namespace {

using namespace tar_internal;

constexpr std::string_view kUseAnother = "the archive cannot be trusted, use another copy";
constexpr std::string_view kNotOurs = "use an archive written by gpuctl backup";

Error damaged(std::string_view source, std::string_view what) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = fmt::format("{} is truncated or damaged ({}); {}", source, what, kUseAnother);
  return e;
}

Error refused(std::string_view source, std::string_view what) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = fmt::format("{} {}", source, what);
  return e;
}

// The gzip member, inflated as the tar reader asks for bytes.
class GzipStream {
 public:
  GzipStream(std::string_view bytes, std::string_view source, std::size_t max_bytes)
      : bytes_(bytes), source_(source), max_bytes_(max_bytes) {}
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;
  ~GzipStream() {
    if (started_) inflateEnd(&stream_);
  }

  Result<void> start() {
    // 15 + 16: a gzip wrapper only, so a bare zlib or deflate stream is not taken for one.
    if (inflateInit2(&stream_, 15 + 16) != Z_OK) {
      return fail(Errc::internal, "cannot start gzip decompression (zlib's inflateInit2 failed)");
    }
    started_ = true;
    return {};
  }

  // Fills `out` with the next out.size() bytes; fewer only where the gzip stream ends. Refused
  // when they would take the uncompressed archive past the limit.
  Result<std::size_t> read(std::span<char> out) {
    if (out.size() > max_bytes_ - produced_) return fail(too_large());
    return inflate_into(out);
  }

  // How many more uncompressed bytes the limit allows.
  std::size_t remaining() const { return max_bytes_ - produced_; }

  // The refusal of an archive that expands past the limit.
  Error too_large() const {
    return refused(source_, fmt::format("expands to more than {} bytes, the most gpuctl reads from one archive; "
                                        "check that it is the right file",
                                        max_bytes_));
  }

  // Reads to the end of the gzip member (which checks its CRC-32 and length), refusing anything
  // but zeros (tar pads its last record with them) and any byte after the member.
  Result<void> finish() {
    std::array<char, 16 * 1024> scratch{};
    while (!ended_) {
      const std::size_t room = std::min(scratch.size(), max_bytes_ - produced_);
      // At the limit, one more byte says whether the stream goes on past it.
      GPUCTL_TRY_ASSIGN(const std::size_t got,
                        inflate_into(std::span<char>(scratch.data(), std::max<std::size_t>(room, 1))));
      if (room == 0 && got != 0) return fail(too_large());
      if (std::any_of(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(got),
                      [](char c) { return c != 0; })) {
        return fail(refused(source_, fmt::format("has data after the end of its tar archive; {}", kUseAnother)));
      }
    }
    if (stream_.avail_in != 0 || fed_ < bytes_.size()) {
      return fail(refused(source_, fmt::format("has data after the end of its gzip stream; {}", kUseAnother)));
    }
    return {};
  }

 private:
  Result<std::size_t> inflate_into(std::span<char> out) {
    std::size_t done = 0;
    while (done < out.size() && !ended_) {
      refill();
      const std::size_t want = std::min<std::size_t>(out.size() - done, std::numeric_limits<uInt>::max());
      stream_.next_out = reinterpret_cast<Bytef*>(out.data() + done);
      stream_.avail_out = static_cast<uInt>(want);
      const int status = inflate(&stream_, Z_NO_FLUSH);
      done += want - stream_.avail_out;
      produced_ += want - stream_.avail_out;
      if (status == Z_STREAM_END) {
        ended_ = true;
      } else if (status == Z_BUF_ERROR) {
        // No progress was possible: all input is in and the member has not ended.
        return fail(damaged(source_, "the compressed stream ends early"));
      } else if (status == Z_MEM_ERROR) {
        return fail(Errc::internal, fmt::format("not enough memory to decompress {}", source_));
      } else if (status != Z_OK) {
        // Z_DATA_ERROR covers a CRC-32 or length mismatch in the trailer and invalid deflate data.
        return fail(damaged(source_, fmt::format("gzip: {}", stream_.msg ? stream_.msg : "invalid data")));
      }
    }
    return done;
  }

  void refill() {
    if (stream_.avail_in != 0 || fed_ == bytes_.size()) return;
    // avail_in is 32 bits wide: a larger archive goes in pieces.
    const std::size_t piece = std::min<std::size_t>(bytes_.size() - fed_, std::numeric_limits<uInt>::max());
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes_.data() + fed_));
    stream_.avail_in = static_cast<uInt>(piece);
    fed_ += piece;
  }

  std::string_view bytes_;
  std::string_view source_;
  std::size_t max_bytes_;
  z_stream stream_{};
  bool started_ = false;
  bool ended_ = false;
  std::size_t fed_ = 0;
  std::size_t produced_ = 0;
};

// `text` in double quotes, every byte outside printable ASCII as \xNN: archive paths reach
// messages before they are known to be safe to print.
std::string printable_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7E || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A numeric field: optional leading spaces, octal digits, then only NULs and spaces (the forms
// POSIX, GNU tar and bsdtar write). GNU's base-256 form (first byte 0x80) is not accepted.
std::optional<std::uint64_t> octal_field(const unsigned char* block, Field field) {
  std::size_t i = 0;
  while (i < field.width && block[field.offset + i] == ' ') ++i;
  std::uint64_t value = 0;
  std::size_t digits = 0;
  for (; i < field.width && block[field.offset + i] >= '0' && block[field.offset + i] <= '7'; ++i, ++digits) {
    value = value * 8 + (block[field.offset + i] - '0');  // 12 digits at most: no overflow
  }
  for (; i < field.width; ++i) {
    if (block[field.offset + i] != '\0' && block[field.offset + i] != ' ') return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  return value;
}

std::string text_field(const unsigned char* block, Field field) {
  const auto* begin = reinterpret_cast<const char*>(block + field.offset);
  return std::string(begin, std::find(begin, begin + field.width, '\0'));
}

struct Header {
  std::string path;
  char type = '0';
  std::uint64_t size = 0;
};

Result<Header> parse_header(const unsigned char* block, std::size_t offset, std::string_view source) {
  const auto checksum = octal_field(block, kChecksum);
  if (!checksum || *checksum != header_checksum(block)) {
    return fail(damaged(source, fmt::format("the tar header at byte {} has a wrong checksum", offset)));
  }
  const std::string_view magic(reinterpret_cast<const char*>(block + kMagic.offset), 8);
  const bool posix = magic == std::string_view(
                                  "ustar\0"
                                  "00",
                                  8);
  if (!posix && magic != std::string_view("ustar  \0", 8)) {
    return fail(refused(source, fmt::format("is not a ustar tar archive (the header at byte {} has no ustar magic); {}",
                                            offset, kNotOurs)));
  }
  Header header;
  header.type = static_cast<char>(block[kTypeflag.offset]);
  const auto size = octal_field(block, kSize);
  if (!size) {
    return fail(
        damaged(source, fmt::format("the size field of the tar header at byte {} is not an octal number", offset)));
  }
  header.size = *size;
  // Only POSIX ustar has a prefix: old GNU headers keep other fields (atime, ctime) there.
  const std::string prefix = posix ? text_field(block, kPrefix) : std::string();
  header.path = prefix.empty() ? text_field(block, kName) : prefix + "/" + text_field(block, kName);
  return header;
}

// Why an entry of type `type` is refused, or nothing for regular files and directories.
std::optional<std::string> refused_type(char type) {
  switch (type) {
    case '0':
    case '\0':
    case '5': return std::nullopt;
    case '1': return "a hard link";
    case '2': return "a symbolic link";
    case '3': return "a character device";
    case '4': return "a block device";
    case '6': return "a FIFO";
    default: return fmt::format("an entry of type {}", printable_quoted(std::string_view(&type, 1)));
  }
}

// Refuses what an entry's header says before its data is read: extensions, non-regular types,
// unsafe paths and sizes past the limits.
Result<void> check_header(const Header& header, std::size_t offset, std::size_t entries, std::string_view source,
                          const TarReadLimits& limits) {
  if (header.type == 'L' || header.type == 'K') {
    return fail(refused(source, fmt::format("has a GNU long-name header at byte {}, which gpuctl never writes (its "
                                            "paths fit ustar's 255 bytes); {}",
                                            offset, kNotOurs)));
  }
  if (header.type == 'x' || header.type == 'g') {
    return fail(refused(
        source, fmt::format("has a pax extended header at byte {}, which gpuctl never writes; {}", offset, kNotOurs)));
  }
  if (auto what = refused_type(header.type)) {
    return fail(refused(source, fmt::format("holds {}, {}; gpuctl archives hold only regular files: {}",
                                            printable_quoted(header.path), *what, kNotOurs)));
  }
  // A directory entry's name ends with '/'; it is skipped, but a hostile one is still refused.
  std::string_view path = header.path;
  if (header.type == '5' && path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (auto reason = unsafe_path_reason(path)) {
    return fail(refused(
        source, fmt::format("holds the unsafe path {} (it {}); {}", printable_quoted(header.path), *reason, kNotOurs)));
  }
  if (header.type != '5' && entries >= limits.max_entries) {
    return fail(refused(source, fmt::format("holds more than {} files, the most gpuctl reads from one archive; check "
                                            "that it is the right file",
                                            limits.max_entries)));
  }
  if (header.size > limits.max_entry_bytes) {
    return fail(refused(source, fmt::format("holds {} of {} bytes, more than the {} gpuctl reads for one file; check "
                                            "that it is the right file",
                                            printable_quoted(header.path), header.size, limits.max_entry_bytes)));
  }
  return {};
}

// An entry's data and the padding to its block boundary. The buffer is reserved once (no copies
// while it grows), within what the limit still allows, and filled in steps of at most 1 MiB: a
// header that claims more than the stream holds gets address space, but no more touched memory
// than the stream gave.
Result<std::string> read_data(GzipStream& stream, const Header& header, std::string_view source) {
  constexpr std::size_t kStep = std::size_t{1} << 20;
  const auto size = static_cast<std::size_t>(header.size);
  const std::size_t padded = (size + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
  if (padded > stream.remaining()) return fail(stream.too_large());
  std::string data;
  data.reserve(padded);
  while (data.size() < padded) {
    const std::size_t step = std::min(kStep, padded - data.size());
    const std::size_t old = data.size();
    data.resize(old + step);
    GPUCTL_TRY_ASSIGN(const std::size_t got, stream.read(std::span<char>(data.data() + old, step)));
    if (got < step) {
      return fail(damaged(source, fmt::format("{} needs {} bytes, the archive ends after {}",
                                              printable_quoted(header.path), size, old + got)));
    }
  }
  data.resize(size);
  return data;
}

Result<std::vector<TarEntry>> read_entries(GzipStream& stream, std::string_view source, const TarReadLimits& limits) {
  std::vector<TarEntry> entries;
  std::array<unsigned char, kBlockBytes> block{};
  const auto block_span = std::span<char>(reinterpret_cast<char*>(block.data()), block.size());
  std::size_t offset = 0;
  for (;;) {
    GPUCTL_TRY_ASSIGN(const std::size_t got, stream.read(block_span));
    if (got < kBlockBytes) {
      return fail(damaged(source, got == 0 ? "the tar archive ends without its end-of-archive blocks"
                                           : "the tar archive ends inside a header"));
    }
    if (std::all_of(block.begin(), block.end(), [](unsigned char b) { return b == 0; })) {
      // The first of the two zero blocks that end the archive.
      GPUCTL_TRY_ASSIGN(const std::size_t second, stream.read(block_span));
      if (second < kBlockBytes || std::any_of(block.begin(), block.end(), [](unsigned char b) { return b != 0; })) {
        return fail(damaged(source, fmt::format("the tar archive has a lone zero block at byte {}", offset)));
      }
      return entries;
    }
    GPUCTL_TRY_ASSIGN(Header header, parse_header(block.data(), offset, source));
    GPUCTL_TRY(check_header(header, offset, entries.size(), source, limits));
    GPUCTL_TRY_ASSIGN(std::string data, read_data(stream, header, source));
    offset += kBlockBytes + (data.size() + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
    if (header.type != '5') entries.push_back(TarEntry{std::move(header.path), std::move(data)});
  }
}

}  // namespace

Result<std::vector<TarEntry>> read_tar_gz(std::string_view bytes, std::string_view source,
                                          const TarReadLimits& limits) {
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f ||
      static_cast<unsigned char>(bytes[1]) != 0x8b) {
    return fail(refused(source, fmt::format("is not a gzip-compressed tar archive; {}", kNotOurs)));
  }
  try {
    GzipStream stream(bytes, source, limits.max_total_bytes);
    GPUCTL_TRY(stream.start());
    GPUCTL_TRY_ASSIGN(std::vector<TarEntry> entries, read_entries(stream, source, limits));
    GPUCTL_TRY(stream.finish());
    if (auto clash = path_clash(entries)) {
      return fail(
          refused(source, fmt::format("holds {}, which cannot be restored side by side; {}", *clash, kNotOurs)));
    }
    return entries;
  } catch (const std::bad_alloc&) {
    return fail(Errc::internal, fmt::format("not enough memory to read {}", source));
  }
}

}  // namespace gpuctl::util
