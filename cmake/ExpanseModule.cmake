# expanse_module(NAME <name> SOURCES <file>... [DEPS <target>...] [TEST_DEPS <target>...])
#
# One static library per module: expanse_<name> (alias expanse::<name>) built from
# src/<name>/<file>... . src/ is the public include root, so code writes
# #include "core/status.h" and a module's headers are reachable only through their
# module directory. DEPS are linked PUBLIC (a module's headers may use them).
#
# Tests live beside the code as src/<name>/*_test.cc. When any exist and
# EXPANSE_BUILD_TESTS is on, they become one GoogleTest binary expanse_<name>_test,
# whose tests ctest discovers with label "unit". TEST_DEPS are extra test-only libs.
function(expanse_module)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "SOURCES;DEPS;TEST_DEPS")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "expanse_module: NAME and SOURCES are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "expanse_module(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()

  set(module_dir "${PROJECT_SOURCE_DIR}/src/${arg_NAME}")
  set(library expanse_${arg_NAME})
  list(TRANSFORM arg_SOURCES PREPEND "${module_dir}/")

  add_library(${library} STATIC ${arg_SOURCES})
  set_property(GLOBAL APPEND PROPERTY EXPANSE_MODULES ${library})  # for ModuleClosure.cmake
  add_library(expanse::${arg_NAME} ALIAS ${library})
  target_include_directories(${library} PUBLIC "${PROJECT_SOURCE_DIR}/src")
  target_link_libraries(${library} PUBLIC ${arg_DEPS})
  expanse_apply_project_flags(${library})
  # Compiled as a unity build, eight source files per compiler run: most of a file's compile
  # time is the parsing of the standard library's and the module's headers, paid once per run
  # instead of once per file (the demo's four programs in Release: about 4 minutes on two
  # cores instead of 8). A module's files therefore keep their anonymous-namespace names
  # distinct; helpers two files need live in a header of the module.
  set_target_properties(${library} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)

  if(NOT EXPANSE_BUILD_TESTS)
    return()
  endif()
  # CONFIGURE_DEPENDS: adding a new foo_test.cc re-runs the configure step by itself.
  file(GLOB test_sources CONFIGURE_DEPENDS "${module_dir}/*_test.cc")
  if(NOT test_sources)
    return()
  endif()
  set(test_binary expanse_${arg_NAME}_test)
  add_executable(${test_binary} ${test_sources})
  # Compiled in batches (one compiler run per 8 test files): the files share gtest's and the
  # module's headers, whose parsing and template instantiation dominate a test file's compile
  # under the sanitizers (four wire test files: 37 s one by one, 20 s as one). So each test
  # file keeps its helpers in a namespace named after the file (docs/testing.md).
  set_target_properties(${test_binary} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  target_link_libraries(${test_binary}
    PRIVATE ${library} ${arg_TEST_DEPS} GTest::gmock GTest::gtest GTest::gtest_main)
  expanse_apply_project_flags(${test_binary})
  expanse_unit_test_binary(${test_binary} ${arg_NAME})
endfunction()

# expanse_unit_test_binary(<binary> <prefix>)
#
# Registers a GoogleTest binary with ctest as one test, <prefix>.gtest (label "unit"), which
# runs every test of the binary in one process and prints only the failures. One process per
# binary rather than one per test: under ASan a process costs 0.2-0.5 s to start, which for
# ~2000 tests was 90 % of the unit label's time. A failure names its test in the output;
# `<binary> --gtest_filter=Suite.Name` reruns one.
function(expanse_unit_test_binary binary prefix)
  add_test(NAME ${prefix}.gtest COMMAND ${binary} --gtest_brief=1)
  set_tests_properties(${prefix}.gtest PROPERTIES LABELS unit)
endfunction()
