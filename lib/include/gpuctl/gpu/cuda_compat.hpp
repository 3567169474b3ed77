#pragma once
// What CUDA a container needs and which NVIDIA driver that takes. The minimum driver per CUDA
// release is NVIDIA's published table, kept as data (lib/src/gpu/cuda_compat.cpp).
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace gpuctl::gpu {

struct CudaVersion {
  int major = 0, minor = 0, patch = 0;
  std::string text() const;  // "12.4" or "12.4.1"
};

// "550.54.14" -> {550, 54, 14}; nullopt when it does not read.
struct DriverVersion {
  int major = 0, minor = 0, patch = 0;
  std::string text;
};
std::optional<DriverVersion> parse_driver_version(std::string_view text);
bool older(const DriverVersion& a, const DriverVersion& b);

// The CUDA a container says it needs, and where it says so: NVIDIA_REQUIRE_CUDA ("cuda>=12.4 ...")
// or CUDA_VERSION in its env, else its image tag (nvidia/cuda:12.4.1-..., ...-cuda12.1-...,
// ...cu121...). nullopt when neither says.
struct CudaNeed {
  CudaVersion cuda;
  std::string source;  // "image nvidia/cuda:12.4.1-base-ubuntu22.04", "env NVIDIA_REQUIRE_CUDA=cuda>=12.4"
};
std::optional<CudaNeed> cuda_needed_by(const nlohmann::json& container);

// The oldest Linux x86_64 driver NVIDIA lists for this CUDA release (its update when the patch
// number names one); nullopt for releases the table does not know.
std::optional<DriverVersion> minimum_driver(const CudaVersion& cuda);

}  // namespace gpuctl::gpu
