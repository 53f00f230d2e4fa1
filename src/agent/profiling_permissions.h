// With in-process agent injection on, the job's processes (running as the job's user) must be
// able to reach the agent library and the profiling spool, so every directory on the way needs
// other-execute (o+x). The daemon checks that every 30 seconds: the node-local control
// directory and each of its ancestors, the shared-prefix root, and the directories from there to
// the spool and to the node's agent library. A missing bit
// degrades `profiling_permissions` health with the exact path. The daemon repairs only that bit,
// and only on directories it owns inside the roots it manages (/var/lib/expanse, the control
// root, the shared spool tree); the shared-prefix root and the site's own ancestors are the
// operator's to fix.
//
// EXPANSE_PROFILING_AGENT_ENABLE=0 publishes the node-local disable marker <control>/disabled,
// which TaskProlog checks before exporting the injection variables. A marker the operator
// created is theirs: the daemon never removes a marker it did not write.
#ifndef EXPANSE_AGENT_PROFILING_PERMISSIONS_H_
#define EXPANSE_AGENT_PROFILING_PERMISSIONS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace expanse::agent {

inline constexpr char kDefaultControlDir[] = "/var/lib/expanse/control";
inline constexpr char kDisableMarkerName[] = "disabled";

struct PermissionCheckOptions {
  std::string control_dir = kDefaultControlDir;
  std::string shared_prefix;  // "" when none
  // Under the shared prefix, each is checked with every directory between the prefix and it.
  std::string spool_dir;          // "" when none
  std::string agent_library_dir;  // the directory of the node's agent library; "" when none
  // Directories under these roots that the daemon user owns may be repaired.
  std::vector<std::string> repairable_roots;
  uid_t daemon_uid = 0;
};

struct PermissionCheckResult {
  // "" when every directory is traversable; otherwise one "missing o+x on <path>" per path,
  // joined with "; ", with "(repair failed: …)" where a repair was tried.
  std::string problem;
  std::vector<std::string> repaired;  // directories whose o+x the daemon restored
};

PermissionCheckResult CheckProfilingPermissions(const PermissionCheckOptions& options);

// The options for a daemon on `hostname`: the control directory, the shared-prefix root,
// `spool_dir` and the node's agent library directory (<prefix>/lib/cupti-nodes/<hostname>/lib,
// which the job's processes load from), with /var/lib/expanse, the control directory and the
// shared spool tree (<prefix>/spool) as the roots it may repair.
PermissionCheckOptions DaemonPermissionOptions(const std::string& control_dir,
                                               const std::string& shared_prefix,
                                               const std::string& spool_dir,
                                               const std::string& hostname);

// Runs the check at most every 30 s (when agent injection is on) and remembers the outcome.
class PermissionMonitor {
 public:
  PermissionMonitor(PermissionCheckOptions options, bool enabled)
      : options_(std::move(options)), enabled_(enabled) {}
  // The current problem ("" = none), re-checked when 30 s have passed since the last check.
  // Repairs are reported through `log`.
  const std::string& Check(int64_t now_ms, const std::function<void(const std::string&)>& log);

 private:
  PermissionCheckOptions options_;
  bool enabled_;
  int64_t last_ms_ = 0;
  std::string problem_;
};

// Publishes (disabled = true) or withdraws the disable marker. Failure to publish is an error
// naming the path and the cause; the daemon then refuses to start, since injection would
// otherwise go on against the operator's setting.
Status PublishDisableMarker(const std::string& control_dir, bool disabled);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_PROFILING_PERMISSIONS_H_
