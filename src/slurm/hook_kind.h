// The three SLURM hooks Expanse wires: the slurm.conf key of each and the name
// `expanse-daemon hook <name>` takes.
#ifndef EXPANSE_SLURM_HOOK_KIND_H_
#define EXPANSE_SLURM_HOOK_KIND_H_

#include <array>
#include <string_view>

namespace expanse::slurm {

enum class HookKind { kProlog, kEpilog, kTaskProlog };

inline constexpr std::array<HookKind, 3> kAllHookKinds = {HookKind::kProlog, HookKind::kEpilog,
                                                          HookKind::kTaskProlog};

// "Prolog", "Epilog", "TaskProlog": the key as slurm.conf's man page spells it.
constexpr std::string_view HookKey(HookKind kind) {
  switch (kind) {
    case HookKind::kProlog:
      return "Prolog";
    case HookKind::kEpilog:
      return "Epilog";
    case HookKind::kTaskProlog:
      return "TaskProlog";
  }
  return "";
}

// "prolog", "epilog", "taskprolog".
constexpr std::string_view HookName(HookKind kind) {
  switch (kind) {
    case HookKind::kProlog:
      return "prolog";
    case HookKind::kEpilog:
      return "epilog";
    case HookKind::kTaskProlog:
      return "taskprolog";
  }
  return "";
}

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_HOOK_KIND_H_
