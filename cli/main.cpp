// Placeholder until the command table lands.
#include "gpuctl/build_info.hpp"
#include <cstdio>
int main() {
  std::printf("gpuctl %.*s\n", static_cast<int>(gpuctl::build_version().size()), gpuctl::build_version().data());
  return 0;
}
