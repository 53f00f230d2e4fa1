// The installer's view of SLURM hook wiring: which slurm.conf, which edits wire our Prolog,
// Epilog and TaskProlog (chaining the site's own), what to print when the operator wires them
// by hand, and the edits that undo our wiring. The parsing and editing rules live in
// src/slurm (slurm_conf, hook_wiring); this adapts them to install steps.

#ifndef EXPANSE_INSTALL_SLURM_WIRING_H_
#define EXPANSE_INSTALL_SLURM_WIRING_H_

#include <string>
#include <vector>

#include "core/host.h"
#include "core/result.h"

namespace expanse::install {

struct WholeFileEdit {
  std::string path;
  std::string before;
  std::string after;
};

struct HookWrapperPaths {
  std::string prolog;
  std::string epilog;
  std::string taskprolog;  // "" when the profiling agent is off (TaskProlog is not wired)
};

struct WiringPlan {
  std::string slurm_conf;
  std::vector<WholeFileEdit> edits;   // empty when already wired
  std::string description;            // what will change, for the operator
  std::string manual_instructions;    // the lines to add by hand (--patch-slurm-conf=false)
  std::vector<std::string> warnings;  // e.g. earlier assignments SLURM ignores
  std::string site_prolog;            // site hooks to chain ("" = none)
  std::string site_epilog;
  std::string site_taskprolog;
};

Result<WiringPlan> PlanWiring(Host& host, const std::string& slurm_conf_flag,
                              const HookWrapperPaths& hooks);

// Edits that remove our wiring from `files` (e.g. those an install state lists) and from every
// file of the slurm.conf at `slurm_conf` ("" = skip), restoring what was there before; files
// that carry none are skipped.
Result<std::vector<WholeFileEdit>> PlanUnwiring(Host& host, const std::vector<std::string>& files,
                                                const std::string& slurm_conf = "");

struct HookScriptSpec {
  std::string kind;  // prolog | epilog | taskprolog
  std::string daemon_path;
  std::string shared_prefix;
  std::string user;
  std::string sampler_bootstrap;
  bool inject_node_agent = false;  // taskprolog: each node injects its own agent
  std::string site_hook;
  std::vector<std::string> extra_args;  // appended to the daemon's command line
};

Result<std::string> RenderHookWrapper(const HookScriptSpec& spec);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_SLURM_WIRING_H_
