// driver-too-old-for-cuda: what CUDA a container says it needs (env, image tags as NVIDIA and the
// frameworks write them), NVIDIA's minimum-driver table, and the check over a real GFD-labelled node.
#include <catch2/catch.hpp>

#include "diagnose_builders.hpp"
#include "gpuctl/gpu/cuda_compat.hpp"

using namespace gpuctl::testing::dx;
using gpuctl::gpu::cuda_needed_by;
using gpuctl::gpu::minimum_driver;

namespace {

json container(const std::string& image, json env = json::array()) {
  return {{"name", "main"}, {"image", image}, {"env", std::move(env)}};
}

std::string needed(const json& c) {
  auto need = cuda_needed_by(c);
  return need ? need->cuda.text() + " from " + need->source : "-";
}

}  // namespace

TEST_CASE("the CUDA a container needs: its env first, then the image tag", "[diagnose][cuda]") {
  CHECK(needed(container("nvidia/cuda:12.4.1-base-ubuntu22.04")) ==
        "12.4.1 from image nvidia/cuda:12.4.1-base-ubuntu22.04");
  CHECK(needed(container("nvcr.io/nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04")) ==
        "11.8 from image nvcr.io/nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04");
  CHECK(needed(container("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime")) ==
        "12.1 from image pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime");
  CHECK(needed(container("vllm/vllm-openai:v0.6.3-cu121")) == "12.1 from image vllm/vllm-openai:v0.6.3-cu121");
  CHECK(needed(container("registry:5000/nvidia/cuda:12.2.2-devel")) ==
        "12.2.2 from image registry:5000/nvidia/cuda:12.2.2-devel");
  // The env, when the spec sets it, says more than the tag.
  CHECK(needed(container("ubuntu:22.04", {{{"name", "NVIDIA_REQUIRE_CUDA"},
                                           {"value", "cuda>=12.4 brand=tesla,driver>=470,driver<471"}}})) ==
        "12.4 from env NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471");
  CHECK(needed(container("ubuntu:22.04", {{{"name", "CUDA_VERSION"}, {"value", "11.6.2"}}})) ==
        "11.6.2 from env CUDA_VERSION=11.6.2");
  // Tags that name no CUDA: nothing is assumed.
  for (const char* image : {"nvcr.io/nvidia/pytorch:24.05-py3", "ubuntu:22.04", "busybox", "nvidia/cuda",
                            "docs/cumulus:1.2", "localhost:5000/img"}) {
    INFO(image);
    CHECK(needed(container(image)) == "-");
  }
}

TEST_CASE("NVIDIA's minimum driver per CUDA release", "[diagnose][cuda]") {
  CHECK(minimum_driver({12, 4, 0})->text == "550.54.14");
  CHECK(minimum_driver({12, 4, 1})->text == "550.54.15");
  CHECK(minimum_driver({12, 2, 2})->text == "535.104.05");
  CHECK(minimum_driver({11, 6, 127})->text == "510.47.03");  // a runtime's build number: the newest update
  CHECK(minimum_driver({11, 0, 0})->text == "450.36.06");
  CHECK_FALSE(minimum_driver({12, 7, 0}));  // there is no CUDA 12.7
  CHECK_FALSE(minimum_driver({10, 2, 0}));
}

TEST_CASE("driver-too-old-for-cuda compares the pod's CUDA with its node's GFD driver labels", "[diagnose][cuda]") {
  json node = fixture_gpu_node();  // rke2 A16 vGPU: GFD labels driver 550.90.07, CUDA 12.4
  REQUIRE(node["metadata"]["labels"].contains("nvidia.com/cuda.driver-version.full"));
  std::string driver = node["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"];
  json newer = pod("ml", "new", "nori", 1), fits = pod("ml", "fits", "nori", 1);
  newer["spec"]["containers"][0]["image"] = "nvidia/cuda:12.8.1-base-ubuntu24.04";
  fits["spec"]["containers"][0]["image"] = "nvidia/cuda:11.8.0-base-ubuntu22.04";
  auto f = d::check_driver_too_old_for_cuda(snapshot({{Source::nodes, {node}}, {Source::pods, {newer, fits}}}));
  REQUIRE(f.size() == 1);
  CHECK(f[0].node == "nori");
  CHECK(contains(f[0].summary, "ml/new container main needs CUDA 12.8.1 but nori's driver " + driver));
  CHECK(contains(f[0].summary, "CUDA 12.8 needs driver >= 570.26"));
  CHECK(f[0].evidence[0].text == "image nvidia/cuda:12.8.1-base-ubuntu24.04");
  // A node without GFD's driver labels is not judged from the API.
  node["metadata"]["labels"].erase("nvidia.com/cuda.driver-version.full");
  for (auto it = node["metadata"]["labels"].begin(); it != node["metadata"]["labels"].end();) {
    it = it.key().starts_with("nvidia.com/cuda.driver") ? node["metadata"]["labels"].erase(it) : std::next(it);
  }
  CHECK(d::check_driver_too_old_for_cuda(snapshot({{Source::nodes, {node}}, {Source::pods, {newer}}})).empty());
}
