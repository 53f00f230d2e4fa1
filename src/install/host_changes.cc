#include "install/host_changes.h"

namespace expanse::install {

Status DirectChanges::WriteFile(const std::string& path, const std::string& contents, mode_t mode,
                                uid_t uid, gid_t gid) {
  return host_.WriteFile(path, contents, mode, uid, gid);
}

Status DirectChanges::RemoveFile(const std::string& path) { return host_.RemoveFile(path); }

Status DirectChanges::RemoveTree(const std::string& path) { return host_.RemoveTree(path); }

Status DirectChanges::RunCommand(const std::string& what, const std::vector<std::string>& run,
                                 const std::vector<std::string>& /*undo*/) {
  return RunInstallCommand(host_, what, run);
}

}  // namespace expanse::install
