#pragma once
// Helpers shared by the kubeconfig, exec-credential and process tests: a fresh temporary
// folder per test, and small file utilities.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "fakes/fixtures.hpp"  // GPUCTL_FIXTURES_DIR, GPUCTL_TEST_DATA_DIR

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

// (Written without istreambuf_iterator and literal + string chains: GCC 12 at -O2 reports
// false -Wnull-dereference / -Warray-bounds warnings for those.)
inline std::string read_file(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) return {};
  std::string content(size, '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(content.data(), static_cast<std::streamsize>(size));
  content.resize(static_cast<std::size_t>(in.gcount()));
  return content;
}

inline std::string fixture(const std::string& name) {
  std::string path = GPUCTL_FIXTURES_DIR;
  path.append("/kubeconfig/").append(name);
  return path;
}

inline std::string test_data(const std::string& name) {
  std::string path = GPUCTL_TEST_DATA_DIR;
  path.append("/kubeconfig/").append(name);
  return path;
}

}  // namespace gpuctl_test

// --- kubeconfig loading ---
#include "gpuctl/kube/config.hpp"

namespace gpuctl_test {

// Options that read exactly one kubeconfig (as --kubeconfig does) and nothing from the
// environment.
inline gpuctl::kube::LoadOptions only_file(const std::string& path, std::optional<std::string> context = {}) {
  gpuctl::kube::LoadOptions o;
  o.kubeconfig = path;
  o.context = std::move(context);
  return o;
}

// Options with $KUBECONFIG set, as a list of files.
inline gpuctl::kube::LoadOptions kubeconfig_env(const std::string& list, std::optional<std::string> context = {}) {
  gpuctl::kube::LoadOptions o;
  o.kubeconfig_env = list;
  o.context = std::move(context);
  return o;
}

inline gpuctl::kube::RestConfig expect_loads(const gpuctl::kube::LoadOptions& options) {
  auto r = gpuctl::kube::load_rest_config(options);
  if (!r) FAIL("load_rest_config failed: " << r.error().message);
  return *r;
}

// The error's message; the code must be Errc::config.
inline std::string expect_error(const gpuctl::kube::LoadOptions& options) {
  auto r = gpuctl::kube::load_rest_config(options);
  if (r) FAIL("expected an error, got a configuration for server " << r->server);
  CHECK(r.error().code == gpuctl::Errc::config);
  return r.error().message;
}

// Text with every occurrence of `from` replaced.
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

inline const std::string kFakeCaPem =
    "-----BEGIN CERTIFICATE-----\nMIIBfakeCAforgpuctltests\n-----END CERTIFICATE-----\n";
inline const std::string kFakeCertPem =
    "-----BEGIN CERTIFICATE-----\nMIIBfakeClientCertificate\n-----END CERTIFICATE-----\n";
inline const std::string kFakeKeyPem = "-----BEGIN PRIVATE KEY-----\nMIIEfakeClientKey\n-----END PRIVATE KEY-----\n";
// The same, base64-encoded as kubeconfig *-data fields hold them.
inline const std::string kFakeCaB64 =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlQ0Fmb3JncHVjdGx0ZXN0cwotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==";
inline const std::string kFakeCertB64 =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlQ2xpZW50Q2VydGlmaWNhdGUKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
inline const std::string kFakeKeyB64 =
    "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUVmYWtlQ2xpZW50S2V5Ci0tLS0tRU5EIFBSSVZBVEUgS0VZLS0tLS0K";

}  // namespace gpuctl_test
