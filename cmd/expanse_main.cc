// expanse: the operator CLI. Its command groups (compute install/uninstall/status,
// release keygen/pack/sign/verify/manifest) arrive with the install and crypto
// modules; until then it answers --help and --version only.

#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "core/version.h"

int main(int argc, char** argv) {
  // CLI11 reports flag errors through CLI11_PARSE. Anything else it throws is a bug
  // here; catching it ends the process with a message instead of std::terminate.
  try {
    CLI::App app{"Expanse operator CLI: installs and manages Expanse on a SLURM cluster.",
                 "expanse"};
    app.set_version_flag("--version", "expanse " + expanse::VersionString(),
                         "Print the version and exit");
    CLI11_PARSE(app, argc, argv);

    // Saying so beats exiting 0 and letting a script believe something was done.
    std::fputs("expanse: no commands are implemented in this build yet; see --help\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}
