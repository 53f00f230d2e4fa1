// expanse-daemon: the node daemon. Its roles (--role controller|sampler) and the
// SLURM hook entry points arrive with the agent module; until then it answers
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
    CLI::App app{"Expanse node daemon: samples GPUs and relays SLURM job telemetry.",
                 "expanse-daemon"};
    app.set_version_flag("--version", "expanse-daemon " + expanse::VersionString(),
                         "Print the version and exit");
    CLI11_PARSE(app, argc, argv);

    // Saying so beats exiting 0 and letting a unit file believe the daemon ran.
    std::fputs("expanse-daemon: no role is implemented in this build yet; see --help\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse-daemon: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}
