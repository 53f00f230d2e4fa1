#include "agent/profiling_permissions.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

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

}  // namespace

PermissionCheckResult CheckProfilingPermissions(const PermissionCheckOptions& options) {
  std::vector<std::string> paths;
  if (!options.control_dir.empty())
    paths = WithAncestors(options.control_dir);
  if (!options.shared_prefix.empty())
    paths.push_back(options.shared_prefix);
  if (!options.spool_dir.empty())
    paths.push_back(options.spool_dir);

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
                                               const std::string& spool_dir) {
  PermissionCheckOptions options;
  options.control_dir = control_dir;
  options.shared_prefix = shared_prefix;
  options.spool_dir = spool_dir;
  options.repairable_roots = {"/var/lib/expanse", control_dir};
  if (!spool_dir.empty())
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
