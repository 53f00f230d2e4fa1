// expanse: the operator CLI (compute install/uninstall, release keygen/pack/sign/manifest/verify).
// All logic lives in src/install and src/release; the flags are parsed in expanse_cli.cc.

#include <cstdio>
#include <exception>

#include "expanse_cli.h"

int main(int argc, char** argv) {
  // Anything the CLI throws past its own error handling is a bug; say so instead of terminating.
  try {
    return expanse::install::RunExpanseCli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE from sysexits.h
  }
}
