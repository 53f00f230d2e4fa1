#include "agent/phase_b_triggers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "capture/capture_trigger.h"
#include "capture/process_identity.h"
#include "capture/spool_files.h"
#include "core/file_util.h"

namespace expanse::agent {
namespace {

Status EnsureDirectory(const std::string& path, mode_t mode) {
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(path, mode));
  // MakeDirectories applies the umask, and an existing directory keeps whatever it had.
  if (chmod(path.c_str(), mode) != 0)
    return InternalError(path + ": chmod: " + std::strerror(errno));
  return OkStatus();
}

}  // namespace

Status PrepareCaptureDirectories(const std::string& control_dir) {
  EXPANSE_RETURN_IF_ERROR(
      EnsureDirectory(control_dir + "/" + capture::kCaptureDirName, S_ISVTX | 0733));
  return EnsureDirectory(control_dir + "/" + capture::kTriggerDirName, 0755);
}

Result<CaptureDirectories> CaptureDirectoriesFor(bool agent_enabled, bool escalation_enabled,
                                                 const std::string& control_dir) {
  CaptureDirectories dirs;
  if (!agent_enabled)
    return dirs;
  EXPANSE_RETURN_IF_ERROR(PrepareCaptureDirectories(control_dir));
  dirs.capture_control_dir = control_dir;
  if (escalation_enabled)
    dirs.phase_b_control_dir = control_dir;
  return dirs;
}

Result<capture::CaptureTrigger> WritePhaseBTrigger(const std::string& control_dir,
                                                   const std::string& job_id,
                                                   const std::string& reason,
                                                   const std::string& gpu_uuid, int64_t now_ms,
                                                   std::chrono::milliseconds window,
                                                   std::chrono::milliseconds keep) {
  if (!capture::SafeJobId(job_id))
    return InvalidArgumentError("phase B trigger: job id \"" + job_id + "\" is not SLURM's");
  const std::string dir = control_dir + "/" + capture::kTriggerDirName;
  capture::CaptureTrigger trigger;
  trigger.id = job_id + "-" + std::to_string(now_ms) + "-" + gpu_uuid.substr(0, 12);
  trigger.until_ms = static_cast<uint64_t>(now_ms + window.count());
  trigger.reason = reason;
  trigger.gpus = {gpu_uuid};
  EXPANSE_RETURN_IF_ERROR(
      fs::WriteFileAtomically(dir, job_id, capture::TriggerJson(trigger), 0644));
  // Ages are measured against the file just written, on the file system's own clock.
  struct stat written {};
  Result<std::vector<std::string>> names = fs::ListDirectory(dir);
  if (!names.ok() || lstat((dir + "/" + job_id).c_str(), &written) != 0)
    return trigger;
  for (const std::string& name : *names) {
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (lstat(path.c_str(), &st) == 0 &&
        (static_cast<int64_t>(st.st_mtime) + keep.count() / 1000) < written.st_mtime)
      unlink(path.c_str());
  }
  return trigger;
}

}  // namespace expanse::agent
