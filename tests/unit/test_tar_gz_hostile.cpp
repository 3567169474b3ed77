// Hostile and damaged archives for util::read_tar_gz: each is refused with one line that names the
// archive, says what is wrong and what to do, and nothing is returned from a damaged stream. The
// tar headers are built here byte by byte, so each case breaks exactly one thing.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpuctl/util/tar_gz.hpp"

using gpuctl::Errc;
using gpuctl::util::read_tar_gz;
using gpuctl::util::TarEntry;
using gpuctl::util::TarReadLimits;
using gpuctl::util::write_tar_gz;

namespace {

constexpr const char* kDamaged = "; the archive cannot be trusted, use another copy";

void put(std::string& block, std::size_t offset, std::string_view text) { block.replace(offset, text.size(), text); }

// A ustar header with a correct checksum; `size_field` as it will stand in the header.
std::string header(const std::string& path, char type, const std::string& size_field) {
  std::string block(512, '\0');
  put(block, 0, path);
  put(block, 100, "0000600");
  put(block, 108, "0000000");
  put(block, 116, "0000000");
  put(block, 124, size_field);
  put(block, 136, "14524110400");
  block[156] = type;
  put(block, 257,
      std::string_view("ustar\0"
                       "00",
                       8));
  put(block, 148, "        ");
  unsigned sum = 0;
  for (unsigned char c : block) sum += c;
  char checksum[8];
  std::snprintf(checksum, sizeof checksum, "%06o", sum);
  put(block, 148, std::string_view(checksum, 7));
  return block;
}

std::string octal_size(std::size_t size) {
  char field[12];
  std::snprintf(field, sizeof field, "%011zo", size);
  return field;
}

// A whole entry: its header, its data and the padding to a block.
std::string file(const std::string& path, const std::string& data, char type = '0') {
  return header(path, type, octal_size(data.size())) + data + std::string((512 - data.size() % 512) % 512, '\0');
}

const std::string kEnd(1024, '\0');

std::string gzip(const std::string& raw) {
  z_stream stream{};
  REQUIRE(deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&stream, raw.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  stream.avail_in = static_cast<uInt>(raw.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&stream, Z_FINISH) == Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

gpuctl::Error refusal(const std::string& bytes, const TarReadLimits& limits = {}) {
  auto read = read_tar_gz(bytes, "backup.tar.gz", limits);
  REQUIRE_FALSE(read.has_value());
  CHECK(read.error().code == Errc::invalid_argument);
  CHECK_THAT(read.error().message, Catch::StartsWith("backup.tar.gz "));
  CHECK(read.error().message.find('\n') == std::string::npos);
  return read.error();
}

std::string damaged(const std::string& what) {
  return "backup.tar.gz is truncated or damaged (" + what + ")" + kDamaged;
}

}  // namespace

TEST_CASE("tar_gz: the hand-built archive of the hostile tests is read when nothing is broken", "[tar_gz]") {
  auto read = read_tar_gz(gzip(file("a.yaml", "a: 1\n") + file("dir/", "", '5') + file("dir/b", "b") + kEnd), "x");
  REQUIRE(read.has_value());
  CHECK(*read == std::vector<TarEntry>{{"a.yaml", "a: 1\n"}, {"dir/b", "b"}});
}

TEST_CASE("tar_gz: bytes that are not gzip are refused", "[tar_gz]") {
  const std::string message =
      "backup.tar.gz is not a gzip-compressed tar archive; use an archive written by gpuctl backup";
  CHECK(refusal("").message == message);
  CHECK(refusal("\x1f").message == message);
  CHECK(refusal(file("a", "plain tar") + kEnd).message == message);
  CHECK(refusal("apiVersion: v1\nkind: List\n").message == message);
}

TEST_CASE("tar_gz: an archive truncated anywhere is refused", "[tar_gz]") {
  auto archive = write_tar_gz({{"a.yaml", std::string(2000, 'a')}, {"b.yaml", "bee"}}, 1700000000);
  REQUIRE(archive.has_value());
  for (std::size_t keep = 0; keep < archive->size(); ++keep) {
    INFO("kept " << keep << " of " << archive->size() << " bytes");
    auto error = refusal(archive->substr(0, keep));
    if (keep >= 2) CHECK_THAT(error.message, Catch::Contains("is truncated or damaged (") && Catch::EndsWith(kDamaged));
  }
  CHECK(refusal(archive->substr(0, archive->size() - 8)).message == damaged("the compressed stream ends early"));
}

TEST_CASE("tar_gz: any byte flipped in the compressed data or its trailer is refused", "[tar_gz]") {
  auto archive = write_tar_gz({{"a.yaml", "apiVersion: v1\nkind: ConfigMap\n"}, {"b.bin", std::string(700, 'z')}}, 0);
  REQUIRE(archive.has_value());
  // From byte 10 on: the gzip header before it is not covered by any checksum (mtime, OS).
  for (std::size_t at = 10; at < archive->size(); ++at) {
    INFO("byte " << at << " of " << archive->size());
    std::string broken = *archive;
    broken[at] = static_cast<char>(broken[at] ^ 0xFF);
    auto error = refusal(broken);
    CHECK_THAT(error.message, Catch::Contains("truncated or damaged") || Catch::Contains("unsafe path") ||
                                  Catch::Contains("entry of type"));
  }
  std::string bad_crc = *archive;
  bad_crc[bad_crc.size() - 8] = static_cast<char>(bad_crc[bad_crc.size() - 8] ^ 0x01);
  CHECK(refusal(bad_crc).message == damaged("gzip: incorrect data check"));
  std::string bad_length = *archive;
  bad_length[bad_length.size() - 4] = static_cast<char>(bad_length[bad_length.size() - 4] ^ 0x01);
  CHECK(refusal(bad_length).message == damaged("gzip: incorrect length check"));
}

TEST_CASE("tar_gz: broken tar headers and sizes are refused", "[tar_gz]") {
  std::string bad_checksum = file("a", "x");
  bad_checksum[0] = 'b';
  CHECK(refusal(gzip(bad_checksum + kEnd)).message == damaged("the tar header at byte 0 has a wrong checksum"));

  CHECK(refusal(gzip(file("ok", "1") + header("a", '0', "00000000x12") + kEnd)).message ==
        damaged("the size field of the tar header at byte 1024 is not an octal number"));
  // GNU's base-256 size form: gpuctl's sizes always fit octal.
  CHECK(refusal(gzip(header("a", '0', std::string("\x80\0\0\0\0\0\0\0\0\0\0\x01", 12)) + kEnd)).message ==
        damaged("the size field of the tar header at byte 0 is not an octal number"));

  // A header that claims more data than the archive holds.
  CHECK(refusal(gzip(header("big", '0', octal_size(100000)) + std::string(1024, 'd'))).message ==
        damaged("\"big\" needs 100000 bytes, the archive ends after 1024"));

  std::string old_tar = file("a", "x");
  put(old_tar, 257, std::string(8, '\0'));
  put(old_tar, 148, "        ");
  unsigned sum = 0;
  for (unsigned char c : old_tar.substr(0, 512)) sum += c;
  char checksum[8];
  std::snprintf(checksum, sizeof checksum, "%06o", sum);
  put(old_tar, 148, std::string_view(checksum, 7));
  CHECK_THAT(refusal(gzip(old_tar + kEnd)).message, Catch::StartsWith("backup.tar.gz is not a ustar tar archive"));
}

TEST_CASE("tar_gz: the end of the archive must be two zero blocks with only zeros and nothing after", "[tar_gz]") {
  CHECK(refusal(gzip(file("a", "x"))).message == damaged("the tar archive ends without its end-of-archive blocks"));
  CHECK(refusal(gzip(file("a", "x") + std::string(512, '\0'))).message ==
        damaged("the tar archive has a lone zero block at byte 1024"));
  CHECK(refusal(gzip(file("a", "x") + std::string(700, '\0'))).message ==
        damaged("the tar archive has a lone zero block at byte 1024"));
  CHECK(refusal(gzip(file("a", "x") + std::string(300, 'h'))).message ==
        damaged("the tar archive ends inside a header"));
  // Zeros after the end are tar's record padding; anything else is refused.
  CHECK(read_tar_gz(gzip(file("a", "x") + kEnd + std::string(9216, '\0')), "x").has_value());
  CHECK(refusal(gzip(file("a", "x") + kEnd + file("hidden", "y"))).message ==
        "backup.tar.gz has data after the end of its tar archive; the archive cannot be trusted, use another copy");

  const std::string good = gzip(file("a", "x") + kEnd);
  const std::string after =
      "backup.tar.gz has data after the end of its gzip stream; the archive cannot be "
      "trusted, use another copy";
  CHECK(refusal(good + "garbage").message == after);
  CHECK(refusal(good + good).message == after);
  CHECK(refusal(good + std::string(1, '\0')).message == after);
}

TEST_CASE("tar_gz: path traversal and absolute paths are refused", "[tar_gz]") {
  CHECK(refusal(gzip(file("../evil", "x") + kEnd)).message ==
        "backup.tar.gz holds the unsafe path \"../evil\" (it has a \"..\" segment); use an archive written by gpuctl "
        "backup");
  CHECK(refusal(gzip(file("/etc/cron.d/x", "x") + kEnd)).message ==
        "backup.tar.gz holds the unsafe path \"/etc/cron.d/x\" (it is absolute); use an archive written by gpuctl "
        "backup");
  CHECK_THAT(refusal(gzip(file("a/../../b", "x") + kEnd)).message, Catch::Contains("has a \"..\" segment"));
  CHECK_THAT(refusal(gzip(file("./a", "x") + kEnd)).message, Catch::Contains("has a \".\" segment"));
  CHECK_THAT(refusal(gzip(file("a//b", "x") + kEnd)).message, Catch::Contains("has an empty segment"));
  CHECK_THAT(refusal(gzip(file("../", "", '5') + kEnd)).message, Catch::Contains("has a \"..\" segment"));
  // Control bytes reach the message escaped, never raw.
  CHECK_THAT(refusal(gzip(file("a\x1b[2Jb", "x") + kEnd)).message,
             Catch::Contains("\"a\\x1b[2Jb\" (it has the non-printable byte 0x1b)"));
  // A ustar prefix that climbs out.
  std::string prefixed = header("evil", '0', octal_size(1));
  put(prefixed, 345, "..");
  put(prefixed, 148, "        ");
  unsigned sum = 0;
  for (unsigned char c : prefixed) sum += c;
  char checksum[8];
  std::snprintf(checksum, sizeof checksum, "%06o", sum);
  put(prefixed, 148, std::string_view(checksum, 7));
  CHECK_THAT(refusal(gzip(prefixed + std::string(512, 'x') + kEnd)).message,
             Catch::Contains("unsafe path \"../evil\""));
}

TEST_CASE("tar_gz: links, devices and extension headers are refused", "[tar_gz]") {
  std::string symlink = header("link", '2', octal_size(0));
  CHECK(refusal(gzip(symlink + kEnd)).message ==
        "backup.tar.gz holds \"link\", a symbolic link; gpuctl archives hold only regular files: use an archive "
        "written by gpuctl backup");
  CHECK_THAT(refusal(gzip(header("hard", '1', octal_size(0)) + kEnd)).message, Catch::Contains("a hard link"));
  CHECK_THAT(refusal(gzip(header("dev", '3', octal_size(0)) + kEnd)).message, Catch::Contains("a character device"));
  CHECK_THAT(refusal(gzip(header("fifo", '6', octal_size(0)) + kEnd)).message, Catch::Contains("a FIFO"));
  CHECK_THAT(refusal(gzip(header("odd", 'Z', octal_size(0)) + kEnd)).message,
             Catch::Contains("\"odd\", an entry of type \"Z\""));
  CHECK_THAT(refusal(gzip(file("././@LongLink", std::string(200, 'n'), 'L') + kEnd)).message,
             Catch::Contains("has a GNU long-name header at byte 0"));
  CHECK_THAT(refusal(gzip(file("PaxHeaders/a", "30 path=../../../etc/passwd\n", 'x') + kEnd)).message,
             Catch::Contains("has a pax extended header at byte 0"));
}

TEST_CASE("tar_gz: a path held twice or as both file and folder is refused", "[tar_gz]") {
  CHECK(refusal(gzip(file("a", "1") + file("a", "2") + kEnd)).message ==
        "backup.tar.gz holds \"a\" twice, which cannot be restored side by side; use an archive written by gpuctl "
        "backup");
  CHECK_THAT(refusal(gzip(file("a", "1") + file("a/b", "2") + kEnd)).message,
             Catch::Contains("\"a\" both as a file and as a folder (of \"a/b\")"));
}

TEST_CASE("tar_gz: the read limits hold", "[tar_gz]") {
  const std::string three = gzip(file("a", "1") + file("b", "2") + file("c", "3") + kEnd);
  TarReadLimits two_entries;
  two_entries.max_entries = 2;
  CHECK(refusal(three, two_entries).message ==
        "backup.tar.gz holds more than 2 files, the most gpuctl reads from one archive; check that it is the right "
        "file");
  TarReadLimits small_entries;
  small_entries.max_entry_bytes = 100;
  CHECK(read_tar_gz(gzip(file("a", std::string(100, 'a')) + kEnd), "x", small_entries).has_value());
  CHECK(refusal(gzip(file("a", std::string(101, 'a')) + kEnd), small_entries).message ==
        "backup.tar.gz holds \"a\" of 101 bytes, more than the 100 gpuctl reads for one file; check that it is the "
        "right file");
  // The limit is on the whole uncompressed stream, headers and padding included: 3 files are 3 KiB + 1 KiB.
  TarReadLimits four_kib;
  four_kib.max_total_bytes = 4096;
  CHECK(read_tar_gz(three, "x", four_kib).has_value());
  four_kib.max_total_bytes = 4095;
  CHECK_THAT(refusal(three, four_kib).message, Catch::StartsWith("backup.tar.gz expands to more than 4095 bytes"));
}

TEST_CASE("tar_gz: a gzip bomb is stopped at the limit while inflating", "[tar_gz]") {
  // 64 MiB (and a byte) of zeros compress to about 64 KiB: once as one file's data, once as padding after the end.
  const std::string zeros((std::size_t{64} << 20) + 1, '\0');
  const std::string as_data = gzip(header("bomb", '0', octal_size(zeros.size())) + zeros + kEnd);
  const std::string as_padding = gzip(file("a", "x") + kEnd + zeros);
  CHECK(as_data.size() < 200 * 1024);
  TarReadLimits limits;
  limits.max_total_bytes = 1 << 20;
  limits.max_entry_bytes = 128 << 20;
  CHECK(refusal(as_data, limits).message ==
        "backup.tar.gz expands to more than 1048576 bytes, the most gpuctl reads from one archive; check that it is "
        "the right file");
  CHECK_THAT(refusal(as_padding, limits).message, Catch::StartsWith("backup.tar.gz expands to more than 1048576"));
  // Within the default limits, zero padding is fine and a file of 64 MiB and a byte is one too many.
  CHECK(read_tar_gz(as_padding, "x").has_value());
  CHECK_THAT(refusal(as_data).message, Catch::Contains("more than the 67108864 gpuctl reads for one file"));
}
