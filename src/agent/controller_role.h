// The controller role (`expanse-daemon --role controller`, unit expanse-daemon), on the
// slurmctld host. The only Expanse process that talks to the planes:
//   - samples this host's GPUs and collects its hook events (NodeCollector);
//   - drains the workers' spool (spool::Aggregator) — every file is hostile input;
//   - reads SLURM's view of jobs, one `squeue --json` per flush interval;
//   - puts all of it into the durable outbox on local disk, one batch per source per round,
//     and deletes spool files only once their batch is durable there;
//   - uploads the outbox to the data plane (outbox::Uploader, its own thread);
//   - sends heartbeats to the control plane, relaying the workers' fresh health reports.
// When the control or data plane answers credential_revoked (a replacement credential was
// exchanged), the daemon stops itself: the new one is started by the installer.
#ifndef EXPANSE_AGENT_CONTROLLER_ROLE_H_
#define EXPANSE_AGENT_CONTROLLER_ROLE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "agent/node_collector.h"
#include "agent/runtime_settings.h"
#include "core/host.h"
#include "core/status.h"

namespace expanse::agent {

struct ControllerOptions {
  NodeCollectorOptions node;
  std::string config_path;
  std::string state_dir = "/var/lib/expanse";  // local disk: outbox, aggregator state
  std::string shared_prefix_override;          // "" = the config's shared_prefix
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::chrono::milliseconds slow_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds flush_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(30)};
  RuntimeSettings settings;
  // Node-local control directory (profiling-agent disable marker); checked for o+x every 30 s
  // while agent injection is on.
  std::string control_dir = "/var/lib/expanse/control";
  std::string daemon_version;
  std::function<void(const std::string&)> log;
};

// Runs until `stop` is set (OK) or the credential is revoked (kUnauthenticated, reason
// "credential_revoked"). Fails at start when the config, the outbox or the spool cannot be
// opened, with a message naming the path. Its directories, SLURM commands, environment and
// clock come from `host` (each flush round is a ControllerRound, controller_round.h).
Status RunControllerRole(const ControllerOptions& options, Host& host,
                         const std::atomic<bool>& stop);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_CONTROLLER_ROLE_H_
