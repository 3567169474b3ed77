// The backup archive format (util/tar_gz.hpp): what gpuctl writes reads back the same, is the same
// bytes every time, and is a real tar.gz: the system's GNU tar lists and extracts it, and what GNU
// tar writes (regular files and folders) is read back. Hostile archives: test_tar_gz_hostile.cpp.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <sstream>
#include <string>
#include <vector>

#include "gpuctl/util/process.hpp"
#include "gpuctl/util/tar_gz.hpp"
#include "test_kubeconfig_support.hpp"

using gpuctl::Errc;
using gpuctl::util::read_tar_gz;
using gpuctl::util::TarEntry;
using gpuctl::util::write_tar_gz;
using gpuctl_test::TempDir;

namespace {

constexpr std::int64_t kMtime = 1700000000;  // 2023-11-14 22:13:20 UTC

std::vector<TarEntry> sample_entries() {
  std::string binary;
  for (int i = 0; i < 1000; ++i) binary.push_back(static_cast<char>(i * 7));
  return {
      {"manifest.json", "{\"apiVersion\":\"gpuctl.io/v1alpha1\"}\n"},
      {"empty", ""},
      {"exactly-one-block", std::string(512, 'b')},
      {"one-past-a-block", std::string(513, 'c')},
      {"binary.bin", binary},
      {"cluster/namespaces/team-a/resourcequotas/gpu-quota.yaml", "kind: ResourceQuota\n"},
      // 150 bytes: ustar splits it into a prefix and a name.
      {std::string(60, 'p') + "/" + std::string(40, 'q') + "/" + std::string(48, 'n') + ".y", "long path\n"},
  };
}

// Runs a program (argv only) and returns its stdout; the test fails when it does not succeed.
std::string run(std::vector<std::string> argv) {
  gpuctl::util::ProcessOptions options;
  options.argv = std::move(argv);
  options.capture_stderr = true;
  options.extra_env = {{"TZ", "UTC"}, {"LC_ALL", "C"}};
  options.timeout = std::chrono::seconds(30);
  auto result = gpuctl::util::run_process(options);
  REQUIRE(result.has_value());
  INFO(options.argv[0] << " said: " << result->stderr_text);
  REQUIRE(result->success());
  return result->stdout_text;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

}  // namespace

TEST_CASE("tar_gz: what is written reads back the same", "[tar_gz]") {
  const auto entries = sample_entries();
  auto archive = write_tar_gz(entries, kMtime);
  REQUIRE(archive.has_value());
  auto read = read_tar_gz(*archive, "backup.tar.gz");
  REQUIRE(read.has_value());
  CHECK(*read == entries);

  auto none = write_tar_gz({}, 0);
  REQUIRE(none.has_value());
  auto read_none = read_tar_gz(*none, "empty.tar.gz");
  REQUIRE(read_none.has_value());
  CHECK(read_none->empty());
}

TEST_CASE("tar_gz: the same entries give the same bytes", "[tar_gz]") {
  auto first = write_tar_gz(sample_entries(), kMtime);
  auto second = write_tar_gz(sample_entries(), kMtime);
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK(*first == *second);
  // The gzip header: magic, deflate, no flags (no file name), mtime 0, OS Unix.
  REQUIRE(first->size() > 10);
  CHECK(first->substr(0, 4) == std::string("\x1f\x8b\x08\x00", 4));
  CHECK(first->substr(4, 4) == std::string(4, '\0'));
  CHECK(static_cast<unsigned char>((*first)[9]) == 3);
  // Another mtime is another archive.
  CHECK(*write_tar_gz(sample_entries(), kMtime + 1) != *first);
}

TEST_CASE("tar_gz: the writer refuses paths that are unsafe or do not fit ustar", "[tar_gz]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "is empty"},
      {"/etc/passwd", "is absolute"},
      {"../evil", "has a \"..\" segment"},
      {"a/../../b", "has a \"..\" segment"},
      {"..", "has a \"..\" segment"},
      {"a/./b", "has a \".\" segment"},
      {".", "has a \".\" segment"},
      {"a//b", "has an empty segment"},
      {"a/", "has an empty segment"},
      {std::string("a\0b", 3), "has a NUL byte"},
      {"line\nbreak", "has the non-printable byte 0x0a"},
      {"esc\x1b[2J", "has the non-printable byte 0x1b"},
      {"caf\xc3\xa9", "has the non-printable byte 0xc3"},
      {std::string(101, 'x'), "ustar holds a path of up to 100 bytes"},
      {std::string(156, 'd') + "/name", "ustar holds a path of up to 100 bytes"},
      {"dir/" + std::string(101, 'x'), "ustar holds a path of up to 100 bytes"},
  };
  for (const auto& [path, reason] : cases) {
    INFO("path: " << path);
    auto archive = write_tar_gz({{path, "data"}}, kMtime);
    REQUIRE_FALSE(archive.has_value());
    CHECK(archive.error().code == Errc::invalid_argument);
    CHECK_THAT(archive.error().message, Catch::Contains(reason));
  }
  // The longest that fit: a 100-byte name, and 155 bytes of folders before a 100-byte name.
  CHECK(write_tar_gz({{std::string(100, 'x'), ""}}, kMtime).has_value());
  const std::string longest = std::string(155, 'd') + "/" + std::string(100, 'n');
  auto archive = write_tar_gz({{longest, "x"}}, kMtime);
  REQUIRE(archive.has_value());
  CHECK(read_tar_gz(*archive, "longest.tar.gz")->front().path == longest);
}

