// `expanse release keygen | pack | sign | manifest | verify`: the release builder's and mirror
// operator's commands, a thin layer over src/release/release_commands.

#ifndef EXPANSE_CMD_RELEASE_CLI_H_
#define EXPANSE_CMD_RELEASE_CLI_H_

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "release/release_commands.h"

namespace expanse::install {

struct ReleaseCommands {
  CLI::App* keygen = nullptr;
  CLI::App* pack = nullptr;
  CLI::App* sign = nullptr;
  CLI::App* manifest = nullptr;
  CLI::App* verify = nullptr;
  release::KeygenFlags keygen_flags;
  release::PackFlags pack_flags;
  release::SignFlags sign_flags;
  release::ManifestFlags manifest_flags;
  release::VerifyFlags verify_flags;
};

// Adds `release` and its subcommands to `app`; `commands` must outlive parsing.
void AddReleaseCommands(CLI::App& app, ReleaseCommands& commands);

// Runs whichever release subcommand was parsed.
Status RunReleaseCommand(const ReleaseCommands& commands);

}  // namespace expanse::install

#endif  // EXPANSE_CMD_RELEASE_CLI_H_
