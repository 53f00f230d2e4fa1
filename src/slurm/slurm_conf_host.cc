// The host side of slurm_conf.h: reading the real files and finding slurm.conf.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/quote.h"
#include "slurm/slurm_conf.h"

namespace expanse::slurm {
namespace {

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0)
      close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Status ReadError(const std::string& path, int error) {
  const std::string message = "cannot read " + path + ": " + std::strerror(error);
  if (error == EACCES || error == EPERM)
    return PermissionDeniedError(message).WithReason("slurm_conf_unreadable");
  return InternalError(message).WithReason("slurm_conf_unreadable");
}

// Only regular files: O_NONBLOCK keeps a FIFO named by an Include from hanging the open, and
// the size check keeps /dev/zero and friends out.
Result<std::optional<std::string>> ReadConfFile(const std::string& path, std::size_t max_bytes) {
  const Descriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return std::optional<std::string>();
    return ReadError(path, errno);
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0)
    return ReadError(path, errno);
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file").WithReason("slurm_conf_syntax");
  }
  if (static_cast<std::size_t>(info.st_size) > max_bytes)
    return ResourceExhaustedError(path + ": too large");
  std::string contents;
  char buffer[16384];
  while (true) {
    const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ReadError(path, errno);
    }
    if (n == 0)
      break;
    contents.append(buffer, static_cast<std::size_t>(n));
    if (contents.size() > max_bytes)  // it grew while we read
      return ResourceExhaustedError(path + ": too large");
  }
  return std::optional<std::string>(std::move(contents));
}

bool IsRegularFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// One attempt's outcome for the final error message, e.g. "$SLURM_CONF (unset)".
struct Attempt {
  std::string what;
  std::string outcome;
};

std::optional<std::string> TryScontrol(const SlurmConfDiscoveryHost& host,
                                       std::vector<Attempt>& attempts) {
  SubprocessOptions options;
  options.argv = {"scontrol", "show", "config"};
  options.timeout = std::chrono::seconds(10);
  const std::string what = "`scontrol show config`";
  const Result<SubprocessResult> run = host.run(options);
  if (!run.ok()) {
    attempts.push_back({what, run.status().message()});
    return std::nullopt;
  }
  if (!run->Succeeded()) {
    std::string outcome = run->timed_out ? "timed out"
                          : run->exit_code.has_value()
                              ? "exit status " + std::to_string(*run->exit_code)
                              : "killed by a signal";
    const std::string first_error_line = run->stderr_text.substr(0, run->stderr_text.find('\n'));
    if (!first_error_line.empty())
      outcome += ": " + QuoteForMessage(first_error_line, 120);
    attempts.push_back({what, outcome});
    return std::nullopt;
  }
  const std::optional<std::string> path = SlurmConfFromScontrol(run->stdout_text);
  if (!path.has_value()) {
    attempts.push_back({what, "no SLURM_CONF line"});
    return std::nullopt;
  }
  if (!path->starts_with('/') || !host.is_file(*path)) {
    attempts.push_back({what, "names " + QuoteForMessage(*path, 200) + ", not a file here"});
    return std::nullopt;
  }
  return path;
}

}  // namespace

Result<SlurmConf> ReadSlurmConf(const std::string& main_path) {
  return ParseSlurmConf(main_path, ReadConfFile);
}

std::optional<std::string> SlurmConfFromScontrol(std::string_view output) {
  while (!output.empty()) {
    const std::size_t newline = output.find('\n');
    std::string_view line = output.substr(0, newline);
    output = newline == std::string_view::npos ? "" : output.substr(newline + 1);
    constexpr std::string_view kKey = "SLURM_CONF";
    if (!line.starts_with(kKey))
      continue;
    line.remove_prefix(kKey.size());
    const std::size_t equals = line.find_first_not_of(' ');
    if (equals == std::string_view::npos || line[equals] != '=')
      continue;  // SLURM_CONF_SERVER and the like
    line.remove_prefix(equals + 1);
    const std::size_t begin = line.find_first_not_of(" \t");
    const std::size_t end = line.find_last_not_of(" \t\r");
    if (begin == std::string_view::npos)
      return std::nullopt;
    return std::string(line.substr(begin, end - begin + 1));
  }
  return std::nullopt;
}

Result<std::string> DiscoverSlurmConf(std::optional<std::string> flag,
                                      const SlurmConfDiscoveryHost& host) {
  if (flag.has_value()) {
    if (!flag->starts_with('/')) {
      return InvalidArgumentError("--slurm-conf must be an absolute path, got " +
                                  QuoteForMessage(*flag, 200))
          .WithReason("slurm_conf_not_absolute");
    }
    if (!host.is_file(*flag)) {
      return NotFoundError("--slurm-conf " + *flag + ": no such file")
          .WithReason("slurm_conf_not_found");
    }
    return *flag;
  }
  std::vector<Attempt> attempts;
  if (!host.slurm_conf_env.has_value() || host.slurm_conf_env->empty()) {
    attempts.push_back({"$SLURM_CONF", "unset"});
  } else if (!host.slurm_conf_env->starts_with('/') || !host.is_file(*host.slurm_conf_env)) {
    attempts.push_back(
        {"$SLURM_CONF", QuoteForMessage(*host.slurm_conf_env, 200) + " is not a file here"});
  } else {
    return *host.slurm_conf_env;
  }
  if (std::optional<std::string> path = TryScontrol(host, attempts))
    return *path;
  for (const char* fallback : {"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"}) {
    if (host.is_file(fallback))
      return std::string(fallback);
    attempts.push_back({fallback, "missing"});
  }
  std::string tried;
  for (const Attempt& attempt : attempts)
    tried += (tried.empty() ? "" : "; ") + attempt.what + " (" + attempt.outcome + ")";
  return NotFoundError("cannot find slurm.conf; tried " + tried +
                       ". Pass --slurm-conf /absolute/path/slurm.conf")
      .WithReason("slurm_conf_not_found");
}

Result<std::string> DiscoverSlurmConf(std::optional<std::string> flag) {
  SlurmConfDiscoveryHost host;
  if (const char* env = std::getenv("SLURM_CONF"))
    host.slurm_conf_env = env;
  host.is_file = IsRegularFile;
  host.run = RunSubprocess;
  return DiscoverSlurmConf(std::move(flag), host);
}

}  // namespace expanse::slurm
