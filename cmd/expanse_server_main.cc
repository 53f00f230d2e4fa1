// expanse-server: control plane, data plane, console and release mirror. Its roles
// and admin subcommands arrive with the server module; until then it answers
// --help and --version only.

#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "core/version.h"

int main(int argc, char** argv) {
  // CLI11 reports flag errors through CLI11_PARSE. Anything else it throws is a bug
  // here; catching it ends the process with a message instead of std::terminate.
  try {
    CLI::App app{"Expanse server: control plane, data plane, console and release mirror.",
                 "expanse-server"};
    app.set_version_flag("--version", "expanse-server " + expanse::VersionString(),
                         "Print the version and exit");
    CLI11_PARSE(app, argc, argv);

    // Saying so beats exiting 0 and letting a unit file believe the server ran.
    std::fputs("expanse-server: no role is implemented in this build yet; see --help\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse-server: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}
