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
// spawning the process itself.
#ifndef EXPANSE_AGENT_SAMPLER_BOOTSTRAP_H_
#define EXPANSE_AGENT_SAMPLER_BOOTSTRAP_H_

#include <string>
#include <vector>

#include "core/result.h"

namespace expanse::agent {

struct BootstrapOptions {
  std::string binary;                     // <prefix>/bin/expanse-daemon
  std::vector<std::string> sampler_args;  // after the binary: --role sampler ...
  std::string state_dir;                  // node-local, e.g. /var/lib/expanse/sampler
  std::string user;                       // run the sampler as this account ("" = as the caller)
  std::string log_file;                   // the sampler's stdout/stderr when spawned directly
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

// What the bootstrap would do now: "running" (a current sampler holds the lock), "start" (none
// runs) or "replace:<pid>" (one runs an older binary).
std::string BootstrapDecision(const BootstrapOptions& options);

// Runs the decision in a detached child and returns immediately in the caller.
void StartSamplerDetached(const BootstrapOptions& options);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SAMPLER_BOOTSTRAP_H_
