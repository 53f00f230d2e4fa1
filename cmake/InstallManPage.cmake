# Run at install time (install(CODE) in ExpansePackaging.cmake): writes PROGRAM's manual
# page from its own --help and --version with Debian's help2man, compressed as Debian wants
# (gzip -9n: no name, no time stamp), into <prefix>/share/man/man1. Inputs:
#   EXPANSE_MAN_PROGRAM  the built executable
#   EXPANSE_MAN_NAME     the command's name (the page is <name>.1.gz)
#   EXPANSE_MAN_SUMMARY  one line for the page's NAME section
#   EXPANSE_MAN_WORK     a scratch directory
find_program(EXPANSE_HELP2MAN help2man)
if(NOT EXPANSE_HELP2MAN)
  message(FATAL_ERROR "help2man is needed for the packages' manual pages (scripts/setup installs it)")
endif()
file(MAKE_DIRECTORY "${EXPANSE_MAN_WORK}")
set(page "${EXPANSE_MAN_WORK}/${EXPANSE_MAN_NAME}.1")
execute_process(
  COMMAND "${EXPANSE_HELP2MAN}" --no-info --section=1 "--name=${EXPANSE_MAN_SUMMARY}"
          "--output=${page}" "${EXPANSE_MAN_PROGRAM}"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "help2man ${EXPANSE_MAN_PROGRAM} failed (${status})")
endif()
execute_process(COMMAND gzip -9nf "${page}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "gzip ${page} failed (${status})")
endif()
file(INSTALL "${page}.gz" DESTINATION "${CMAKE_INSTALL_PREFIX}/share/man/man1"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
