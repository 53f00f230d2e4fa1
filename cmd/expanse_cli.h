// The `expanse` operator CLI: `compute install`, `compute uninstall` and `release ...`.

#ifndef EXPANSE_CMD_EXPANSE_CLI_H_
#define EXPANSE_CMD_EXPANSE_CLI_H_

#include <optional>

#include "install/token_intake.h"

namespace expanse::install {

// Parses argv, runs the command and returns the process exit status.
int RunExpanseCli(int argc, char** argv);

// The install token from EXPANSE_INSTALL_TOKEN, taken out of the environment (wiped and unset)
// so no child process inherits it; nullopt when unset or empty.
std::optional<SecretString> TakeTokenFromEnvironment();

}  // namespace expanse::install

#endif  // EXPANSE_CMD_EXPANSE_CLI_H_
