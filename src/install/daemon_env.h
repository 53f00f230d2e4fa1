// Seeding /etc/expanse/daemon.env at install time. The installer carries the network settings
// it was run with (HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE, passed through sudo by the operator)
// into the file the services read, plus any runtime settings it records, and keeps everything
// the operator already wrote. The file is never allowed to hold the install token. Pure
// functions over text: the caller reads and writes the file. Contract:
// docs/formats/env-file.md (syntax, merging) and docs/runtime-settings.md (keys).

#ifndef EXPANSE_INSTALL_DAEMON_ENV_H_
#define EXPANSE_INSTALL_DAEMON_ENV_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env_file.h"
#include "core/result.h"

namespace expanse::install {

inline constexpr char kInstallTokenKey[] = "EXPANSE_INSTALL_TOKEN";

// The service's proxy and CA settings; nullopt leaves whatever the file has.
struct NetworkSettings {
  std::optional<std::string> https_proxy;
  std::optional<std::string> no_proxy;
  std::optional<std::string> ssl_cert_file;
};

// The network settings in the installer's own environment. Where both spellings are set,
// lower-case https_proxy / no_proxy win, as they do for libcurl, so the service is routed like
// the installer's own requests were. Empty values count as unset.
NetworkSettings NetworkSettingsFromEnvironment(
    const std::map<std::string, std::string>& environment);

struct SeedValues {
  NetworkSettings network;
  // Further runtime settings the installer records (docs/runtime-settings.md), in order.
  std::vector<EnvEntry> runtime_settings;
  // Values that must never appear in the file: the install token, a credential. Empty
  // strings are ignored.
  std::vector<std::string> secrets;
};

// The new text of daemon.env: `existing_text` (empty for a new file) with the given settings
// set. Every line the operator wrote, comments included, is kept byte for byte; a setting that
// already has the requested value is left alone, so seeding twice changes nothing. When the
// file also spells a proxy key in lower case, that entry gets the same value, since libcurl
// would prefer it. Errors (kInvalidArgument, the message names the key, never a value):
//   - the existing text does not parse (reason env_file_invalid): rewriting a file we cannot
//     read could lose settings;
//   - a value has a control character, SSL_CERT_FILE is not absolute, a runtime-setting key is
//     invalid or repeats a network key (reason invalid_env_setting);
//   - the result would hold EXPANSE_INSTALL_TOKEN or any of `secrets`, whether the update or
//     the existing file brings it (reason secret_in_env_file).
Result<std::string> SeedDaemonEnv(std::string_view existing_text, const SeedValues& values);

// Which keys differ between two versions of the file, by name only: values may be private.
struct EnvKeyChanges {
  std::vector<std::string> added;
  std::vector<std::string> changed;
  std::vector<std::string> removed;
  bool empty() const { return added.empty() && changed.empty() && removed.empty(); }
};
Result<EnvKeyChanges> DiffEnvKeys(std::string_view before_text, std::string_view after_text);

// One line for the installer's output, e.g.
// "/etc/expanse/daemon.env: added HTTPS_PROXY, NO_PROXY; changed SSL_CERT_FILE", or
// "<path>: unchanged".
std::string DescribeEnvKeyChanges(std::string_view path, const EnvKeyChanges& changes);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_DAEMON_ENV_H_
