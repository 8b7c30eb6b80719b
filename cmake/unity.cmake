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
  endif()
endfunction()
