# kiln_module(<name> SOURCES ... DEPS ...): one static library per module. The module's folder
# is its include directory, visible to the modules that depend on it and to nobody else, so an
# upward include (symbolic/ including an engine/ header) fails to build.
function(kiln_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(kiln_${name} STATIC ${ARG_SOURCES})
  target_include_directories(kiln_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(kiln_${name} PRIVATE ${KILN_WARNINGS})
  target_link_libraries(kiln_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(kiln_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# kiln_program(<name> SOURCES ... DEPS ...): an executable with the project's warnings.
function(kiln_program name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${KILN_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()
