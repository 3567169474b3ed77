# Sanitizer builds. GPUCTL_SANITIZE (the asan preset): everything, tests included, built with
# AddressSanitizer and UBSan, every UB report fatal, and libstdc++'s bounds assertions.
# GPUCTL_FUZZ (scripts/fuzz, clang only): the same plus libFuzzer's coverage instrumentation, so
# the library the fuzz targets link is instrumented too; tests/fuzz then builds libFuzzer binaries.
option(GPUCTL_SANITIZE "Build with -fsanitize=address,undefined and _GLIBCXX_ASSERTIONS" OFF)
option(GPUCTL_FUZZ "Build the libFuzzer targets of tests/fuzz (clang; implies GPUCTL_SANITIZE)" OFF)

if(GPUCTL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GPUCTL_FUZZ needs clang (configure with CXX=clang++-19); this is ${CMAKE_CXX_COMPILER_ID}")
  endif()
  set(GPUCTL_SANITIZE ON)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(GPUCTL_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_definitions(_GLIBCXX_ASSERTIONS)
  add_link_options(-fsanitize=address,undefined)
  # GCC 12's -Wmaybe-uninitialized reports false positives inside libstdc++ (std::function in
  # <regex>) once ASan instruments the code, which -Werror would turn into a failed build.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()
