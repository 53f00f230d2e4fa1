// The one seam between Expanse's host-changing code (the installer, the uninstaller, the
// daemon's bootstrap) and the machine it runs on: files and directories, subprocesses, the
// clock, the environment and user accounts. RealHost is the machine; MemoryHost
// (core/memory_host.h) is an in-memory one for unit tests, so a flow that calls systemctl,
// scontrol and writes under /etc is tested in milliseconds, with every command it ran and
// every file it left checked, instead of only on a cluster.
//
// Paths are absolute. Errors are Status values with the errno's meaning (kNotFound for
// ENOENT, kPermissionDenied for EACCES, ...), never exceptions.
#ifndef EXPANSE_CORE_HOST_H_
#define EXPANSE_CORE_HOST_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "core/subprocess.h"

namespace expanse {

struct FileInfo {
  enum class Type { kFile, kDirectory, kSymlink, kOther };
  Type type = Type::kFile;
  mode_t mode = 0;  // permission bits only (07777)
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t size = 0;
};

struct UserAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

class Host {
 public:
  virtual ~Host() = default;

  // --- Files and directories ---------------------------------------------------------
  // What is at `path`, following symbolic links; nullopt when nothing is.
  virtual std::optional<FileInfo> Stat(const std::string& path) = 0;
  // What is at `path` itself: a symbolic link is reported as kSymlink, not followed.
  virtual std::optional<FileInfo> LinkStat(const std::string& path) = 0;
  // The contents of `path`, nullopt when it does not exist; kResourceExhausted past max_bytes.
  virtual Result<std::optional<std::string>> ReadFile(const std::string& path,
                                                      size_t max_bytes) = 0;
  // Replaces `path` with `bytes` atomically (readers see the old or the new file, also across
  // a crash), with `mode` and owner before it appears under its name. The directory must exist.
  virtual Status WriteFile(const std::string& path, std::string_view bytes, mode_t mode, uid_t uid,
                           gid_t gid) = 0;
  // As WriteFile, with the bytes of `local_source`: a regular file on this machine's own disk
  // that is not one the Host manages (a release staged in a scratch directory), streamed,
  // never whole in memory. kResourceExhausted past `max_bytes`; kNotFound without the source.
  virtual Status CopyLocalFile(const std::string& local_source, const std::string& path,
                               size_t max_bytes, mode_t mode, uid_t uid, gid_t gid) = 0;
  // Appends `bytes` to `path` and makes them durable before returning (a journal's record
  // must be on disk before the change it describes). Creates the file with `mode` when absent.
  virtual Status AppendToFile(const std::string& path, std::string_view bytes, mode_t mode) = 0;
  // Removes a file or symbolic link; OK when nothing is there.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Gives `path` itself (a link is not followed) to `uid`:`gid`.
  virtual Status SetOwner(const std::string& path, uid_t uid, gid_t gid) = 0;
  // Creates `path` and missing parents; those it creates get exactly `mode` (the umask does
  // not narrow it). OK when it is a directory already.
  virtual Status MakeDirectories(const std::string& path, mode_t mode) = 0;
  // Removes the empty directory `path`; OK when nothing is there, kFailedPrecondition when it
  // is not empty (what is inside was not ours to remove) or not a directory.
  virtual Status RemoveDirectory(const std::string& path) = 0;
  // The names in directory `path` (not "." or ".."), sorted; empty when it does not exist.
  virtual Result<std::vector<std::string>> ListDirectory(const std::string& path) = 0;
  // Removes `path` and everything below it, never following a symbolic link out of it; OK
  // when nothing is there.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Renames the file, link or whole tree at `from` to `to` on the same filesystem (a journal
  // sets a tree aside this way instead of copying it), then syncs the directory so the new
  // name survives a crash. kNotFound when nothing is at `from`; kFailedPrecondition when
  // something is at `to` already (nothing is replaced).
  virtual Status Rename(const std::string& from, const std::string& to) = 0;

  // --- Processes -----------------------------------------------------------------------
  // Runs a program as core/subprocess.h describes (argv, no shell, timeout, output caps).
  virtual Result<SubprocessResult> Run(const SubprocessOptions& options) = 0;
  // Sends `signal` to process `pid` (0 only asks whether it exists); kNotFound when there is
  // no such process.
  virtual Status SignalProcess(pid_t pid, int signal) = 0;
  // Waits (a real host sleeps; MemoryHost moves its clock on).
  virtual void Sleep(std::chrono::milliseconds duration) = 0;

  // --- Environment, accounts, clock ----------------------------------------------------
  virtual std::optional<std::string> GetEnv(std::string_view name) = 0;
  // Every variable of this process's environment.
  virtual std::map<std::string, std::string> Environment() = 0;
  virtual std::optional<UserAccount> LookupUser(const std::string& name) = 0;
  virtual Clock& clock() = 0;
};

// The machine this process runs on.
class RealHost final : public Host {
 public:
  // One per process: it holds no state of its own.
  static RealHost& Get();

  std::optional<FileInfo> Stat(const std::string& path) override;
  std::optional<FileInfo> LinkStat(const std::string& path) override;
  Result<std::optional<std::string>> ReadFile(const std::string& path, size_t max_bytes) override;
  Status WriteFile(const std::string& path, std::string_view bytes, mode_t mode, uid_t uid,
                   gid_t gid) override;
  Status CopyLocalFile(const std::string& local_source, const std::string& path, size_t max_bytes,
                       mode_t mode, uid_t uid, gid_t gid) override;
  Status AppendToFile(const std::string& path, std::string_view bytes, mode_t mode) override;
  Status RemoveFile(const std::string& path) override;
  Status SetOwner(const std::string& path, uid_t uid, gid_t gid) override;
  Status MakeDirectories(const std::string& path, mode_t mode) override;
  Status RemoveDirectory(const std::string& path) override;
  Result<std::vector<std::string>> ListDirectory(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Result<SubprocessResult> Run(const SubprocessOptions& options) override;
  Status SignalProcess(pid_t pid, int signal) override;
  void Sleep(std::chrono::milliseconds duration) override;
  std::optional<std::string> GetEnv(std::string_view name) override;
  std::map<std::string, std::string> Environment() override;
  std::optional<UserAccount> LookupUser(const std::string& name) override;
  Clock& clock() override { return clock_; }

 private:
  SystemClock clock_;
};

}  // namespace expanse

#endif  // EXPANSE_CORE_HOST_H_
