# Debian packages (docs/packages.md): install rules for three components and CPack's DEB
# generator. `scripts/package` builds them from an optimised build; the package.debian test
# builds, lints, installs, upgrades and purges them.
#
#   expanse         the CLI: /usr/bin/expanse (the installer, with every unit and hook template)
#   expanse-daemon  the node daemon: /usr/lib/expanse/expanse-daemon, for the installer
#   expanse-server  the server: /usr/bin/expanse-server, its unit, its configuration and account

set(expanse_deb "${PROJECT_SOURCE_DIR}/packaging/debian")
set(expanse_deb_build "${CMAKE_BINARY_DIR}/packaging")
set(EXPANSE_DEB_MAINTAINER "The Expanse developers <developers@expanse.sh>")

# changelog.gz per package (a native package's name for it), dated by the commit it was built
# from (reproducible).
execute_process(
  COMMAND git -C "${PROJECT_SOURCE_DIR}" log -1 --format=%cD
  OUTPUT_VARIABLE expanse_deb_date OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE expanse_git_status ERROR_QUIET)
if(NOT expanse_git_status EQUAL 0 OR expanse_deb_date STREQUAL "")
  set(expanse_deb_date "Thu, 01 Jan 2026 00:00:00 +0000")
endif()
# Debian's changelog wants a two-digit day.
string(REGEX REPLACE "^([A-Z][a-z][a-z]), ([0-9]) " "\\1, 0\\2 " expanse_deb_date
                     "${expanse_deb_date}")

function(expanse_deb_docs component package)
  set(dir "${expanse_deb_build}/${package}")
  file(MAKE_DIRECTORY "${dir}")
  file(READ "${expanse_deb}/changelog.in" text)
  string(REPLACE "@PACKAGE@" "${package}" text "${text}")
  string(REPLACE "@VERSION@" "${PROJECT_VERSION}" text "${text}")
  string(REPLACE "@MAINTAINER@" "${EXPANSE_DEB_MAINTAINER}" text "${text}")
  string(REPLACE "@DATE@" "${expanse_deb_date}" text "${text}")
  file(WRITE "${dir}/changelog" "${text}")
  execute_process(COMMAND gzip -9nf "${dir}/changelog")
  set(docs "${dir}/changelog.gz" "${expanse_deb}/copyright")
  if(EXISTS "${expanse_deb}/${package}/README.Debian")
    list(APPEND docs "${expanse_deb}/${package}/README.Debian")
  endif()
  install(FILES ${docs} DESTINATION share/doc/${package} COMPONENT ${component})
endfunction()

# A manual page from the program's --help, written when the component is installed.
function(expanse_deb_man_page component target summary)
  install(CODE "
    set(EXPANSE_MAN_PROGRAM \"$<TARGET_FILE:${target}>\")
    set(EXPANSE_MAN_NAME \"${target}\")
    set(EXPANSE_MAN_SUMMARY \"${summary}\")
    set(EXPANSE_MAN_WORK \"${expanse_deb_build}/man\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/InstallManPage.cmake\")"
    COMPONENT ${component})
endfunction()

install(TARGETS expanse RUNTIME DESTINATION bin COMPONENT cli)
expanse_deb_man_page(cli expanse "GPU-cluster observability for SLURM: install, report, doctor")
expanse_deb_docs(cli expanse)

# Not on PATH: the installer copies it into the site's shared prefix, and units run it there.
install(TARGETS expanse-daemon RUNTIME DESTINATION lib/expanse COMPONENT daemon)
expanse_deb_docs(daemon expanse-daemon)

install(TARGETS expanse-server RUNTIME DESTINATION bin COMPONENT server)
expanse_deb_man_page(server expanse-server "Expanse control plane, data plane and console")
expanse_deb_docs(server expanse-server)
# The unit and the configuration have fixed places on the system, outside the prefix. They are
# installed only for a package (CPack installs with DESTDIR) or an install into /usr itself:
# `cmake --install <build> --prefix ~/somewhere` must not write /lib or /etc.
install(CODE "
  if(NOT \"\$ENV{DESTDIR}\" STREQUAL \"\" OR CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    file(INSTALL DESTINATION \"/lib/systemd/system\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
         FILES \"${expanse_deb}/expanse-server/expanse-server.service\")
    file(INSTALL DESTINATION \"/etc/expanse-server\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
         FILES \"${expanse_deb}/expanse-server/expanse-server.env\")
  else()
    message(STATUS \"Not installing expanse-server.service and /etc/expanse-server: the prefix \"
                   \"is \${CMAKE_INSTALL_PREFIX}, not /usr (packages install them)\")
  endif()"
  COMPONENT server)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME expanse)
set(CPACK_PACKAGE_VENDOR "The Expanse developers")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${EXPANSE_DEB_MAINTAINER}")
# The unit goes to /lib/systemd/system and the configuration to /etc (absolute, with DESTDIR
# set by CPack); the rest is below /usr.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packages")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli daemon server)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Read when cpack runs: EXPANSE_PACKAGE_VERSION builds the same tree under another version
# (the package test's upgrade).
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/CPackProjectConfig.cmake")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME expanse)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "GPU-cluster observability for SLURM: the command line
The expanse command installs, upgrades and removes Expanse on a SLURM cluster's
controller and workers (expanse compute install), reports what a job asked for
and used (expanse job report, expanse jobs), checks a deployment (expanse
doctor) and publishes signed releases (expanse release).")

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME expanse-daemon)
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS expanse)
set(CPACK_COMPONENT_DAEMON_DESCRIPTION
    "GPU-cluster observability for SLURM: the node daemon
expanse-daemon samples GPUs, job cgroups and Python stacks on SLURM nodes and
sends them to an Expanse server. The expanse installer puts it into the
cluster's shared prefix and wires it into SLURM; this package only carries it.")

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME expanse-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    "${expanse_deb}/expanse-server/conffiles;${expanse_deb}/expanse-server/postinst;${expanse_deb}/expanse-server/prerm;${expanse_deb}/expanse-server/postrm")
set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "GPU-cluster observability for SLURM: the server
expanse-server serves the control plane computes register with, the data plane
their telemetry arrives on, and the web console and query API, with its
database and telemetry store on local disk. The package runs it as the system
account expanse-server from a systemd unit.")

include(CPack)
