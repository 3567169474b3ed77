# Warnings for gpuctl's own code only (third-party headers are included as SYSTEM).
add_library(gpuctl_warnings INTERFACE)
target_compile_options(gpuctl_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wcast-align -Wunused -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
# GCC 12 reports false -Warray-bounds/-Wstringop-* positives inside libstdc++'s std::string at -O2
# (GCC bugs 105329, 105651); they are fixed in GCC 13, so silence them only for older GCC.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(gpuctl_warnings INTERFACE -Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread -Wno-restrict)
endif()
if(GPUCTL_WARNINGS_AS_ERRORS)
  target_compile_options(gpuctl_warnings INTERFACE -Werror)
endif()
