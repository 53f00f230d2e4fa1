# Version plumbing: the release version comes from the VERSION file, the git revision
# from the checkout at build time. Both reach C++ through the generated header
# <build>/generated/expanse/version.h, which only src/core/version.cc includes.

# The repository root, captured at include time (inside a function
# CMAKE_CURRENT_LIST_DIR would name the caller's directory instead).
get_filename_component(EXPANSE_REPO_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

# Reads VERSION (one line, MAJOR.MINOR.PATCH) into out_var and re-runs the configure
# step whenever the file changes.
function(expanse_read_version_file out_var)
  set(version_file "${EXPANSE_REPO_ROOT}/VERSION")
  if(NOT EXISTS "${version_file}")
    message(FATAL_ERROR "VERSION file not found at ${version_file}")
  endif()
  file(STRINGS "${version_file}" version LIMIT_COUNT 1)
  string(STRIP "${version}" version)
  if(NOT version MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
    message(FATAL_ERROR
      "VERSION must hold MAJOR.MINOR.PATCH on its first line, found '${version}'")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${version_file}")
  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()

# Creates target expanse_version_header, which regenerates the header on every build
# (the revision changes with each commit, without a re-configure). configure_file()
# inside the script only rewrites the file when its content changes, and Ninja's
# restat on BYPRODUCTS then skips recompiling version.cc.
function(expanse_add_version_header_target)
  find_package(Git QUIET)
  set(generated_dir "${CMAKE_BINARY_DIR}/generated")
  set(header "${generated_dir}/expanse/version.h")
  set(script_args
    "-DSOURCE_DIR=${PROJECT_SOURCE_DIR}"
    "-DTEMPLATE=${PROJECT_SOURCE_DIR}/cmake/version.h.in"
    "-DOUTPUT=${header}"
    "-DEXPANSE_VERSION=${PROJECT_VERSION}"
    "-DGIT_EXECUTABLE=${GIT_EXECUTABLE}")
  set(script "${PROJECT_SOURCE_DIR}/cmake/GenerateVersionHeader.cmake")

  # Generate once now so the header exists for IDEs and compile_commands.json users.
  execute_process(COMMAND "${CMAKE_COMMAND}" ${script_args} -P "${script}"
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "generating ${header} failed")
  endif()

  add_custom_target(expanse_version_header
    COMMAND "${CMAKE_COMMAND}" ${script_args} -P "${script}"
    BYPRODUCTS "${header}"
    COMMENT "Checking git revision for expanse/version.h"
    VERBATIM)
  set(EXPANSE_GENERATED_INCLUDE_DIR "${generated_dir}" PARENT_SCOPE)
endfunction()
