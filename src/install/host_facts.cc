#include "install/host_facts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <vector>

#include "core/subprocess.h"

namespace expanse::install {

Result<Account> LookupAccount(Host& host, const std::string& name) {
  std::optional<UserAccount> found = host.LookupUser(name);
  if (!found) {
    return NotFoundError("the daemon account '" + name +
                         "' does not exist on this host; create it (with the same UID/GID as on "
                         "the other nodes) or name another one with --user")
        .WithReason("user_missing");
  }
  return Account{name, found->uid, found->gid};
}

std::string ShortHostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  return host.substr(0, host.find('.'));
}

std::string SlurmVersion(Host& host) {
  SubprocessOptions options;
  options.argv = {"scontrol", "--version"};
  options.timeout = std::chrono::seconds(10);
  Result<SubprocessResult> r = host.Run(options);
  if (!r.ok() || !r->Succeeded())
    return "";
  std::smatch m;
  static const std::regex kVersion("([0-9]+\\.[0-9]+\\.[0-9]+)");
  return std::regex_search(r->stdout_text, m, kVersion) ? m[1].str() : "";
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace expanse::install
