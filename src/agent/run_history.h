// RunHistory: how often the controller started and how its previous runs ended, for the
// heartbeat. systemd restarts a daemon that dies; without this, each restart looks like a
// fresh, healthy compute and a crash loop stays invisible.
//
// A run writes `<state_dir>/running` when it starts and removes it when it stops cleanly; a
// start that finds the marker counts the previous run as unclean. A fatal signal or an
// uncaught exception writes its reason to `<state_dir>/last-fatal` on the way down
// (InstallFatalRecorder), so the next start can say why.
#ifndef EXPANSE_AGENT_RUN_HISTORY_H_
#define EXPANSE_AGENT_RUN_HISTORY_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::agent {

struct RunHistory {
  uint64_t starts = 0;          // this one included
  uint64_t unclean_exits = 0;   // earlier runs that ended without a clean stop
  int64_t last_unclean_ms = 0;  // when the last unclean end was found (the next start)
  std::string last_unclean_reason;
  bool previous_run_unclean = false;  // this start found the previous run's marker

  // {"starts", "unclean_exits", "last_unclean_ms", "last_unclean_reason"}
  nlohmann::json ToJson() const;
};

// Records this start in state_dir (created if missing) and returns the history so far. A
// missing or damaged history file starts from zero: it is diagnostics, never a reason not to
// run.
RunHistory RecordStart(const std::string& state_dir, int64_t now_ms);

// Removes the running marker: this run ends cleanly.
void RecordCleanStop(const std::string& state_dir);

// Makes a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) or std::terminate write
// its reason to <state_dir>/last-fatal before the process dies as it would have. Call once.
void InstallFatalRecorder(const std::string& state_dir);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_RUN_HISTORY_H_
