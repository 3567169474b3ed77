# The install steps install(FILES) cannot do: a symbolic link and gzipped copies. Included by
# cmake_install.cmake at install time (GpuctlInstall.cmake), where CMAKE_INSTALL_PREFIX is the
# prefix given to `cmake --install` and DESTDIR, when set, is prepended as install(FILES) does.
# Each file made is added to the install manifest (install_manifest.txt, what cpack packages).

# The directory `rel` under the install-time prefix and DESTDIR.
function(gpuctl_install_dir out rel)
  set(${out} "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${rel}" PARENT_SCOPE)
endfunction()

# A relative symbolic link `name` -> `target` in the directory `rel`.
function(gpuctl_install_link rel name target)
  gpuctl_install_dir(dir "${rel}")
  message(STATUS "Installing: ${dir}/${name} -> ${target}")
  file(MAKE_DIRECTORY "${dir}")
  file(REMOVE "${dir}/${name}")
  file(CREATE_LINK "${target}" "${dir}/${name}" SYMBOLIC)
  set(CMAKE_INSTALL_MANIFEST_FILES ${CMAKE_INSTALL_MANIFEST_FILES} "${dir}/${name}" PARENT_SCOPE)
endfunction()

# Each of `files` gzipped into the directory `rel` as <name>.gz, mode 0644. gzip -n leaves out
# the name and time stamp, so the same input always gives the same bytes.
function(gpuctl_install_gzipped rel gzip)
  gpuctl_install_dir(dir "${rel}")
  file(MAKE_DIRECTORY "${dir}")
  set(made)
  foreach(src IN LISTS ARGN)
    get_filename_component(name "${src}" NAME)
    message(STATUS "Installing: ${dir}/${name}.gz")
    execute_process(COMMAND "${gzip}" -9 -n -c "${src}" OUTPUT_FILE "${dir}/${name}.gz" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "gzip ${src}: ${rc}")
    endif()
    file(CHMOD "${dir}/${name}.gz" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    list(APPEND made "${dir}/${name}.gz")
  endforeach()
  set(CMAKE_INSTALL_MANIFEST_FILES ${CMAKE_INSTALL_MANIFEST_FILES} ${made} PARENT_SCOPE)
endfunction()
