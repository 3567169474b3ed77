# Warnings for gpuctl's own code only (third-party headers are included as SYSTEM).
add_library(gpuctl_warnings INTERFACE)
target_compile_options(gpuctl_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wcast-align -Wunused -Wnull-dereference -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(GPUCTL_WARNINGS_AS_ERRORS)
  target_compile_options(gpuctl_warnings INTERFACE -Werror)
endif()
