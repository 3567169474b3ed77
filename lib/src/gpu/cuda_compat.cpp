// The CUDA a container needs, and NVIDIA's table of the minimum driver for each CUDA release
// (cuda_compat.hpp).
#include "gpuctl/gpu/cuda_compat.hpp"

#include <cstdio>
#include <regex>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::gpu {
namespace {

struct Row {
  int major, minor, update;
  const char* driver;
};

// NVIDIA CUDA Toolkit Release Notes, table "CUDA Toolkit and Corresponding Driver Versions",
// column "Toolkit Driver Version, Linux x86_64" (docs.nvidia.com/cuda/cuda-toolkit-release-notes,
// and the archived notes of each release). Update N of a release is its patch version N
// (CUDA 12.4 Update 1 is 12.4.1, the version nvidia/cuda image tags carry).
const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {11, 0, 0, "450.36.06"}, {11, 0, 2, "450.51.05"}, {11, 0, 3, "450.51.06"},  {11, 1, 0, "455.23"},
      {11, 1, 1, "455.32"},    {11, 2, 0, "460.27.03"}, {11, 2, 1, "460.32.03"},  {11, 2, 2, "460.32.03"},
      {11, 3, 0, "465.19.01"}, {11, 3, 1, "465.19.01"}, {11, 4, 0, "470.42.01"},  {11, 4, 1, "470.57.02"},
      {11, 4, 2, "470.57.02"}, {11, 4, 3, "470.82.01"}, {11, 4, 4, "470.82.01"},  {11, 5, 0, "495.29.05"},
      {11, 5, 1, "495.29.05"}, {11, 5, 2, "495.29.05"}, {11, 6, 0, "510.39.01"},  {11, 6, 1, "510.47.03"},
      {11, 6, 2, "510.47.03"}, {11, 7, 0, "515.43.04"}, {11, 7, 1, "515.48.07"},  {11, 8, 0, "520.61.05"},
      {12, 0, 0, "525.60.13"}, {12, 0, 1, "525.85.12"}, {12, 1, 0, "530.30.02"},  {12, 1, 1, "530.30.02"},
      {12, 2, 0, "535.54.03"}, {12, 2, 1, "535.86.09"}, {12, 2, 2, "535.104.05"}, {12, 3, 0, "545.23.06"},
      {12, 3, 1, "545.23.08"}, {12, 3, 2, "545.23.08"}, {12, 4, 0, "550.54.14"},  {12, 4, 1, "550.54.15"},
      {12, 5, 0, "555.42.02"}, {12, 5, 1, "555.42.06"}, {12, 6, 0, "560.28.03"},  {12, 6, 1, "560.35.03"},
      {12, 6, 2, "560.35.03"}, {12, 6, 3, "560.35.05"}, {12, 8, 0, "570.26"},     {12, 8, 1, "570.124.06"},
      {12, 9, 0, "575.51.03"}, {12, 9, 1, "575.57.08"}, {13, 0, 0, "580.65.06"},
  };
  return rows;
}

std::optional<CudaVersion> parse_cuda(std::string_view text) {
  CudaVersion v;
  int n = std::sscanf(std::string(text).c_str(), "%d.%d.%d", &v.major, &v.minor, &v.patch);
  if (n < 2 || v.major < 7 || v.major > 99 || v.minor < 0 || v.minor > 99) return std::nullopt;
  if (n < 3) v.patch = 0;
  return v;
}

std::optional<std::string> env_value(const nlohmann::json& container, std::string_view name) {
  for (const auto& e : kube::array_field(container, "env")) {
    if (kube::string_field(e, "name") == name && kube::field(e, "value").is_string()) {
      return e["value"].get<std::string>();
    }
  }
  return std::nullopt;
}

// The CUDA version an image reference names: the nvidia/cuda repository's tags start with it;
// framework images say "cuda12.1" or "cu121" in theirs.
std::optional<CudaVersion> cuda_of_image(const std::string& image) {
  auto colon = image.rfind(':');
  auto slash = image.rfind('/');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return std::nullopt;
  std::string repo = image.substr(0, colon), tag = image.substr(colon + 1);
  if (repo == "nvidia/cuda" || repo.ends_with("/nvidia/cuda") || repo.ends_with("/cuda")) {
    if (auto v = parse_cuda(tag)) return v;
  }
  static const std::regex spelled(R"((?:^|[^a-z])cuda-?(\d{2})\.(\d)(?:\.(\d+))?)", std::regex::icase);
  static const std::regex short_form(R"((?:^|[^a-z0-9])cu(\d{2})(\d)(?:[^0-9]|$))", std::regex::icase);
  std::smatch m;
  if (std::regex_search(tag, m, spelled)) {
    return CudaVersion{std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 0};
  }
  if (std::regex_search(tag, m, short_form)) return CudaVersion{std::stoi(m[1]), std::stoi(m[2]), 0};
  return std::nullopt;
}

}  // namespace

std::string CudaVersion::text() const {
  return patch > 0 ? fmt::format("{}.{}.{}", major, minor, patch) : fmt::format("{}.{}", major, minor);
}

std::optional<DriverVersion> parse_driver_version(std::string_view text) {
  DriverVersion v;
  v.text = std::string(text);
  int n = std::sscanf(v.text.c_str(), "%d.%d.%d", &v.major, &v.minor, &v.patch);
  if (n < 2 || v.major <= 0) return std::nullopt;
  if (n < 3) v.patch = 0;
  return v;
}

bool older(const DriverVersion& a, const DriverVersion& b) {
  if (a.major != b.major) return a.major < b.major;
  if (a.minor != b.minor) return a.minor < b.minor;
  return a.patch < b.patch;
}

std::optional<CudaNeed> cuda_needed_by(const nlohmann::json& container) {
  // The image's own ENV is not in the API; a container spec that sets these says so itself.
  if (auto require = env_value(container, "NVIDIA_REQUIRE_CUDA")) {
    auto at = require->find("cuda>=");
    if (at != std::string::npos) {
      if (auto v = parse_cuda(std::string_view(*require).substr(at + 6))) {
        return CudaNeed{*v, "env NVIDIA_REQUIRE_CUDA=" + *require};
      }
    }
  }
  if (auto version = env_value(container, "CUDA_VERSION")) {
    if (auto v = parse_cuda(*version)) return CudaNeed{*v, "env CUDA_VERSION=" + *version};
  }
  std::string image = kube::string_field(container, "image");
  if (auto v = cuda_of_image(image)) return CudaNeed{*v, "image " + image};
  return std::nullopt;
}

std::optional<DriverVersion> minimum_driver(const CudaVersion& cuda) {
  const Row* best = nullptr;
  for (const auto& r : table()) {
    if (r.major != cuda.major || r.minor != cuda.minor) continue;
    if (r.update <= cuda.patch) best = &r;  // the newest update not after the one asked for
  }
  if (best == nullptr) return std::nullopt;
  return parse_driver_version(best->driver);
}

}  // namespace gpuctl::gpu
