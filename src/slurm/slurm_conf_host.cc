// The host side of slurm_conf.h: reading the real files and finding slurm.conf.
#include <string>
#include <vector>

#include "core/host.h"
#include "core/quote.h"
#include "slurm/slurm_conf.h"

namespace expanse::slurm {
namespace {

Status ReadError(const std::string& path, const Status& error) {
  const std::string message = "cannot read " + path + ": " + error.message();
  if (error.code() == StatusCode::kPermissionDenied)
    return PermissionDeniedError(message).WithReason("slurm_conf_unreadable");
  return InternalError(message).WithReason("slurm_conf_unreadable");
}

// Only regular files: a FIFO named by an Include would hang the read, and /dev/zero would
// never end.
Result<std::optional<std::string>> ReadConfFile(Host& host, const std::string& path,
                                                std::size_t max_bytes) {
  const std::optional<FileInfo> info = host.Stat(path);
  if (!info)
    return std::optional<std::string>();
  if (info->type != FileInfo::Type::kFile)
    return InvalidArgumentError(path + ": not a regular file").WithReason("slurm_conf_syntax");
  Result<std::optional<std::string>> text = host.ReadFile(path, max_bytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kResourceExhausted)
      return ResourceExhaustedError(path + ": too large");
    return ReadError(path, text.status());
  }
  return text;
}

// One attempt's outcome for the final error message, e.g. "$SLURM_CONF (unset)".
struct Attempt {
  std::string what;
  std::string outcome;
};

bool IsRegularFile(Host& host, const std::string& path) {
  const std::optional<FileInfo> info = host.Stat(path);
  return info && info->type == FileInfo::Type::kFile;
}

std::optional<std::string> TryScontrol(Host& host, std::vector<Attempt>& attempts) {
  SubprocessOptions options;
  options.argv = {"scontrol", "show", "config"};
  options.timeout = std::chrono::seconds(10);
  const std::string what = "`scontrol show config`";
  const Result<SubprocessResult> run = host.Run(options);
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
  if (!path->starts_with('/') || !IsRegularFile(host, *path)) {
    attempts.push_back({what, "names " + QuoteForMessage(*path, 200) + ", not a file here"});
    return std::nullopt;
  }
  return path;
}

}  // namespace

Result<SlurmConf> ReadSlurmConf(Host& host, const std::string& main_path) {
  return ParseSlurmConf(main_path, [&host](const std::string& path, std::size_t max_bytes) {
    return ReadConfFile(host, path, max_bytes);
  });
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

Result<std::string> DiscoverSlurmConf(std::optional<std::string> flag, Host& host) {
  if (flag.has_value()) {
    if (!flag->starts_with('/')) {
      return InvalidArgumentError("--slurm-conf must be an absolute path, got " +
                                  QuoteForMessage(*flag, 200))
          .WithReason("slurm_conf_not_absolute");
    }
    if (!IsRegularFile(host, *flag)) {
      return NotFoundError("--slurm-conf " + *flag + ": no such file")
          .WithReason("slurm_conf_not_found");
    }
    return *flag;
  }
  std::vector<Attempt> attempts;
  const std::optional<std::string> env = host.GetEnv("SLURM_CONF");
  if (!env.has_value() || env->empty()) {
    attempts.push_back({"$SLURM_CONF", "unset"});
  } else if (!env->starts_with('/') || !IsRegularFile(host, *env)) {
    attempts.push_back({"$SLURM_CONF", QuoteForMessage(*env, 200) + " is not a file here"});
  } else {
    return *env;
  }
  if (std::optional<std::string> path = TryScontrol(host, attempts))
    return *path;
  for (const char* fallback : {"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"}) {
    if (IsRegularFile(host, fallback))
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

}  // namespace expanse::slurm
