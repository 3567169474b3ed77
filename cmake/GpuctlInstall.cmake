# Everything `cmake --install` puts under the prefix, in one place; the .deb (GpuctlPackage.cmake)
# packages exactly this tree with the prefix /usr. tests/package/deb.sh checks both layouts.
#
#   bin/gpuctl                                  the binary
#   bin/kubectl-gpu -> gpuctl                   kubectl's plugin name (relative link): `kubectl gpu`
#   share/man/man1/gpuctl*.1.gz                 the man pages gpuctl writes from its command tree
#   share/man/man1/kubectl-gpu.1.gz -> gpuctl.1.gz  every program in bin has a page (man kubectl-gpu)
#   share/man/man1/kubectl_complete-gpu.1.gz -> gpuctl-completion.1.gz
#   share/doc/gpuctl/{copyright,changelog.gz}   what Debian policy asks of every package
#   share/bash-completion/completions/gpuctl    bash (bash-completion loads it on first use)
#   share/zsh/site-functions/_gpuctl            zsh ($fpath)
#   share/fish/vendor_completions.d/gpuctl.fish fish
#   bin/kubectl_complete-gpu                    kubectl's completion of `kubectl gpu`
include(GNUInstallDirs)

# Directories the install creates get 0755 whatever the umask: Debian (lintian) and every
# shared prefix expect them, and a 0700 share/man would hide the pages from other users.
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

find_program(GPUCTL_GZIP gzip REQUIRED)
mark_as_advanced(GPUCTL_GZIP)
set(GPUCTL_MAN_BUILD_DIR "${CMAKE_BINARY_DIR}/man")  # written by gpuctl __man (cli/CMakeLists.txt)
set(GPUCTL_DEBIAN_DIR "${PROJECT_SOURCE_DIR}/packaging/debian")
set(GPUCTL_INSTALL_STEPS "${CMAKE_CURRENT_LIST_DIR}/GpuctlInstallSteps.cmake")

install(TARGETS gpuctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# kubectl runs any `kubectl-<name>` on PATH as `kubectl <name>`. A relative link, so it survives
# DESTDIR staging and a moved prefix; made at install time, since install(FILES) cannot make one.
# The man pages: gpuctl writes them into build/man after every link; they are installed gzipped,
# as Debian policy wants and man-db reads transparently, at install time rather than build time
# so that a build of the gpuctl target alone can be installed. Then the native package's
# changelog.gz and the machine-readable copyright, under /usr/local as under /usr.
string(CONFIGURE [[
  include("@GPUCTL_INSTALL_STEPS@")
  gpuctl_install_link("@CMAKE_INSTALL_BINDIR@" kubectl-gpu gpuctl)
  file(GLOB _gpuctl_pages "@GPUCTL_MAN_BUILD_DIR@/*.1")
  if(NOT _gpuctl_pages)
    message(FATAL_ERROR "no man pages in @GPUCTL_MAN_BUILD_DIR@: build the gpuctl target first")
  endif()
  gpuctl_install_gzipped("@CMAKE_INSTALL_MANDIR@/man1" "@GPUCTL_GZIP@" ${_gpuctl_pages})
  gpuctl_install_link("@CMAKE_INSTALL_MANDIR@/man1" kubectl-gpu.1.gz gpuctl.1.gz)
  gpuctl_install_link("@CMAKE_INSTALL_MANDIR@/man1" kubectl_complete-gpu.1.gz gpuctl-completion.1.gz)
  gpuctl_install_gzipped("@CMAKE_INSTALL_DOCDIR@" "@GPUCTL_GZIP@" "@GPUCTL_DEBIAN_DIR@/changelog")
]] _gpuctl_install_code @ONLY)
install(CODE "${_gpuctl_install_code}")
install(FILES ${GPUCTL_DEBIAN_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- Completions ------------------------------------------------------------------------------
# gpuctl prints its scripts (cli/CMakeLists.txt writes them into build/completions after every
# link); each shell's own folder under the prefix, where bash-completion, zsh's $fpath and fish
# look on their own. kubectl_complete-gpu is kubectl's plugin completion (kubectl >= 1.26): kubectl
# runs it with the words after `kubectl gpu` and reads cobra's answer, which `gpuctl __complete`
# gives; it runs the gpuctl beside it, so it works from any prefix.
set(GPUCTL_COMPLETIONS_BUILD_DIR "${CMAKE_BINARY_DIR}/completions")
file(WRITE "${GPUCTL_COMPLETIONS_BUILD_DIR}/kubectl_complete-gpu"
  "#!/bin/sh\n"
  "# kubectl's completion of the gpu plugin (kubectl gpu <TAB>), installed with gpuctl.\n"
  "# The gpuctl beside it (nothing but the shell: kubectl may run it with a bare PATH).\n"
  "case $0 in */*) exec \"\${0%/*}/gpuctl\" __complete \"$@\" ;; esac\n"
  "exec gpuctl __complete \"$@\"\n")
file(CHMOD "${GPUCTL_COMPLETIONS_BUILD_DIR}/kubectl_complete-gpu"
     PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
install(FILES ${GPUCTL_COMPLETIONS_BUILD_DIR}/gpuctl
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${GPUCTL_COMPLETIONS_BUILD_DIR}/_gpuctl DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
install(FILES ${GPUCTL_COMPLETIONS_BUILD_DIR}/gpuctl.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
install(PROGRAMS ${GPUCTL_COMPLETIONS_BUILD_DIR}/kubectl_complete-gpu DESTINATION ${CMAKE_INSTALL_BINDIR})
