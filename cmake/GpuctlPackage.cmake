# The Debian package: `cpack -G DEB` in the build tree packages what GpuctlInstall.cmake installs,
# with the prefix /usr. Checked by tests/package/deb.sh (lintian without errors or warnings, then
# installed into an empty root with dpkg --root).
#
# lintian's remaining tags are all info level (lintian --display-info):
#   hardening-no-bindnow, hardening-no-fortify-functions: the build uses CMake's flags, not
#     dpkg-buildflags' (-Wl,-z,now, -D_FORTIFY_SOURCE=2); a build-flag choice, not packaging.
#   binary-has-unneeded-section .comment: CMake's strip keeps the compiler's version note.
#   spelling-error-in-binary: pieces of longer strings in the binary, not words.
set(GPUCTL_PACKAGE_MAINTAINER "gpuctl maintainers <maintainers@users.noreply.a-seed-4a35436d.example>"
    CACHE STRING "The .deb's Maintainer field: Name <address>")
set(GPUCTL_PACKAGE_HOMEPAGE "" CACHE STRING "The .deb's Homepage field (left out when empty)")

# packaging/debian/changelog.gz is the package's changelog: its newest entry must be this version,
# or dpkg and lintian would describe a package that does not exist.
file(STRINGS ${PROJECT_SOURCE_DIR}/packaging/debian/changelog _gpuctl_changelog_top LIMIT_COUNT 1)
if(NOT _gpuctl_changelog_top MATCHES "^gpuctl \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "packaging/debian/changelog starts with '${_gpuctl_changelog_top}', not version "
                      "${PROJECT_VERSION} (project() in CMakeLists.txt): add an entry for it")
endif()

# `out`: the dependency that the shlibs file of the package holding `soname` gives for the
# library `name` `major` (e.g. "libcurl4 (>= 7.88.1)"); empty, with a warning, off Debian.
function(gpuctl_debian_shlibs_dependency out soname name major)
  set(${out} "" PARENT_SCOPE)
  execute_process(COMMAND dpkg-query -S "*/${soname}" OUTPUT_VARIABLE owners RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT owners MATCHES "^([^:, ]+(:[a-z0-9]+)?): ")
    message(WARNING "no Debian package holds ${soname}: the .deb will not depend on it")
    return()
  endif()
  execute_process(COMMAND dpkg-query --control-path "${CMAKE_MATCH_1}" shlibs OUTPUT_VARIABLE shlibs
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(shlibs AND EXISTS "${shlibs}")
    file(STRINGS "${shlibs}" lines REGEX "^${name} ${major} ")
  endif()
  if(NOT lines)
    message(WARNING "${CMAKE_MATCH_1} has no shlibs entry for ${name} ${major}: the .deb will not depend on it")
    return()
  endif()
  list(GET lines 0 line)
  string(REGEX REPLACE "^${name} ${major} " "" dependency "${line}")
  set(${out} "${dependency}" PARENT_SCOPE)
endfunction()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuctl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "${GPUCTL_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "command-line tool for the admins of GPU clusters on Kubernetes")
set(CPACK_PACKAGE_DESCRIPTION [[
gpuctl answers the questions the admins of GPU clusters on Kubernetes ask
every day: which GPUs exist, which are free, which are broken, and what to do
about it. It talks to the Kubernetes API directly and to the nodes through
ssh and nvidia-smi, and lists nodes and GPUs, taints, cordons and drains
nodes, submits and follows jobs, reports GPU quotas, diagnoses failing
workloads, and backs up and restores a cluster's objects.

It is also a kubectl plugin: kubectl gpu nodes runs gpuctl nodes.]])
# Installed files are stripped (install --strip); the debug information stays in the build tree.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # gpuctl_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUCTL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
if(GPUCTL_PACKAGE_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${GPUCTL_PACKAGE_HOMEPAGE}")
endif()
# Depends is computed by dpkg-shlibdeps (dpkg-dev) from the libraries the binary links, with the
# versions Debian's shlibs/symbols files name, instead of a hand-written list that drifts.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libcurl is loaded with dlopen (lib/src/kube/curl_library.cpp), so dpkg-shlibdeps, which reads
# only the binary's NEEDED entries, cannot see it. Its dependency comes from the same place
# dpkg-shlibdeps would take it: the shlibs file of the Debian package that holds the SONAME.
gpuctl_debian_shlibs_dependency(_gpuctl_curl_depends libcurl.so.4 libcurl 4)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_gpuctl_curl_depends}")
# gpus, diagnose and the node checks run nvidia-smi over the system ssh; the API commands do not.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS openssh-client)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)  # control files 0644, as dpkg-deb makes them

# No source package: the repository is the source.
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
