// The flows of `expanse compute install` and `uninstall`: controller install (fresh, reinstall /
// upgrade, replacement credential, config only), sampler install on a worker, and uninstall of
// either role. Each flow checks everything it can before it changes anything, then makes its
// changes through the install journal so a failure rolls them back (docs/install.md).

#ifndef EXPANSE_INSTALL_INSTALLER_H_
#define EXPANSE_INSTALL_INSTALLER_H_

#include <functional>
#include <optional>
#include <string>

#include "core/status.h"
#include "install/install_options.h"
#include "install/token_intake.h"

namespace expanse::install {

struct Output {
  std::function<void(const std::string&)> progress;  // short step lines, always shown
  std::function<void(const std::string&)> detail;    // --verbose diagnostics
  std::function<void(const std::string&)> text;      // blocks printed as they are (unit, lines)
};

// Exit statuses of the CLI, by outcome.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // nothing was changed, or every change was rolled back
inline constexpr int kExitUsage = 2;   // flags contradict each other or are malformed

// `token` is what the CLI took from EXPANSE_INSTALL_TOKEN at start-up (nullopt when unset).
Status RunInstall(const InstallOptions& options, const HostPaths& paths,
                  std::optional<SecretString> token, const Output& out);
// The sampler-role flow, after the lock is held (sampler_install.cc).
Status InstallSampler(const InstallOptions& options, const HostPaths& paths, const Output& out);

Status RunUninstall(const UninstallOptions& options, const HostPaths& paths, const Output& out);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_INSTALLER_H_
