// Where the removal steps that uninstall and reinstall share (stop the unit, take the hook
// wiring out, delete the installed files) make their changes. Uninstall changes the host
// directly; a reinstall passes its install Journal, so a reinstall that fails puts the
// previous runtime back exactly (files, wiring, and the unit running again).
//
//   DirectChanges direct(host);                  // uninstall
//   JournalChanges journalled(journal);          // reinstall
//   EXPANSE_RETURN_IF_ERROR(RemoveInstalledFiles(journalled, paths, state, out));

#ifndef EXPANSE_INSTALL_HOST_CHANGES_H_
#define EXPANSE_INSTALL_HOST_CHANGES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/host.h"
#include "core/status.h"
#include "install/journal.h"

namespace expanse::install {

class HostChanges {
 public:
  virtual ~HostChanges() = default;
  // Replaces a small file (slurm.conf, a unit).
  virtual Status WriteFile(const std::string& path, const std::string& contents, mode_t mode,
                           uid_t uid, gid_t gid) = 0;
  // Removes a small regular file; nothing there is fine.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes a file or a whole tree, however large (binaries, unpacked builds); nothing there
  // is fine.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Runs `run` unless it is empty; a failure is an error naming `what`. `undo` is what a
  // rollback runs to reverse it (ignored where changes are not journalled). Record an
  // undo-only command (empty `run`) *before* the changes it must follow on rollback, as
  // rollback goes newest first.
  virtual Status RunCommand(const std::string& what, const std::vector<std::string>& run,
                            const std::vector<std::string>& undo) = 0;
};

// Changes made at once, for good (uninstall).
class DirectChanges final : public HostChanges {
 public:
  explicit DirectChanges(Host& host) : host_(host) {}
  Status WriteFile(const std::string& path, const std::string& contents, mode_t mode, uid_t uid,
                   gid_t gid) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Status RunCommand(const std::string& what, const std::vector<std::string>& run,
                    const std::vector<std::string>& undo) override;

 private:
  Host& host_;
};

// Changes written down in an install Journal first, undone by its RollBack.
class JournalChanges final : public HostChanges {
 public:
  explicit JournalChanges(Journal& journal) : journal_(journal) {}
  Status WriteFile(const std::string& path, const std::string& contents, mode_t mode, uid_t uid,
                   gid_t gid) override {
    return journal_.WriteFile(path, contents, mode, uid, gid);
  }
  Status RemoveFile(const std::string& path) override { return journal_.RemoveFile(path); }
  Status RemoveTree(const std::string& path) override { return journal_.MoveAside(path); }
  Status RunCommand(const std::string& what, const std::vector<std::string>& run,
                    const std::vector<std::string>& undo) override {
    return journal_.RunCommand(what, run, undo);
  }

 private:
  Journal& journal_;
};

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_HOST_CHANGES_H_
