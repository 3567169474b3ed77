// util::write_file_atomically: the file appears whole with its mode whatever the umask, an
// existing one is replaced whole, and a failure or an interruption leaves neither a temporary file
// nor a changed target behind.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "gpuctl/util/atomic_file.hpp"
#include "gpuctl/util/cancel.hpp"
#include "test_kubeconfig_support.hpp"

using gpuctl::Errc;
using gpuctl::util::write_file_atomically;
using gpuctl_test::TempDir;

namespace {

std::vector<std::string> names_in(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(folder)) names.push_back(item.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

mode_t mode_of(const std::string& path) {
  struct stat info{};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

// Sets the umask for one scope.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

}  // namespace

TEST_CASE("atomic_file: a new file has the content and mode 0600 even with a permissive umask", "[atomic_file]") {
  TempDir dir;
  const std::string path = dir.str() + "/backup.tar.gz";
  Umask permissive(0);
  const std::string data("binary\0data\xff", 12);
  REQUIRE(write_file_atomically(path, data).has_value());
  CHECK(gpuctl_test::read_file(path) == data);
  CHECK(mode_of(path) == 0600);
  CHECK(names_in(dir.str()) == std::vector<std::string>{"backup.tar.gz"});

  // Another mode is given exactly, whatever the umask would have made of it.
  Umask strict(077);
  REQUIRE(write_file_atomically(dir.str() + "/shared", "x", 0644).has_value());
  CHECK(mode_of(dir.str() + "/shared") == 0644);
}

TEST_CASE("atomic_file: an existing file is replaced whole, its mode included", "[atomic_file]") {
  TempDir dir;
  const std::string path = dir.write("state.yaml", std::string(100000, 'o'));
  ::chmod(path.c_str(), 0644);
  REQUIRE(write_file_atomically(path, "new").has_value());
  CHECK(gpuctl_test::read_file(path) == "new");
  CHECK(mode_of(path) == 0600);
  REQUIRE(write_file_atomically(path, "").has_value());
  CHECK(gpuctl_test::read_file(path).empty());
  CHECK(names_in(dir.str()) == std::vector<std::string>{"state.yaml"});
}

TEST_CASE("atomic_file: a relative path is written in the current folder's terms", "[atomic_file]") {
  TempDir dir;
  const auto previous = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  auto written = write_file_atomically("plain-name", "here");
  std::filesystem::current_path(previous);
  REQUIRE(written.has_value());
  CHECK(gpuctl_test::read_file(dir.str() + "/plain-name") == "here");
  CHECK(names_in(dir.str()) == std::vector<std::string>{"plain-name"});
}

TEST_CASE("atomic_file: a missing folder fails with the path and the reason", "[atomic_file]") {
  TempDir dir;
  const std::string path = dir.str() + "/missing/backup.tar.gz";
  auto written = write_file_atomically(path, "x");
  REQUIRE_FALSE(written.has_value());
  CHECK(written.error().code == Errc::io);
  CHECK(written.error().message == "cannot write " + path + ": No such file or directory");
  CHECK(names_in(dir.str()).empty());
}

TEST_CASE("atomic_file: a read-only folder fails and leaves the old file and no temporary file", "[atomic_file]") {
  if (::geteuid() == 0) {
    // root writes into a folder of mode 0500 anyway; /proc refuses even root a new file.
    auto written = write_file_atomically("/proc/gpuctl-atomic-test", "x");
    REQUIRE_FALSE(written.has_value());
    CHECK(written.error().code == Errc::io);
    CHECK_THAT(written.error().message, Catch::StartsWith("cannot write /proc/gpuctl-atomic-test: "));
    return;
  }
  TempDir dir;
  const std::string path = dir.write("ro/backup.tar.gz", "old");
  ::chmod((dir.str() + "/ro").c_str(), 0500);
  auto written = write_file_atomically(path, "new");
  ::chmod((dir.str() + "/ro").c_str(), 0700);
  REQUIRE_FALSE(written.has_value());
  CHECK(written.error().message == "cannot write " + path + ": Permission denied");
  CHECK(gpuctl_test::read_file(path) == "old");
  CHECK(names_in(dir.str() + "/ro") == std::vector<std::string>{"backup.tar.gz"});
}

TEST_CASE("atomic_file: a full disk fails and leaves no temporary file", "[atomic_file]") {
  // /dev/full takes no folder entries, so the full disk is a file system of 64 KiB when one can be
  // mounted; else a write limit (RLIMIT_FSIZE) does: the write fails with EFBIG.
  TempDir dir;
  const std::string path = dir.write("backup.tar.gz", "old");
  struct rlimit old_limit{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);  // else the write kills the process
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  auto written = write_file_atomically(path, std::string(100000, 'n'));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE_FALSE(written.has_value());
  CHECK(written.error().code == Errc::io);
  CHECK(written.error().message == "cannot write " + path + ": File too large");
  CHECK(gpuctl_test::read_file(path) == "old");
  CHECK(names_in(dir.str()) == std::vector<std::string>{"backup.tar.gz"});
}

TEST_CASE("atomic_file: a folder as the target is refused", "[atomic_file]") {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "out");
  auto written = write_file_atomically(dir.str() + "/out", "x");
  REQUIRE_FALSE(written.has_value());
  CHECK(written.error().code == Errc::invalid_argument);
  CHECK(written.error().message ==
        "cannot write " + dir.str() + "/out: it is a folder; give the path of a file to write");
  CHECK(write_file_atomically(dir.str() + "/out/", "x").error().code == Errc::invalid_argument);
  CHECK(names_in(dir.str() + "/out").empty());
}

TEST_CASE("atomic_file: an interruption before the rename leaves the old file and no temporary file", "[atomic_file]") {
  TempDir dir;
  const std::string path = dir.write("backup.tar.gz", "old");
  gpuctl::util::request_cancel(SIGINT);
  auto written = write_file_atomically(path, "new");
  gpuctl::util::reset_cancel_for_tests();
  REQUIRE_FALSE(written.has_value());
  CHECK(written.error().code == Errc::cancelled);
  CHECK(gpuctl_test::read_file(path) == "old");
  CHECK(names_in(dir.str()) == std::vector<std::string>{"backup.tar.gz"});
}
