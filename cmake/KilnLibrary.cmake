# The library a program links: libkiln.a and libkiln.so, built from the same object and
# exporting the public API only (docs/packaging.md).
#
# The module libraries (kiln_base ... kiln_engine, and volk) are linked into one relocatable
# object, kiln.o (ld -r), in which objcopy turns every global symbol but kiln_* local. Hidden
# visibility alone is not enough for the archive: a static link still binds a program's
# vkCreateInstance to volk's function-pointer variable of that name (Debian 12's volk has no
# VOLK_NAMESPACE); a local symbol binds nothing outside kiln.o. libkiln.a holds kiln.o;
# libkiln.so is linked from it with a version script exporting kiln_* only. SPIRV-Tools stays
# out (tools.c without it: kiln_spirv_notools), so neither needs the C++ runtime.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
find_package(Threads REQUIRED)

set(KILN_LIBRARY_MODULES kiln_io kiln_engine kiln_shaders_cache kiln_vk kiln_spirv kiln_shape
                         kiln_symbolic kiln_base kiln_volk)
set(kiln_archives "")
foreach(module ${KILN_LIBRARY_MODULES})
  list(APPEND kiln_archives $<TARGET_FILE:${module}>)
endforeach()
set(KILN_OBJECT ${CMAKE_BINARY_DIR}/lib/kiln.o)
add_custom_command(
  OUTPUT ${KILN_OBJECT}
  COMMAND ${CMAKE_LINKER} -r -o ${KILN_OBJECT}.all --whole-archive ${kiln_archives}
          --no-whole-archive $<TARGET_OBJECTS:kiln_spirv_notools>
  COMMAND ${CMAKE_OBJCOPY} --wildcard --keep-global-symbol=kiln_* ${KILN_OBJECT}.all
          ${KILN_OBJECT}
  COMMAND ${CMAKE_COMMAND} -E rm -f ${KILN_OBJECT}.all
  DEPENDS ${KILN_LIBRARY_MODULES} kiln_spirv_notools $<TARGET_OBJECTS:kiln_spirv_notools>
  COMMENT "Linking kiln.o (the public API's symbols only)"
  COMMAND_EXPAND_LISTS VERBATIM)

# The libraries' users: the public headers, and what Kiln's objects call (pthreads, dlopen of
# the Vulkan loader by volk, libm, and cJSON for safetensors headers: a shared library, which
# libkiln.so records as needed and libkiln.a's users link). kiln_vulkan.h includes Vulkan's
# headers.
set(KILN_LINK_DEPS Threads::Threads ${CMAKE_DL_LIBS} m cjson)
function(kiln_library_target target type)
  add_library(${target} ${type} ${KILN_OBJECT})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME kiln LINKER_LANGUAGE C
                        ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
  target_include_directories(${target} INTERFACE
    $<BUILD_INTERFACE:${KILN_PUBLIC_INCLUDE}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} INTERFACE Vulkan::Headers)
endfunction()

kiln_library_target(kiln_static STATIC)
target_link_libraries(kiln_static INTERFACE ${KILN_LINK_DEPS})
set_target_properties(kiln_static PROPERTIES EXPORT_NAME kiln_static)

kiln_library_target(kiln_shared SHARED)
target_link_libraries(kiln_shared PRIVATE ${KILN_LINK_DEPS})
# The soname: libkiln.so.<major>, and libkiln.so.0.<minor> while the major version is 0 (every
# 0.x release may change the ABI).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(KILN_SOVERSION 0.${PROJECT_VERSION_MINOR})
else()
  set(KILN_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()
set_target_properties(kiln_shared PROPERTIES EXPORT_NAME kiln_shared
                      VERSION ${PROJECT_VERSION} SOVERSION ${KILN_SOVERSION}
                      LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/kiln.map)
target_link_options(kiln_shared PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/kiln.map)
if(NOT KILN_SANITIZE)
  # Every symbol resolved at link time (clang leaves a sanitizer's runtime to the program).
  target_link_options(kiln_shared PRIVATE -Wl,--no-undefined)
endif()

# Kiln::kiln: the shared library where the including project builds shared libraries
# (BUILD_SHARED_LIBS), else the static one; find_package(Kiln) chooses the same way.
if(BUILD_SHARED_LIBS)
  add_library(Kiln::kiln ALIAS kiln_shared)
else()
  add_library(Kiln::kiln ALIAS kiln_static)
endif()
add_library(Kiln::kiln_static ALIAS kiln_static)
add_library(Kiln::kiln_shared ALIAS kiln_shared)

# Installation: headers, both libraries, the CMake package and kiln.pc.
set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
install(FILES ${KILN_PUBLIC_INCLUDE}/kiln/kiln.h ${KILN_PUBLIC_INCLUDE}/kiln/kiln_vulkan.h
              ${KILN_PUBLIC_INCLUDE}/kiln/kiln_safetensors.h
              ${KILN_PUBLIC_INCLUDE}/kiln/kiln_base.h ${KILN_PUBLIC_INCLUDE}/kiln/status.def
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(TARGETS kiln_static kiln_shared EXPORT KilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(cmake/KilnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/lib/KilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
# 0.x: a minor release may break the API, so only the same minor version is compatible.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(kiln_compat SameMinorVersion)
else()
  set(kiln_compat SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/lib/KilnConfigVersion.cmake
  COMPATIBILITY ${kiln_compat})
install(FILES ${CMAKE_BINARY_DIR}/lib/KilnConfig.cmake ${CMAKE_BINARY_DIR}/lib/KilnConfigVersion.cmake
        DESTINATION ${KILN_CMAKE_DIR})
# kiln.pc finds its prefix from its own folder, so an install tree can move.
file(RELATIVE_PATH KILN_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/kiln.pc.in ${CMAKE_BINARY_DIR}/lib/kiln.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/lib/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
