// Wiring SLURM's Prolog, Epilog and TaskProlog to Expanse's wrapper scripts (hook_script.h),
// which run the site's own hooks first. The plan is pure: it reads a parsed slurm.conf and
// returns whole-file edits for the installer to apply (--patch-slurm-conf=true) or the lines an
// operator must add by hand. UnwireHooks undoes the edits byte for byte. The marker format, the
// SLURM 22.05 behaviour it relies on and its sources: docs/formats/slurm-conf-patch.md.
#ifndef EXPANSE_SLURM_HOOK_WIRING_H_
#define EXPANSE_SLURM_HOOK_WIRING_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "slurm/hook_kind.h"
#include "slurm/slurm_conf.h"

namespace expanse::slurm {

struct HookTargets {
  // Absolute paths of our wrapper scripts. No whitespace, '#', '"', '\\' or control characters:
  // they are written into slurm.conf unquoted.
  std::string prolog;
  std::string epilog;
  std::string taskprolog;
  // TaskProlog is wired only with the profiling agent; when false, a TaskProlog wired by an
  // earlier install is unwired.
  bool taskprolog_enabled = false;
  // Recognises a wrapper an earlier install wrote under another path (the installer reads the
  // file and asks ParseManagedHookScript). Null: only the three paths above count as ours.
  std::function<bool(const std::string& path)> is_expanse_wrapper;
};

// The site's own hook, which our wrapper runs first.
struct SiteHook {
  std::string value;  // as SLURM reads it; Prolog and Epilog may hold a glob
  std::string path;   // where it is assigned
  int line = 0;
  // The value is one of our wrappers (a re-install, or wiring done by hand): it must not be
  // chained; the site hook to chain is the one that wrapper names (ParseManagedHookScript).
  bool is_expanse_wrapper = false;
};

enum class HookAction {
  kWire,          // the effective assignment is replaced, or one is appended to the main file
  kAlreadyWired,  // SLURM already runs our wrapper for this hook: nothing to change
  kRetarget,      // our block is in force but names another wrapper path: its line is rewritten
  kUnwire,        // TaskProlog without the profiling agent, wired earlier: the original returns
  kNotWired,      // TaskProlog without the profiling agent, not wired: nothing to change
};

struct HookPlan {
  HookKind kind = HookKind::kProlog;
  HookAction action = HookAction::kNotWired;
  std::string target;  // the wrapper SLURM will run; "" for kUnwire and kNotWired
  // The hook SLURM runs today (for kAlreadyWired and kRetarget: the one our wiring replaced).
  // nullopt when there is none.
  std::optional<SiteHook> site;
  std::vector<std::string> warnings;  // e.g. assignments SLURM ignores
};

// One file's whole contents before and after the plan.
struct FileEdit {
  std::string path;
  std::string before;
  std::string after;
};

struct HookWiringPlan {
  std::string main_path;
  std::vector<HookPlan> hooks;  // Prolog, Epilog, TaskProlog
  std::vector<FileEdit> edits;  // at most one per file; empty when nothing changes
};

// The plan for `conf`. A hook's effective (last) assignment, in whichever file it is, is replaced
// by a marker block that keeps the original lines verbatim and assigns our wrapper; a hook with no
// assignment gets a block appended to the main file. Earlier assignments of the same key stay as
// they are and are reported as warnings. Re-planning a wired file changes nothing, and our own
// wrappers are never chained.
// Errors: kInvalidArgument with reasons hook_target_invalid (a target path that is empty,
// relative or holds characters slurm.conf cannot carry unquoted), slurm_conf_hook_line (the
// effective assignment has text after its value, which SLURM would refuse) and
// slurm_conf_wiring_damaged (a marker block someone edited).
Result<HookWiringPlan> PlanHookWiring(const SlurmConf& conf, const HookTargets& targets);

// One line per hook saying what happens to it, then the warnings.
std::string DescribePlan(const HookWiringPlan& plan);

// For --patch-slurm-conf=false: the exact lines to put in slurm.conf (as comments saying where,
// then the assignment lines) and the reconfigure step. Says so when nothing needs doing.
std::string ManualInstructions(const HookWiringPlan& plan);

// `contents` with every Expanse block replaced by the lines it carries: the bytes before
// wiring, including CRLF line ends, odd spacing and a missing final newline. A file without
// blocks comes back unchanged, so it is idempotent. kInvalidArgument (reason
// slurm_conf_wiring_damaged) naming the line when a block was edited by hand.
Result<std::string> UnwireHooks(std::string_view contents);

// Whether `contents` holds an Expanse block (so uninstall knows which files to restore).
bool HasHookWiring(std::string_view contents);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_HOOK_WIRING_H_
