#pragma once
#include <string_view>

namespace gpuctl {
// The release version (from CMake's project()) and the git commit the binary was built from,
// with "-dirty" appended when the tree had uncommitted changes.
std::string_view build_version();
std::string_view build_commit();
}  // namespace gpuctl
