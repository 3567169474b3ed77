# Generates build_info.cpp with the version and the git commit the binary is built from.
# Runs at every build (cheap) but only rewrites the file when the commit changes, so an
# unchanged tree does not relink.
set(GPUCTL_BUILD_INFO_CPP "${CMAKE_BINARY_DIR}/generated/build_info.cpp")
add_custom_target(gpuctl_build_info
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DOUTPUT=${GPUCTL_BUILD_INFO_CPP}
    -DVERSION=${PROJECT_VERSION}
    -P ${CMAKE_CURRENT_LIST_DIR}/WriteBuildInfo.cmake
  BYPRODUCTS ${GPUCTL_BUILD_INFO_CPP}
  COMMENT "Stamping the git commit into gpuctl"
  VERBATIM)
