#include "agent/sampler_bootstrap.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>

#include "core/file_util.h"
#include "release/cupti_node.h"

namespace expanse::agent {
namespace {

constexpr char kLockName[] = "sampler.lock";
constexpr char kPidName[] = "sampler.pid";
constexpr char kSamplerUnit[] = "expanse-sampler.service";
constexpr char kUnitDir[] = "/etc/systemd/system";
constexpr char kSystemdRunDir[] = "/run/systemd/system";
// Present when `expanse compute install --role sampler` ran on this node: its unit is the
// operator's explicit choice and the bootstrap leaves it alone.
constexpr char kExplicitSamplerInstall[] = "/var/lib/expanse-install/sampler.json";
constexpr size_t kMaxUnitBytes = 65536;

// True when some process holds the lock; probes with a non-blocking shared lock.
bool LockHeld(const std::string& state_dir) {
  const std::string path = state_dir + "/" + kLockName;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return false;
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return held;
}

// Becomes `account` (nullopt: stays as the caller). False when that fails.
bool DropPrivileges(const std::optional<UserAccount>& account) {
  if (!account)
    return true;
  if (getuid() == account->uid)
    return true;
  return initgroups(account->name.c_str(), account->gid) == 0 && setgid(account->gid) == 0 &&
         setuid(account->uid) == 0;
}

// The sampler in place of this process, as `account`, its output appended to the log file.
[[noreturn]] void ExecSampler(const BootstrapOptions& options,
                              const std::optional<UserAccount>& account) {
  if (!options.log_file.empty()) {
    const int log = open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
    }
  }
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0)
    dup2(null, STDIN_FILENO);
  if (!DropPrivileges(account))
    _exit(0);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(options.binary.c_str()));
  for (const std::string& a : options.sampler_args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(options.binary.c_str(), argv.data());
  _exit(0);
}

// Whether process `pid` runs a program whose file name is that of `binary`.
bool RunsBinaryNamed(pid_t pid, const std::string& binary) {
  char target[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  return n > 0 && IsSameProgram(std::string(target, static_cast<size_t>(n)), binary);
}

bool SystemdRuns(Host& host) {
  const std::optional<FileInfo> info = host.Stat(kSystemdRunDir);
  return info && info->type == FileInfo::Type::kDirectory;
}

// Under systemd the sampler runs as the expanse-sampler unit. A worker that never had an explicit
// sampler install (an autoscaled node) gets the unit the controller install left on the shared
// mount, <prefix>/lib/systemd/, and a newer shared unit replaces the copy. False when there is no
// unit to run, so the caller starts the sampler directly.
bool EnsureSamplerUnit(const std::string& binary, Host& host) {
  const std::string local = std::string(kUnitDir) + "/" + kSamplerUnit;
  const std::optional<FileInfo> local_info = host.LinkStat(local);
  const bool have_local = local_info.has_value();
  // A link here is the operator's (`systemctl mask` links the unit to /dev/null): never
  // written over; the restart below then reports the mask.
  if (local_info && local_info->type == FileInfo::Type::kSymlink)
    return true;
  if (host.Stat(kExplicitSamplerInstall).has_value())
    return have_local;
  const std::string bin_dir = binary.substr(0, binary.rfind('/'));
  const std::string shared = bin_dir.substr(0, bin_dir.rfind('/')) + "/lib/systemd/" + kSamplerUnit;
  Result<std::optional<std::string>> shared_text = host.ReadFile(shared, kMaxUnitBytes);
  if (!shared_text.ok() || !*shared_text)
    return have_local;
  Result<std::optional<std::string>> local_text = host.ReadFile(local, kMaxUnitBytes);
  if (local_text.ok() && *local_text && **local_text == **shared_text)
    return true;
  if (!host.WriteFile(local, **shared_text, 0644, 0, 0).ok())
    return have_local;
  SubprocessOptions reload;
  reload.argv = {"systemctl", "daemon-reload"};
  reload.timeout = std::chrono::seconds(30);
  (void)host.Run(reload);
  return true;
}

}  // namespace

