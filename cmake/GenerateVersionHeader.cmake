# Script mode (cmake -P): writes the generated version header.
# Inputs: SOURCE_DIR, TEMPLATE, OUTPUT, EXPANSE_VERSION, GIT_EXECUTABLE (may be empty).
#
# The revision is `git rev-parse --short=12 HEAD`, with "-dirty" when tracked files
# differ from HEAD or untracked, non-ignored files exist (either way the binary
# cannot be rebuilt from the revision alone). It is "unknown" when git is missing,
# the source tree is not the top of a git checkout (e.g. an unpacked tarball that
# happens to sit inside another repository), or the checkout has no commits yet.

set(EXPANSE_GIT_REVISION "unknown")

if(GIT_EXECUTABLE)
  execute_process(
    COMMAND "${GIT_EXECUTABLE}" rev-parse --show-toplevel
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE toplevel_result
    OUTPUT_VARIABLE toplevel
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET)
  set(is_own_checkout FALSE)
  if(toplevel_result EQUAL 0)
    file(REAL_PATH "${SOURCE_DIR}" source_real)
    file(REAL_PATH "${toplevel}" toplevel_real)
    if(source_real STREQUAL toplevel_real)
      set(is_own_checkout TRUE)
    endif()
  endif()

  if(is_own_checkout)
    # --verify --quiet: exit non-zero and print nothing when HEAD has no commit yet.
    execute_process(
      COMMAND "${GIT_EXECUTABLE}" rev-parse --verify --quiet --short=12 HEAD
      WORKING_DIRECTORY "${SOURCE_DIR}"
      RESULT_VARIABLE head_result
      OUTPUT_VARIABLE head
      OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET)
    if(head_result EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
      set(EXPANSE_GIT_REVISION "${head}")
      # --no-optional-locks: a build must never take index.lock and race with a
      # git command the developer runs at the same time.
      execute_process(
        COMMAND "${GIT_EXECUTABLE}" --no-optional-locks status --porcelain
        WORKING_DIRECTORY "${SOURCE_DIR}"
        RESULT_VARIABLE status_result
        OUTPUT_VARIABLE status_output
        ERROR_QUIET)
      if(NOT status_result EQUAL 0 OR NOT status_output STREQUAL "")
        string(APPEND EXPANSE_GIT_REVISION "-dirty")
      endif()
    endif()
  endif()
endif()

configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
