// `expanse-daemon hook prolog|epilog|taskprolog`: the SLURM hook entry points, called by the
// hook scripts the installer writes (which also chain the site's own hooks).
//
// The rules (a hook can break jobs; ours must never):
//   - always exit 0: a failing Prolog drains the node in SLURM 22.05;
//   - bounded time: an alarm ends the hook after `deadline`; TaskProlog has no SLURM timeout
//     at all, so a hang there would hang every task launch;
//   - never touch the shared mount or the network: events go to node-local disk; the sampler
//     carries them on.
// Prolog records the job's start and GPU assignment on the node and starts or updates the
// node's sampler when sampler bootstrap is on. Epilog records the end. TaskProlog prints
// `export` lines for the in-process agent, only when agent injection is on, the node-local
// disable marker is absent and the agent library exists.
#ifndef EXPANSE_AGENT_HOOK_H_
#define EXPANSE_AGENT_HOOK_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "core/clock.h"

namespace expanse::agent {

struct HookOptions {
  std::string kind;  // prolog | epilog | taskprolog
  std::string events_dir;
  std::string control_dir;
  std::string agent_library;  // "" = agent injection off
  std::string hostname;       // fallback when SLURMD_NODENAME is unset
  // Called by Prolog to start or update the sampler; null = sampler bootstrap off.
  std::function<void()> bootstrap_sampler;
  // Where a hook's own problems go (the hook's stderr ends up in slurmd's log).
  std::function<void(const std::string&)> log;
};

// <shared prefix>/lib/cupti-nodes/<hostname>/lib/libexpanse-agent.so: the agent of the CUPTI
// build the node's sampler unpacked for its own driver.
std::string NodeAgentLibrary(const std::string& shared_prefix, const std::string& hostname);

// Runs the hook and returns what it prints on stdout (TaskProlog's export lines). Never fails.
std::string RunHook(const HookOptions& options, const std::map<std::string, std::string>& env,
                    Clock& clock);

// Arms an alarm that ends the process with status 0 after `deadline`.
void ArmHookDeadline(std::chrono::milliseconds deadline);

// The environment as a map (from `environ`).
std::map<std::string, std::string> EnvironmentMap(char** environ_entries);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_HOOK_H_
