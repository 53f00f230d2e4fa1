#include "agent/profiling_permissions.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "agent/hook.h"
#include "core/file_util.h"
#include "deploy/daemon_config.h"

namespace expanse::agent {
namespace {

constexpr char kOurMarker[] = "written by expanse-daemon: EXPANSE_PROFILING_AGENT_ENABLE=0\n";

// The directory and each ancestor up to "/", deepest first.
std::vector<std::string> WithAncestors(const std::string& dir) {
  std::vector<std::string> out;
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  while (!p.empty()) {
    out.push_back(p.string());
    if (p == p.root_path())
      break;
    p = p.parent_path();
  }
  return out;
}

// `path` normalised, without a trailing separator ("/srv/expanse/" is "/srv/expanse").
std::filesystem::path Normal(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  if (!p.has_filename() && p != p.root_path())
    p = p.parent_path();
  return p;
}

// The directories from `top` (exclusive) down to `dir` (inclusive), top first; just `dir` when it
// is not under `top`.
std::vector<std::string> DirectoriesBelow(const std::string& top, const std::string& dir) {
  const std::filesystem::path bottom = Normal(dir);
  if (top.empty() || !deploy::PathIsUnder(bottom.string(), top))
    return {bottom.string()};
  const std::filesystem::path stop = Normal(top);
  std::vector<std::string> out;
  for (std::filesystem::path p = bottom; !p.empty() && p != stop && p != p.root_path();
       p = p.parent_path()) {
    out.insert(out.begin(), p.string());
  }
  return out;
}

}  // namespace

PermissionCheckResult CheckProfilingPermissions(const PermissionCheckOptions& options) {
  std::vector<std::string> paths;
  if (!options.control_dir.empty())
    paths = WithAncestors(options.control_dir);
  if (!options.shared_prefix.empty())
    paths.push_back(Normal(options.shared_prefix).string());
  for (const std::string* below : {&options.spool_dir, &options.agent_library_dir}) {
    if (below->empty())
      continue;
    for (std::string& path : DirectoriesBelow(options.shared_prefix, *below)) {
      if (std::find(paths.begin(), paths.end(), path) == paths.end())
        paths.push_back(std::move(path));
    }
  }

  PermissionCheckResult result;
  for (const std::string& path : paths) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      continue;  // absent: not ours to judge
    if (st.st_mode & S_IXOTH)
      continue;
    bool repairable = st.st_uid == options.daemon_uid;
    if (repairable) {
      repairable = false;
      for (const std::string& root : options.repairable_roots) {
        if (deploy::PathIsUnder(path, root))
          repairable = true;
      }
    }
    std::string problem = "missing o+x on " + path;
    if (repairable) {
      if (chmod(path.c_str(), (st.st_mode & 07777) | S_IXOTH) == 0) {
        result.repaired.push_back(path);
        continue;
      }
      problem += " (repair failed: " + std::string(std::strerror(errno)) + ")";
    }
    if (!result.problem.empty())
      result.problem += "; ";
    result.problem += problem;
  }
  return result;
}

PermissionCheckOptions DaemonPermissionOptions(const std::string& control_dir,
                                               const std::string& shared_prefix,
                                               const std::string& spool_dir,
                                               const std::string& hostname) {
  PermissionCheckOptions options;
  options.control_dir = control_dir;
  options.shared_prefix = shared_prefix;
  options.spool_dir = spool_dir;
  if (!shared_prefix.empty() && !hostname.empty()) {
    options.agent_library_dir =
        std::filesystem::path(NodeAgentLibrary(shared_prefix, hostname)).parent_path().string();
  }
  options.repairable_roots = {"/var/lib/expanse", control_dir};
  // The shared spool tree: <prefix>/spool, which the installer makes for the daemon account.
  if (!shared_prefix.empty() && deploy::PathIsUnder(spool_dir, shared_prefix + "/spool"))
    options.repairable_roots.push_back(shared_prefix + "/spool");
  else if (!spool_dir.empty())
    options.repairable_roots.push_back(spool_dir);
  options.daemon_uid = geteuid();
  return options;
}

const std::string& PermissionMonitor::Check(int64_t now_ms,
                                            const std::function<void(const std::string&)>& log) {
  if (!enabled_ || (last_ms_ != 0 && now_ms - last_ms_ < 30'000))
    return problem_;
  last_ms_ = now_ms;
  PermissionCheckResult result = CheckProfilingPermissions(options_);
  for (const std::string& path : result.repaired) {
    if (log)
      log("profiling_permissions: restored o+x on " + path);
  }
  if (result.problem != problem_ && !result.problem.empty() && log) {
    log("profiling_permissions: " + result.problem);
  }
  problem_ = std::move(result.problem);
  return problem_;
}

Status PublishDisableMarker(const std::string& control_dir, bool disabled) {
  const std::string marker = control_dir + "/" + kDisableMarkerName;
  if (disabled) {
    Status made = fs::MakeDirectories(control_dir, 0755);
    if (made.ok())
      made = fs::WriteFileAtomically(control_dir, kDisableMarkerName, kOurMarker, 0644);
    if (!made.ok()) {
      return Status(made.code(), "cannot publish the profiling-agent disable marker " + marker +
                                     ": " + made.message())
          .WithReason("disable_marker_failed");
    }
    return OkStatus();
  }
  Result<std::optional<std::string>> existing = fs::ReadSmallFile(marker, 4096);
  if (existing.ok() && existing->has_value() && **existing == kOurMarker) {
    if (unlink(marker.c_str()) != 0 && errno != ENOENT) {
      return Status(StatusCode::kUnavailable,
                    "cannot withdraw " + marker + ": " + std::strerror(errno))
          .WithReason("disable_marker_failed");
    }
  }
  return OkStatus();
}

}  // namespace expanse::agent
