# Everything `cmake --install` puts under the prefix, in one place; the .deb (GpuctlPackage.cmake)
# packages exactly this tree with the prefix /usr. tests/package/deb.sh checks both layouts.
#
#   bin/gpuctl                                  the binary
#   bin/kubectl-gpu -> gpuctl                   kubectl's plugin name (relative link): `kubectl gpu`
#   share/man/man1/gpuctl*.1.gz                 the man pages gpuctl writes from its command tree
#   share/man/man1/kubectl-gpu.1.gz -> gpuctl.1.gz  every program in bin has a page (man kubectl-gpu)
#   share/doc/gpuctl/{copyright,changelog.gz}   what Debian policy asks of every package
#   completions                                 see the marked block at the end
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
  gpuctl_install_gzipped("@CMAKE_INSTALL_DOCDIR@" "@GPUCTL_GZIP@" "@GPUCTL_DEBIAN_DIR@/changelog")
]] _gpuctl_install_code @ONLY)
install(CODE "${_gpuctl_install_code}")
install(FILES ${GPUCTL_DEBIAN_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- Completions: the lead wires these in with `gpuctl completion` ---------------------------
# The files to install, once the build writes them:
#   build/completions/gpuctl   (bash) -> ${CMAKE_INSTALL_DATADIR}/bash-completion/completions/gpuctl
#   build/completions/_gpuctl  (zsh)  -> ${CMAKE_INSTALL_DATADIR}/zsh/site-functions/_gpuctl
#   kubectl_complete-gpu (kubectl's plugin completion, a program) -> ${CMAKE_INSTALL_BINDIR}
# tests/package/deb.sh and tests/e2e/test_kubectl_plugin.py check each one that is installed.
# ---- end of completions ---------------------------------------------------------------------
