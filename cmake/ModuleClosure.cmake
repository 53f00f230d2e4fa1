# expanse_module_closure(<target> <out_var>)
#
# The expanse_* libraries <target> links, directly or through other modules, found by walking
# each target's LINK_LIBRARIES (PUBLIC and PRIVATE alike, which is what ends up on the link
# line of a static library's users). Call it after every module is defined.
function(expanse_module_closure target out_var)
  get_property(modules GLOBAL PROPERTY EXPANSE_MODULES)
  set(seen "")
  set(pending ${target})
  while(pending)
    list(POP_FRONT pending current)
    get_target_property(libraries ${current} LINK_LIBRARIES)
    if(NOT libraries)
      continue()
    endif()
    foreach(library IN LISTS libraries)
      if(library MATCHES "^expanse::(.+)$")
        set(library "expanse_${CMAKE_MATCH_1}")
      endif()
      if(library IN_LIST modules AND NOT library IN_LIST seen)
        list(APPEND seen ${library})
        list(APPEND pending ${library})
      endif()
    endforeach()
  endwhile()
  list(TRANSFORM seen REPLACE "^expanse_" "")
  list(SORT seen)
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

# expanse_add_closure_test(<test name> <target> ALLOWED <module>...)
#
# A unit test that fails when <target> links a module outside ALLOWED: the module boundaries
# docs/architecture.md draws, checked on every run instead of by reading CMake files.
function(expanse_add_closure_test name target)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "ALLOWED")
  expanse_module_closure(${target} closure)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} "-DTARGET=${target}" "-DCLOSURE=${closure}"
            "-DALLOWED=${arg_ALLOWED}" -P "${PROJECT_SOURCE_DIR}/cmake/CheckModuleClosure.cmake")
  set_tests_properties(${name} PROPERTIES LABELS unit)
endfunction()