bool IsSameProgram(std::string exe_link, const std::string& binary) {
  // An unlinked file reads "<path> (deleted)"; a reinstall sets the old binary aside as
  // "<path>.expanse-undo-<n>" before deleting it (install/journal.h).
  constexpr std::string_view kDeleted = " (deleted)";
  if (exe_link.ends_with(kDeleted))
    exe_link.resize(exe_link.size() - kDeleted.size());
  const size_t aside = exe_link.rfind(".expanse-undo-");
  if (aside != std::string::npos && exe_link.find('/', aside) == std::string::npos &&
      exe_link.find_first_not_of("0123456789", aside + 14) == std::string::npos)
    exe_link.resize(aside);
  auto name = [](const std::string& path) { return path.substr(path.rfind('/') + 1); };
  return !exe_link.empty() && name(exe_link) == name(binary);
}

Result<std::string> BinaryIdentity(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return NotFoundError("cannot stat " + path + ": " + std::strerror(errno));
  }
  std::ostringstream id;
  id << st.st_dev << ':' << st.st_ino << ':' << st.st_size << ':' << st.st_mtim.tv_sec
     << std::setw(9) << std::setfill('0') << st.st_mtim.tv_nsec;
  return id.str();
}

Result<SamplerInstanceLock> SamplerInstanceLock::Acquire(const std::string& state_dir,
                                                         const std::string& identity) {
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(state_dir, 0755));
  const std::string path = state_dir + "/" + kLockName;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return FailedPreconditionError("another sampler holds " + path).WithReason("sampler_running");
  }
  SamplerInstanceLock lock(fd);
  EXPANSE_RETURN_IF_ERROR(fs::WriteFileAtomically(
      state_dir, kPidName, std::to_string(getpid()) + " " + identity + "\n", 0644));
  return lock;
}

SamplerInstanceLock::~SamplerInstanceLock() {
  if (fd_ >= 0)
    close(fd_);  // releases the flock
}

bool ControllerInstalledHere(Host& host, const std::string& install_state_dir) {
  return host.LinkStat(install_state_dir + "/controller.json").has_value();
}

std::string BootstrapDecision(const BootstrapOptions& options) {
  if (!LockHeld(options.state_dir))
    return "start";
  Result<std::string> current = BinaryIdentity(options.binary);
  std::ifstream pid_file(options.state_dir + "/" + kPidName);
  long pid = 0;
  std::string identity;
  pid_file >> pid >> identity;
  if (current.ok() && pid > 0 && pid <= std::numeric_limits<pid_t>::max() && identity != *current)
    return "replace:" + std::to_string(pid);
  return "running";
}

