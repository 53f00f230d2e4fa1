// The `expanse` operator CLI: `compute install`, `compute uninstall` and `release ...`.

#ifndef EXPANSE_INSTALL_INSTALL_CLI_H_
#define EXPANSE_INSTALL_INSTALL_CLI_H_

namespace expanse::install {

// Parses argv, runs the command and returns the process exit status.
int RunExpanseCli(int argc, char** argv);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_INSTALL_CLI_H_