TEST_CASE("tar_gz: the writer refuses clashing paths and an mtime ustar cannot hold", "[tar_gz]") {
  auto twice = write_tar_gz({{"a", "1"}, {"a", "2"}}, kMtime);
  REQUIRE_FALSE(twice.has_value());
  CHECK(twice.error().message == "cannot write a tar archive that holds \"a\" twice");
  auto file_and_folder = write_tar_gz({{"a/b/c", "1"}, {"a/b", "2"}}, kMtime);
  REQUIRE_FALSE(file_and_folder.has_value());
  CHECK(file_and_folder.error().message ==
        "cannot write a tar archive that holds \"a/b\" both as a file and as a folder (of \"a/b/c\")");
  CHECK(write_tar_gz({{"a", "1"}}, -1).error().code == Errc::invalid_argument);
  CHECK(write_tar_gz({{"a", "1"}}, 077777777777LL + 1).error().code == Errc::invalid_argument);
  CHECK(write_tar_gz({{"a", "1"}}, 077777777777LL).has_value());
}

TEST_CASE("tar_gz: GNU tar lists and extracts what gpuctl writes", "[tar_gz]") {
  TempDir dir;
  const auto entries = sample_entries();
  auto archive = write_tar_gz(entries, kMtime);
  REQUIRE(archive.has_value());
  const std::string path = dir.write("backup.tar.gz", *archive);

  std::istringstream listing(run({"tar", "-tzvf", path}));
  std::vector<std::vector<std::string>> lines;
  for (std::string line; std::getline(listing, line);) lines.push_back(words(line));
  REQUIRE(lines.size() == entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    INFO("entry " << entries[i].path);
    REQUIRE(lines[i].size() == 6);
    CHECK(lines[i][0] == "-rw-------");
    CHECK(lines[i][1] == "root/root");
    CHECK(lines[i][2] == std::to_string(entries[i].data.size()));
    CHECK(lines[i][3] == "2023-11-14");
    CHECK(lines[i][4] == "22:13");
    CHECK(lines[i][5] == entries[i].path);
  }

  const std::string out = dir.str() + "/out";
  std::filesystem::create_directory(out);
  run({"tar", "-xzf", path, "-C", out});
  for (const auto& entry : entries) {
    INFO("entry " << entry.path);
    const std::string extracted = out + "/" + entry.path;
    CHECK(gpuctl_test::read_file(extracted) == entry.data);
    struct stat info{};
    REQUIRE(::stat(extracted.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0600);
    CHECK(info.st_mtime == kMtime);
  }
}

TEST_CASE("tar_gz: what GNU tar writes of regular files and folders reads back", "[tar_gz]") {
  TempDir dir;
  dir.write("src/a.txt", "alpha\n");
  dir.write("src/empty", "");
  dir.write("src/sub/deeper/b.yaml", std::string(3000, 'y'));
  const std::string long_name = std::string(70, 'l') + "/" + std::string(60, 'm') + ".yaml";
  dir.write("src/" + long_name, "long\n");
  const std::string src = dir.str() + "/src";

  for (const std::string& format : std::vector<std::string>{"gnu", "ustar"}) {
    INFO("format " << format);
    const std::string path = dir.str() + "/" + format + ".tar.gz";
    // Folders (sub, sub/deeper) come as directory entries, which are skipped; gnu writes a
    // 130-byte path only with a long-name header, so it is given only to ustar here.
    std::vector<std::string> argv = {"tar", "--format=" + format, "-C", src, "-czf", path, "a.txt", "empty", "sub"};
    if (format == "ustar") argv.push_back(long_name);
    run(argv);
    auto bytes = gpuctl_test::read_file(path);
    auto read = read_tar_gz(bytes, path);
    REQUIRE(read.has_value());
    std::vector<TarEntry> expected = {
        {"a.txt", "alpha\n"}, {"empty", ""}, {"sub/deeper/b.yaml", std::string(3000, 'y')}};
    if (format == "ustar") expected.push_back({long_name, "long\n"});
    CHECK(*read == expected);
  }
}

TEST_CASE("tar_gz: GNU long names and pax headers from GNU tar are refused as not gpuctl's", "[tar_gz]") {
  TempDir dir;
  const std::string long_name = std::string(120, 'l');
  dir.write("src/" + long_name, "x");
  dir.write("src/short", "x");
  const std::string src = dir.str() + "/src";

  const std::string gnu = dir.str() + "/gnu.tar.gz";
  run({"tar", "--format=gnu", "-C", src, "-czf", gnu, long_name});
  auto long_read = read_tar_gz(gpuctl_test::read_file(gnu), "gnu.tar.gz");
  REQUIRE_FALSE(long_read.has_value());
  CHECK(long_read.error().code == Errc::invalid_argument);
  CHECK(long_read.error().message ==
        "gnu.tar.gz has a GNU long-name header at byte 0, which gpuctl never writes (its paths fit ustar's 255 bytes); "
        "use an archive written by gpuctl backup");

  const std::string pax = dir.str() + "/pax.tar.gz";
  run({"tar", "--format=posix", "-C", src, "-czf", pax, "short"});
  auto pax_read = read_tar_gz(gpuctl_test::read_file(pax), "pax.tar.gz");
  REQUIRE_FALSE(pax_read.has_value());
  CHECK_THAT(pax_read.error().message, Catch::StartsWith("pax.tar.gz has a pax extended header at byte 0"));
}
