// What an install put on this host, so a later reinstall can clean it up and uninstall can
// remove exactly that (and nothing an operator added). One JSON file per role under the install
// state directory: /var/lib/expanse-install/{controller,sampler}.json, root-only, local disk.
// Format: docs/formats/install-state.md.

#ifndef EXPANSE_INSTALL_INSTALL_STATE_H_
#define EXPANSE_INSTALL_INSTALL_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/host.h"
#include "core/result.h"

namespace expanse::install {

struct InstallState {
  std::string role;  // controller | sampler
  std::string daemon_version;
  std::string highest_version;  // the highest ever installed here; downgrades need a flag
  std::string shared_prefix;
  std::string config_path;  // controller
  std::string user;
  std::string unit_name;  // "" when --systemd=false
  std::string unit_path;
  std::string slurm_conf;                // controller, when hooks were wired
  std::vector<std::string> wired_files;  // slurm.conf and Include'd files we edited
  std::vector<std::string> files;        // regular files we wrote (binaries, scripts...)
  std::vector<std::string> trees;        // directories created whole (CUPTI per host)
  bool profiling_agent = true;
  std::string sampler_bootstrap;
  std::string cupti_mode;
  // As asked for, so that a configuration tool can tell a changed request from the state:
  std::string cupti_variant;  // --cupti-variant; "" = chosen from the driver
  bool bundled_pyspy = true;  // --bundled-pyspy (controller)
  int64_t installed_ms = 0;
};

std::string StatePath(const std::string& state_dir, const std::string& role);
std::string RenderInstallState(const InstallState& state);
Result<InstallState> ParseInstallState(const std::string& text);
// nullopt when there is no state file for `role`.
Result<std::optional<InstallState>> LoadInstallState(Host& host, const std::string& state_dir,
                                                     const std::string& role);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_INSTALL_STATE_H_