bool StopOldSampler(const std::string& state_dir, pid_t pid, const std::string& binary,
                    std::chrono::milliseconds grace) {
  auto released = [&] {
    for (auto waited = std::chrono::milliseconds(0); waited < grace;
         waited += std::chrono::milliseconds(100)) {
      if (!LockHeld(state_dir))
        return true;
      usleep(100'000);
    }
    return !LockHeld(state_dir);
  };
  if (pid <= 1)
    return !LockHeld(state_dir);
  // The pid comes from a file the daemon account writes, and this runs as root: only a process
  // running our binary is ever signalled (a reused pid, or a forged file, is left alone).
  if (!RunsBinaryNamed(pid, binary))
    return !LockHeld(state_dir);
  kill(pid, SIGTERM);
  if (released())
    return true;
  if (!RunsBinaryNamed(pid, binary))
    return false;
  kill(pid, SIGKILL);
  return released();
}

SamplerStartPlan StartSampler(const BootstrapOptions& options, Host& host) {
  std::optional<UserAccount> account;
  if (!options.user.empty())
    account = host.LookupUser(options.user);
  // The sampler runs as the daemon account, by the unit or by us; state a sampler left while
  // running as another account (root) would keep it from taking the node's lock for ever, or
  // from reopening its spool writer's sequence state (then it waited for ever, and the node's
  // samples and job events were lost). So the directory and everything in it (the entries
  // themselves: SetOwner never follows a link) go to the account.
  auto give_state_to_account = [&] {
    if (!account || !host.Stat(options.state_dir))
      return;
    (void)host.SetOwner(options.state_dir, account->uid, account->gid);
    Result<std::vector<std::string>> names = host.ListDirectory(options.state_dir);
    if (!names.ok())
      return;
    for (const std::string& name : *names)
      (void)host.SetOwner(options.state_dir + "/" + name, account->uid, account->gid);
  };
  // The control directory likewise: the account's sampler makes the capture spool and the
  // Phase B triggers in it. A directory someone else than root owns is left as it is.
  auto give_control_to_account = [&] {
    if (options.control_dir.empty() || !host.MakeDirectories(options.control_dir, 0755).ok())
      return;
    const std::optional<FileInfo> control = host.LinkStat(options.control_dir);
    if (account && control && control->uid == 0)
      (void)host.SetOwner(options.control_dir, account->uid, account->gid);
  };
  give_control_to_account();
  if (SystemdRuns(host) && EnsureSamplerUnit(options.binary, host)) {
    give_state_to_account();
    SubprocessOptions restart;
    restart.argv = {"systemctl", "--no-block", "restart", kSamplerUnit};
    restart.timeout = std::chrono::seconds(30);
    Result<SubprocessResult> started = host.Run(restart);
    if (started.ok() && started->Succeeded())
      return {.how = SamplerStart::kUnit, .account = account};
    // systemctl ran and refused (a masked unit, a unit the operator stopped on purpose, a
    // restart still queued when the 30 s ran out): that is systemd's call, and a second,
    // unmanaged sampler must not be started beside it.
    if (started.ok() && started->exit_code != 127)
      return {.how = SamplerStart::kNone, .account = account};
    // No systemctl after all: the node still gets its sampler, started directly.
  }
  // The sampler keeps its lock and sequence state here, as the daemon user.
  const bool have_state_dir = host.MakeDirectories(options.state_dir, 0755).ok();
  if (!options.user.empty() && !account)
    return {.how = SamplerStart::kNone, .account = std::nullopt};
  if (have_state_dir)
    give_state_to_account();
  return {.how = SamplerStart::kExec, .account = account};
}

void StartSamplerDetached(const BootstrapOptions& options, Host& host) {
  const pid_t child = fork();
  if (child != 0) {
    if (child > 0)
      waitpid(child, nullptr, 0);  // the intermediate child exits at once
    return;
  }
  // Intermediate child: a new session, then fork again so the sampler is adopted by init and
  // never becomes a zombie of slurmd.
  setsid();
  const pid_t worker = fork();
  if (worker != 0)
    _exit(0);
  const std::string decision = BootstrapDecision(options);
  if (decision == "running")
    _exit(0);
  // This node picks the CUPTI build its own driver supports (a new node, a driver upgrade, a new
  // release). Here, detached, the work cannot delay the job.
  if (!options.shared_prefix.empty() && !options.hostname.empty()) {
    std::string why;
    const release::NodeCupti cupti = release::EnsureNodeCupti(
        options.shared_prefix, options.hostname, release::LocalDriverVersion(why), "");
    // What was chosen, or why nothing was (a key beside the archives that is not root's alone,
    // no driver): in the sampler's log, where an operator looks first.
    if (!options.log_file.empty()) {
      const int log =
          open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      if (log >= 0) {
        const std::string line = "expanse-daemon prolog: " + cupti.note +
                                 (cupti.variant.empty() && !why.empty() ? " (" + why + ")" : "") +
                                 "\n";
        (void)fs::WriteFully(log, line);
        close(log);
      }
    }
  }
  if (decision.starts_with("replace:")) {
    const pid_t old = static_cast<pid_t>(std::stol(decision.substr(8)));
    // The new sampler needs the lock the old one releases as it exits.
    if (!StopOldSampler(options.state_dir, old, options.binary, std::chrono::seconds(10)))
      _exit(0);  // still held: the next job's Prolog tries again
  }
  const SamplerStartPlan plan = StartSampler(options, host);
  if (plan.how == SamplerStart::kExec)
    ExecSampler(options, plan.account);
  _exit(0);
}

}  // namespace expanse::agent
