# Unity builds (RINGSYNC_UNITY, on by default): a target's sources compile 8
# to a unit, so the headers they share (Asio, Beast, doctest, the standard
# library: most of each source's compile time) are parsed and their templates
# instantiated once per unit, not once per file. Helpers in a source's
# anonymous namespace must therefore not share a name with another source's
# of the same target in the same enclosing namespace (the build says which
# when they do); the test files keep their whole body in a namespace named
# for the file (tests/CMakeLists.txt). Off: every source alone, as usual.
option(RINGSYNC_UNITY "Build each target's sources 8 to a unit (faster builds)" ON)

function(ringsync_unity target)
  if(RINGSYNC_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    # GCC takes a source included into a unit for a header, and warns when a
    # coroutine's frame holds a type of that source's anonymous namespace
    # ("has no linkage"): true of a header, not of a unit.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  endif()
endfunction()
