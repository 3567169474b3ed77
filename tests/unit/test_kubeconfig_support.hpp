#pragma once
// Helpers shared by the kubeconfig, exec-credential and process tests: a fresh temporary
// folder per test, and small file utilities.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace gpuctl_test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuctl-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // Writes `content` to `relative` (folders created) and returns the absolute path.
  std::string write(const std::string& relative, const std::string& content, bool executable = false) const {
    fs::path p = path_ / relative;
    fs::create_directories(p.parent_path());
    {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out << content;
    }
    if (executable) ::chmod(p.c_str(), 0755);
    return p.string();
  }

 private:
  fs::path path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string fixture(const std::string& name) {
  return std::string(GPUCTL_FIXTURES_DIR) + "/kubeconfig/" + name;
}

inline std::string test_data(const std::string& name) {
  return std::string(GPUCTL_TEST_DATA_DIR) + "/kubeconfig/" + name;
}

}  // namespace gpuctl_test
