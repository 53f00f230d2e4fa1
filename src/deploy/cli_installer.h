// The CLI installer an expanse-server serves at GET /install (docs/install.md, "Getting the
// CLI"): a POSIX sh script that an operator pipes from curl into sh. It downloads the CLI
// archive of the machine's architecture from the server's release mirror with its signature,
// verifies the signature with openssl against the mirror's release key (written into the
// script) before anything is installed, installs <prefix>/bin/expanse (default /usr/local) and
// pins the key in <prefix>/etc/expanse/release.pub, where that CLI looks first
// (release/trusted_key.h). It refuses a bad signature, a missing openssl, and a plain-HTTP
// URL other than loopback, each with a message saying nothing was installed.
#ifndef EXPANSE_DEPLOY_CLI_INSTALLER_H_
#define EXPANSE_DEPLOY_CLI_INSTALLER_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::deploy {

// One signed CLI archive in a mirror: expanse_<version>_linux_<arch>.tar.gz.
struct CliArchive {
  std::string arch;  // "amd64", "arm64"
  std::string version;
  std::string file;
};

struct CliInstallerValues {
  std::string base_url;  // the control plane's public URL; the mirror is <base_url>/releases/
  std::string key_pem;   // the public key that signed the mirror (PEM)
  std::vector<CliArchive> archives;
};

// The CLI archives of a mirror directory's file names: per architecture the newest version
// that has its .sig beside it. Names that are not CLI archives are ignored.
std::vector<CliArchive> PickCliArchives(const std::vector<std::string>& names);

// The script. kInvalidArgument when the URL is not a plane URL (deploy/plane_url.h), the key
// not one PEM public key block, or there is no archive.
Result<std::string> RenderCliInstaller(const CliInstallerValues& values);

// The line the console shows first: curl -fsSL <base_url>/install | sh
std::string CliInstallLine(std::string_view base_url);

}  // namespace expanse::deploy

#endif  // EXPANSE_DEPLOY_CLI_INSTALLER_H_
