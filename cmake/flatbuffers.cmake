# ringsync_flatbuffers(TARGET name SCHEMAS a.fbs b.fbs):
# generates C++ headers from schemas into the build tree (never committed) and
# exposes them through an INTERFACE library.
function(ringsync_flatbuffers)
  cmake_parse_arguments(ARG "" "TARGET" "SCHEMAS" ${ARGN})
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/generated/ringsync/wire)
  set(headers)
  foreach(schema ${ARG_SCHEMAS})
    get_filename_component(stem ${schema} NAME_WE)
    set(header ${out_dir}/${stem}_generated.h)
    add_custom_command(
      OUTPUT ${header}
      COMMAND ${FLATC} --cpp --scoped-enums -o ${out_dir} ${CMAKE_CURRENT_SOURCE_DIR}/${schema}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${schema}
      COMMENT "flatc ${schema}")
    list(APPEND headers ${header})
  endforeach()
  add_custom_target(${ARG_TARGET}_gen DEPENDS ${headers})
  add_library(${ARG_TARGET} INTERFACE)
  add_dependencies(${ARG_TARGET} ${ARG_TARGET}_gen)
  target_include_directories(${ARG_TARGET} INTERFACE ${CMAKE_CURRENT_BINARY_DIR}/generated)
endfunction()
