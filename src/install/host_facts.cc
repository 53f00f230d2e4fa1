#include "install/host_facts.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <vector>

#include "core/subprocess.h"

namespace expanse::install {

Result<Account> LookupAccount(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return NotFoundError("the daemon account '" + name +
                         "' does not exist on this host; create it (with the same UID/GID as on "
                         "the other nodes) or name another one with --user")
        .WithReason("user_missing");
  }
  return Account{name, pw.pw_uid, pw.pw_gid};
}

std::string ShortHostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  return host.substr(0, host.find('.'));
}

std::string SlurmVersion() {
  SubprocessOptions options;
  options.argv = {"scontrol", "--version"};
  options.timeout = std::chrono::seconds(10);
  Result<SubprocessResult> r = RunSubprocess(options);
  if (!r.ok() || !r->Succeeded())
    return "";
  std::smatch m;
  static const std::regex kVersion("([0-9]+\\.[0-9]+\\.[0-9]+)");
  return std::regex_search(r->stdout_text, m, kVersion) ? m[1].str() : "";
}

std::optional<std::string> NvidiaDriverVersion(std::string& why) {
  SubprocessOptions options;
  options.argv = {"nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"};
  options.timeout = std::chrono::seconds(20);
  Result<SubprocessResult> r = RunSubprocess(options);
  if (!r.ok()) {
    why = "nvidia-smi is not installed";
    return std::nullopt;
  }
  if (!r->Succeeded()) {
    why = r->timed_out ? "nvidia-smi did not answer in 20 s" : "nvidia-smi found no usable GPU";
    return std::nullopt;
  }
  // One line per GPU, each the same version: take the first, exactly.
  std::string line = r->stdout_text.substr(0, r->stdout_text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  static const std::regex kDriver("[0-9]+\\.[0-9]+(\\.[0-9]+)?");
  if (!std::regex_match(line, kDriver)) {
    why = "nvidia-smi printed no driver version";
    return std::nullopt;
  }
  return line;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace expanse::install
