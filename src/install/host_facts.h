// Facts about the host the installer reads (accounts, names, versions of SLURM and the NVIDIA
// driver), each bounded in time so a wedged tool cannot hang an install.

#ifndef EXPANSE_INSTALL_HOST_FACTS_H_
#define EXPANSE_INSTALL_HOST_FACTS_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "core/host.h"
#include "core/result.h"

namespace expanse::install {

struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// kNotFound (reason user_missing) naming the account and the --user flag.
Result<Account> LookupAccount(Host& host, const std::string& name);

// The short host name (up to the first dot).
std::string ShortHostname();

// "22.05.8" from `scontrol --version`, or "" when scontrol is missing or says nothing useful.
std::string SlurmVersion(Host& host);

// True when `path` is a directory (systemd's runtime directory exists only under systemd).
bool IsDirectory(const std::string& path);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_HOST_FACTS_H_
