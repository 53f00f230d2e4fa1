// An in-memory Host for unit tests (core/host.h): a file tree, a scripted answer for each
// program run, an environment, accounts and a manual clock. Every command run is recorded,
// so a test states exactly what a flow did to the machine.
//
//   MemoryHost host;
//   host.AddUser({"slurm", 64030, 64030});
//   host.OnRun("systemctl", [](const std::vector<std::string>&) { return MemoryHost::Exit(0); });
//   ... run the flow with `host` ...
//   EXPECT_EQ(host.commands(), (std::vector<std::string>{"systemctl daemon-reload"}));
#ifndef EXPANSE_CORE_MEMORY_HOST_H_
#define EXPANSE_CORE_MEMORY_HOST_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.h"

namespace expanse {

class MemoryHost final : public Host {
 public:
  using Program = std::function<SubprocessResult(const std::vector<std::string>& argv)>;

  explicit MemoryHost(int64_t now_ms = 1'800'000'000'000);

  // A program that exited with `code`, printing `out` and `err`.
  static SubprocessResult Exit(int code, std::string out = "", std::string err = "");

  // --- Setting the scene -----------------------------------------------------------------
  // What running `program` (argv[0]) does; a program with no answer is "not found" (exit 127,
  // like a shell), which is what a host without systemd or SLURM looks like.
  void OnRun(const std::string& program, Program answer);
  void SetEnv(const std::string& name, const std::string& value) { env_[name] = value; }
  void AddUser(UserAccount account) { users_[account.name] = std::move(account); }
  void AddProcess(pid_t pid) { processes_.insert(pid); }
  // Writes a file and its missing parent directories (0755), bypassing the atomic rules.
  void Put(const std::string& path, std::string bytes, mode_t mode = 0644, uid_t uid = 0,
           gid_t gid = 0);

  // --- What happened ---------------------------------------------------------------------
  // Every command run, as its argv joined by spaces, in order.
  const std::vector<std::string>& commands() const { return commands_; }
  // Every account name looked up, in order.
  const std::vector<std::string>& looked_up_users() const { return looked_up_users_; }
  void ClearCommands() { commands_.clear(); }
  // The contents of a file, nullopt when there is none.
  std::optional<std::string> Contents(const std::string& path) const;
  // Every file path, sorted.
  std::vector<std::string> Files() const;
  // Every directory path, sorted ("/" included).
  std::vector<std::string> Directories() const;
  // Files and directories with contents, mode and owner, one line each: two snapshots are
  // equal exactly when the trees are (how a test proves a rollback left the host as it was).
  std::string Snapshot() const;

  // --- Host ----------------------------------------------------------------------------
  std::optional<FileInfo> Stat(const std::string& path) override;
  // MemoryHost has no symbolic links: the same as Stat.
  std::optional<FileInfo> LinkStat(const std::string& path) override { return Stat(path); }
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
  // Recorded among commands() as "kill -<signal> <pid>"; a process exists while it is listed
  // by AddProcess and a signal other than 0 ends it.
  Status SignalProcess(pid_t pid, int signal) override;
  void Sleep(std::chrono::milliseconds duration) override { clock_.Advance(duration.count()); }
  std::optional<std::string> GetEnv(std::string_view name) override;
  std::map<std::string, std::string> Environment() override { return {env_.begin(), env_.end()}; }
  std::optional<UserAccount> LookupUser(const std::string& name) override;
  ManualClock& clock() override { return clock_; }

 private:
  struct File {
    std::string bytes;
    FileInfo info;
  };
  static std::string Parent(const std::string& path);

  std::map<std::string, File> files_;
  std::map<std::string, FileInfo> directories_;
  std::map<std::string, Program> programs_;
  std::map<std::string, std::string, std::less<>> env_;
  std::map<std::string, UserAccount> users_;
  std::vector<std::string> looked_up_users_;
  std::vector<std::string> commands_;
  std::set<pid_t> processes_;
  ManualClock clock_;
};

}  // namespace expanse

#endif  // EXPANSE_CORE_MEMORY_HOST_H_
