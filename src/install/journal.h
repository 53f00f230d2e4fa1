// The install journal: every change `expanse compute install` makes to the host is written
// down (with a copy of what it replaces) BEFORE it is made, so a failed or killed install can
// be undone exactly, leaving the host as it was.
//
//   EXPANSE_ASSIGN_OR_RETURN(Journal journal, Journal::Begin(host, dir, faults));
//   EXPANSE_RETURN_IF_ERROR(journal.WriteFile("/etc/systemd/system/x.service", text, 0644));
//   ...
//   journal.Commit();            // success: forget the journal and its backups
//   Journal::RollBack(host, dir, log); // failure (or an interrupted earlier run): undo in reverse
//
// Layout of `dir` (local disk, root only): `journal.jsonl`, one JSON record per change, each
// appended and fsync'ed before the change; `backup-<seq>` holds the bytes a change replaces or
// removes. A torn last record means its change was never started (records are complete before
// changes begin), so recovery skips it. Format: docs/formats/install-journal.md.

#ifndef EXPANSE_INSTALL_JOURNAL_H_
#define EXPANSE_INSTALL_JOURNAL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.h"
#include "core/result.h"
#include "core/status.h"
#include "install/install_options.h"

namespace expanse::install {

// Where progress and diagnostics go; the CLI prints them, tests collect them.
using LogFn = std::function<void(const std::string&)>;

class Journal {
 public:
  // Starts an empty journal in `dir` (created 0700). kFailedPrecondition, reason
  // "journal_pending", when a journal is already there: roll it back first.
  static Result<Journal> Begin(Host& host, const std::string& dir, FaultInjection faults = {});

  // True when `dir` holds a journal of an install that did not finish.
  static bool Pending(Host& host, const std::string& dir);

  // Undoes every recorded change, newest first, then removes the journal. Keeps going past a
  // failed undo step (logging it) so as much as possible is restored; the first failure is
  // returned at the end and the journal is kept for another try.
  static Status RollBack(Host& host, const std::string& dir, const LogFn& log);

  Journal(Journal&& other) noexcept = default;
  Journal& operator=(Journal&&) = delete;
  Journal(const Journal&) = delete;

  // Creates or replaces `path` atomically with `contents`, `mode` and owner. Undo restores the
  // old bytes, mode and owner, or removes the file when there was none.
  Status WriteFile(const std::string& path, const std::string& contents, mode_t mode, uid_t uid = 0,
                   gid_t gid = 0);

  // The same change, with the bytes of `local_source` (a staged release file on this machine's
  // own disk) streamed into place: Host::CopyLocalFile.
  Status CopyLocalFile(const std::string& local_source, const std::string& path, size_t max_bytes,
                       mode_t mode, uid_t uid = 0, gid_t gid = 0);

  // Creates `path` and its missing parents. Undo removes the directories this created (only
  // when empty: anything left inside was not ours).
  Status MakeDirectories(const std::string& path, mode_t mode, uid_t uid = 0, gid_t gid = 0);

  // Changes the owner of an existing directory or file; undo gives it back.
  Status Chown(const std::string& path, uid_t uid, gid_t gid);

  // Removes `path` (a regular file); undo puts it back.
  Status RemoveFile(const std::string& path);

  // Records `undo` (a command) and then runs `run` (empty = run nothing now). A failing `run`
  // is an error; undo commands are best effort. `what` names the step in logs.
  Status RunCommand(const std::string& what, const std::vector<std::string>& run,
                    const std::vector<std::string>& undo);

  // Sets the file, link or tree at `path` aside beside itself (renamed to
  // `<path>.expanse-undo-<seq>`, no copy: binaries and unpacked builds are large); undo puts it
  // back, Commit deletes it. Nothing at `path` is fine (no change).
  Status MoveAside(const std::string& path);

  // Records a directory whose whole tree (created by a step that is not journalled file by
  // file, such as archive extraction into a fresh directory) is removed on undo.
  Status AdoptNewTree(const std::string& path);

  // Success: removes the journal and its backups (the commit point), then what was set aside.
  Status Commit();

  int changes() const { return changes_; }
  const std::string& dir() const { return dir_; }

 private:
  Journal(Host& host, std::string dir, FaultInjection faults)
      : host_(host), dir_(std::move(dir)), faults_(faults) {}
  Status Append(const std::string& record_json);
  Status BeforeChange();  // fault injection point
  std::string NextBackupName();
  // The undo record of a file about to be created or replaced (a backup of the old one).
  Status RecordFileReplacement(const std::string& path);

  Host& host_;
  std::string dir_;  // journal.jsonl is appended to, one durable record per change
  FaultInjection faults_;
  int changes_ = 0;
  int seq_ = 0;
  std::vector<std::string> set_aside_;  // deleted once the journal is committed
};

// One record of journal.jsonl as a rollback reads it (docs/formats/install-journal.md).
struct JournalRecord {
  int64_t seq = 0;
  std::string op;    // file, remove, mkdir, chown, command, aside or tree
  std::string path;  // absolute, except for a command
  bool existed = false;
  std::string backup;  // backup-<seq>: [a-z0-9-] only, a name inside the journal's directory
  int64_t mode = 0644;
  int64_t uid = 0;
  int64_t gid = 0;
  std::string what;
  std::vector<std::string> undo;
};

// The records of a journal's text, decoded before anything is undone, oldest first: one entry
// per line, the record or the refusal of that line by its number. A damaged disk or a hand edit
// is an undo failure named by its line, never a throw in the middle of a rollback. A last line
// that is not a JSON object is a torn record and is left out: its change never started.
std::vector<Result<JournalRecord>> DecodeJournal(std::string_view text);

// Runs `argv` (nothing when empty) with a 120 s limit; a failure or timeout is kUnavailable,
// reason "command_failed", naming `what` with the first 500 bytes of its stderr.
Status RunInstallCommand(Host& host, const std::string& what, const std::vector<std::string>& argv);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_JOURNAL_H_
