// The bash wrapper scripts SLURM runs as Prolog, Epilog and TaskProlog once hook_wiring.h has
// pointed slurm.conf at them. Each runs the site's own hook first, exactly as SLURM 22.05 would
// (same environment, output and exit status, glob order, "no match" failing), then
// `expanse-daemon hook <kind>` under timeout(1), which can never change the outcome. The script
// text, its header and the SLURM behaviour it copies: docs/formats/hook-scripts.md.
#ifndef EXPANSE_SLURM_HOOK_SCRIPT_H_
#define EXPANSE_SLURM_HOOK_SCRIPT_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "slurm/hook_kind.h"

namespace expanse::slurm {

// Bumped when a script's behaviour changes, so a reinstall can tell old scripts apart.
inline constexpr int kHookScriptFormatVersion = 1;
// In every script's second line; uninstall and reinstall look for it.
inline constexpr std::string_view kHookScriptMarker = "managed by expanse compute install";

struct HookScriptOptions {
  HookKind kind = HookKind::kProlog;
  std::string daemon_path;        // absolute: <shared prefix>/bin/expanse-daemon
  std::string shared_prefix;      // --shared-prefix; "" = not passed
  std::string user;               // --user (the daemon account); "" = not passed
  bool sampler_bootstrap = true;  // Prolog: --sampler-bootstrap prolog, else off
  std::string agent_library;      // TaskProlog: --agent-library, an explicit agent path
  // TaskProlog: --inject-agent, each node injects its own CUPTI build's agent
  // (<shared prefix>/lib/cupti-nodes/<host>/lib/libexpanse-agent.so) when it has one.
  bool inject_node_agent = false;
  std::vector<std::string> extra_daemon_args;  // appended as they are
  // The site's hook to run first; "" = none. For Prolog and Epilog a glob pattern as SLURM
  // allows; TaskProlog's is one literal path.
  std::string site_hook;
  // timeout(1)'s limit for the daemon, whole seconds; SIGKILL one second later.
  std::chrono::seconds time_limit{10};
};

// The script, to be written with mode 0755 (TaskProlog runs as the job's user). Errors
// (kInvalidArgument, reason hook_script_invalid): a relative or empty daemon path, a time limit
// under one second, a NUL byte in any value, or a site hook holding a control character.
Result<std::string> RenderHookScript(const HookScriptOptions& options);

// What a script we wrote says about itself.
struct ManagedHookScript {
  int format_version = 0;
  std::string kind;       // "prolog", "epilog", "taskprolog"
  std::string site_hook;  // the chained site hook; "" = none
};

// nullopt when `contents` is not a script RenderHookScript wrote (of any format version).
std::optional<ManagedHookScript> ParseManagedHookScript(std::string_view contents);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_HOOK_SCRIPT_H_
