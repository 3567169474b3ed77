#include "gpuctl/util/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "gpuctl/util/cancel.hpp"

namespace gpuctl::util {
namespace {

Error io_error(std::string_view verb, std::string_view path, int error) {
  Error e;
  e.code = Errc::io;
  e.message = fmt::format("cannot {} {}: {}", verb, path, std::strerror(error));
  return e;
}

// The folder part of `path` ("." for a bare name) and its last segment.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// The temporary file: closed and removed unless it was renamed into place.
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    close();
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  // O_EXCL never opens a file someone else made (a planted symlink included); a clash of names
  // (EEXIST) is retried with another random part.
  Result<void> create(const std::string& folder, const std::string& name, const std::string& final_path) {
    std::random_device seed;
    std::mt19937_64 random(seed());
    for (int attempt = 0; attempt < 16; ++attempt) {
      std::string path = fmt::format("{}/.{}.tmp-{}-{:016x}", folder, name, ::getpid(), random());
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd >= 0) {
        fd_ = fd;
        path_ = std::move(path);
        return {};
      }
      if (errno != EEXIST) return fail(io_error("write", final_path, errno));
    }
    return fail(io_error("write", final_path, EEXIST));
  }

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // After the rename: there is nothing left to remove.
  void forget() { path_.clear(); }
  int close() {
    if (fd_ < 0) return 0;
    const int status = ::close(fd_);
    fd_ = -1;
    return status;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

Result<void> write_all(int fd, std::string_view data, const std::string& final_path) {
  while (!data.empty()) {
    if (cancelled()) return fail(cancelled_error(fmt::format("writing {}", final_path)));
    // Pieces of at most 1 GiB: some kernels refuse or shorten larger writes.
    const ssize_t written = ::write(fd, data.data(), std::min<std::size_t>(data.size(), std::size_t{1} << 30));
    if (written < 0) {
      if (errno == EINTR) continue;
      return fail(io_error("write", final_path, errno));
    }
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return {};
}

// Without this the rename may be lost in a crash even though the file's data were synced.
Result<void> sync_folder(const std::string& folder, const std::string& final_path) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(io_error("sync the folder of", final_path, errno));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some file systems cannot sync a folder (EINVAL): the rename is done, nothing more can be had.
  if (status != 0 && error != EINVAL) return fail(io_error("sync the folder of", final_path, error));
  return {};
}

}  // namespace

Result<void> write_file_atomically(const std::string& final_path, std::string_view data, mode_t mode) {
  const auto [folder, name] = split_path(final_path);
  if (name.empty()) {
    return fail(Errc::invalid_argument,
                fmt::format("cannot write {}: the path names a folder, not a file", final_path));
  }
  struct stat existing{};
  if (::stat(final_path.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode)) {
    return fail(Errc::invalid_argument,
                fmt::format("cannot write {}: it is a folder; give the path of a file to write", final_path));
  }
  TempFile temp;
  GPUCTL_TRY(temp.create(folder, name, final_path));
  GPUCTL_TRY(write_all(temp.fd(), data, final_path));
  // fchmod, not the open's mode: the umask applies to that one, and a mode wider than 0600 is
  // given only once the content is complete.
  if (::fchmod(temp.fd(), mode) != 0) return fail(io_error("write", final_path, errno));
  if (::fsync(temp.fd()) != 0) return fail(io_error("write", final_path, errno));
  // close() reports delayed write errors (NFS) that fsync may not have.
  if (temp.close() != 0) return fail(io_error("write", final_path, errno));
  if (cancelled()) return fail(cancelled_error(fmt::format("writing {}", final_path)));
  if (::rename(temp.path().c_str(), final_path.c_str()) != 0) return fail(io_error("write", final_path, errno));
  temp.forget();
  return sync_folder(folder, final_path);
}

}  // namespace gpuctl::util
