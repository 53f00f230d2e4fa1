// Sampler bootstrap (--sampler-bootstrap prolog): the Prolog starts this node's sampler if none
// runs, or replaces one running an older shared binary, so workers converge to a new release at
// their next job start without a per-node install.
//
// Single instance: a running sampler holds an exclusive flock on <state_dir>/sampler.lock and
// records "<pid> <binary identity>" in <state_dir>/sampler.pid. The identity is the shared
// binary's device, inode, size and modification time, so a replaced binary is noticed.
//
// The Prolog must neither wait nor fail: StartSamplerDetached forks a child in a new session
// that does the work (touching the shared mount, which may hang) while the hook returns at
// once. Where systemd runs, the child asks it to start the expanse-sampler unit instead of
// spawning the process itself. How it starts the sampler (StartSampler) goes through a Host
// (core/host.h), so it is unit-tested on MemoryHost; the lock probe, the signal to an old
// sampler and the exec itself stay process-level.
#ifndef EXPANSE_AGENT_SAMPLER_BOOTSTRAP_H_
#define EXPANSE_AGENT_SAMPLER_BOOTSTRAP_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/host.h"
#include "core/result.h"

namespace expanse::agent {

struct BootstrapOptions {
  std::string binary;                     // <prefix>/bin/expanse-daemon
  std::vector<std::string> sampler_args;  // after the binary: --role sampler ...
  std::string state_dir;                  // node-local, e.g. /var/lib/expanse/sampler
  // The node-local control directory (disable marker, capture spool, Phase B triggers): made
  // for the account when missing, or when root has it, so the sampler can prepare it.
  std::string control_dir;
  std::string user;      // run the sampler as this account ("" = as the caller)
  std::string log_file;  // the sampler's stdout/stderr when spawned directly
  // When set, the node's CUPTI build is brought up to date from the shared mount first
  // (<prefix>/lib/cupti-artifacts → <prefix>/lib/cupti-nodes/<hostname>).
  std::string shared_prefix;
  std::string hostname;
};

// "dev:ino:size:mtime_ns" of `path`, or an error when it cannot be stat'ed.
Result<std::string> BinaryIdentity(const std::string& path);

// Held by a running sampler for its lifetime: takes the lock (kFailedPrecondition, reason
// "sampler_running", when another sampler holds it) and writes the pid file.
class SamplerInstanceLock {
 public:
  static Result<SamplerInstanceLock> Acquire(const std::string& state_dir,
                                             const std::string& identity);
  SamplerInstanceLock(SamplerInstanceLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  SamplerInstanceLock& operator=(SamplerInstanceLock&&) = delete;
  ~SamplerInstanceLock();

 private:
  explicit SamplerInstanceLock(int fd) : fd_(fd) {}
  int fd_;
};

// True when the installer's record of a controller install is on this host
// (<install_state_dir>/controller.json): the controller daemon samples this node's GPUs itself,
// so the Prolog starts no sampler here (two would sample the same GPUs twice; an explicit
// `--role sampler` install is refused on such a host for the same reason).
bool ControllerInstalledHere(Host& host, const std::string& install_state_dir);

// What the bootstrap would do now: "running" (a current sampler holds the lock), "start" (none
// runs) or "replace:<pid>" (one runs an older binary).
std::string BootstrapDecision(const BootstrapOptions& options);

// Whether `exe_link` (what /proc/PID/exe reads) is a program named like `binary`: the same file
// name, also once deleted or set aside by a reinstall.
bool IsSameProgram(std::string exe_link, const std::string& binary);

// Stops the sampler `pid` that holds the lock in `state_dir` and runs an older binary: SIGTERM,
// then up to `grace` for it to release the lock; one still holding it then (stuck on a hung
// mount, say) is sent SIGKILL, if it still runs a binary named like `binary` (so a reused pid
// is never killed), and given `grace` again. True when the lock is free at the end.
bool StopOldSampler(const std::string& state_dir, pid_t pid, const std::string& binary,
                    std::chrono::milliseconds grace);

enum class SamplerStart {
  kUnit,  // systemd was asked to (re)start the expanse-sampler unit, and accepted
  kExec,  // the caller runs the sampler itself: no systemd, no unit, or systemctl failed
  kNone,  // not started: options.user names no account on this host
};

struct SamplerStartPlan {
  SamplerStart how = SamplerStart::kNone;
  std::optional<UserAccount> account;  // whom to run the sampler as (nullopt: the caller)
};

// How the bootstrap starts a sampler once none current runs, with what it changes on `host`:
//   - where /run/systemd/system is a directory and a unit is there to run (the local
//     /etc/systemd/system/expanse-sampler.service, or the shared <prefix>/lib/systemd/ copy
//     written over it when they differ and no explicit sampler install exists, followed by
//     `systemctl daemon-reload`): the state directory, lock and pid files are given to
//     options.user, then `systemctl --no-block restart expanse-sampler.service`; kUnit when
//     that succeeds;
//   - otherwise (also when systemctl is missing or fails): state_dir is created and given to
//     options.user; kExec, or kNone when options.user names no account.
SamplerStartPlan StartSampler(const BootstrapOptions& options, Host& host);

// Runs the decision in a detached child, which starts the sampler through `host`
// (StartSampler), and returns immediately in the caller.
void StartSamplerDetached(const BootstrapOptions& options, Host& host);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SAMPLER_BOOTSTRAP_H_
