# Script mode (cmake -P): runs "${PROGRAM} ${ARGUMENT}", passing its output through
# unchanged, and fails unless the exit status matches EXPECT_EXIT ("zero" or
# "nonzero"; a crash never counts as "nonzero").
#
# Why a wrapper: ctest ignores the exit status of any test that sets
# PASS_REGULAR_EXPRESSION. Tests that check output therefore run through this script
# and also set FAIL_REGULAR_EXPRESSION "RunExpectingExit failed".

execute_process(COMMAND "${PROGRAM}" "${ARGUMENT}" RESULT_VARIABLE exit_status)

# RESULT_VARIABLE holds a number for a normal exit and text such as "Child aborted"
# when the process died from a signal.
set(exited_normally FALSE)
if(exit_status MATCHES "^[0-9]+$")
  set(exited_normally TRUE)
endif()

if(EXPECT_EXIT STREQUAL "zero")
  if(NOT exited_normally OR NOT exit_status EQUAL 0)
    message(FATAL_ERROR "RunExpectingExit failed: ${PROGRAM} ${ARGUMENT}: expected exit status 0, got '${exit_status}'")
  endif()
elseif(EXPECT_EXIT STREQUAL "nonzero")
  if(NOT exited_normally OR exit_status EQUAL 0)
    message(FATAL_ERROR "RunExpectingExit failed: ${PROGRAM} ${ARGUMENT}: expected a non-zero exit status, got '${exit_status}'")
  endif()
else()
  message(FATAL_ERROR "RunExpectingExit failed: EXPECT_EXIT must be zero or nonzero, got '${EXPECT_EXIT}'")
endif()
