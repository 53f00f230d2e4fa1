// The worker role (`expanse-daemon --role sampler`, unit expanse-sampler): samples this
// node's GPUs, collects the SLURM hook events, and hands both to the controller through the
// shared spool — one file per flush interval into <prefix>/spool/workers/<host>/ — plus a
// health report the controller relays in its heartbeat. It also carries out the stack bursts
// the controller asks of this node through <prefix>/spool/control/<host>/ (burst_inbox.h).
// It holds no credential. Its only network connection sends the node's own trace segments to
// the data plane with grants the controller obtained (EXPANSE_SEGMENT_UPLOAD_MODE direct or
// auto; segment_direct.h); with relay it opens none.
#ifndef EXPANSE_AGENT_SAMPLER_ROLE_H_
#define EXPANSE_AGENT_SAMPLER_ROLE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "agent/node_collector.h"
#include "agent/runtime_settings.h"
#include "core/host.h"
#include "core/status.h"

namespace expanse::agent {

// Where the workers' spool lives under the shared prefix.
std::string WorkerSpoolRoot(const std::string& shared_prefix);

struct SamplerRoleOptions {
  NodeCollectorOptions node;
  std::string shared_prefix;
  std::string state_dir = "/var/lib/expanse/sampler";  // local: the spool writer's sequence
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::chrono::milliseconds slow_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds flush_interval{std::chrono::seconds(10)};
  // How often the node's stack burst requests are looked for in the shared control tree
  // (burst_inbox.h): a directory listing on the shared mount each time.
  std::chrono::milliseconds burst_poll_interval{std::chrono::seconds(2)};
  RuntimeSettings settings;
  // Node-local control directory (profiling-agent disable marker); checked for o+x every 30 s
  // while agent injection is on.
  std::string control_dir = "/var/lib/expanse/control";
  std::string daemon_version;
  std::function<void(const std::string&)> log;
};

// Runs until `stop` is set; flushes once more before returning. Fails at start only (no
// usable spool directory); later trouble (shared mount gone, GPU driver hung) is reported in
// health and retried, never fatal. The clock and the environment (PATH, for the capability
// report) come from `host`.
Status RunSamplerRole(const SamplerRoleOptions& options, Host& host, const std::atomic<bool>& stop);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SAMPLER_ROLE_H_
