// CaptureAgent: everything the in-process agent (libexpanse-agent.so) does with the activities
// CUPTI hands it, apart from talking to CUPTI (cuda/, per CUPTI variant). CUPTI's buffer thread
// calls OnActivity; the agent's own thread calls Tick once a second, which
//   - closes the always-on window every `window_ms` and spools its aggregate (when it saw any
//     activity),
//   - checks the job's Phase B trigger and, on a new one, keeps a full trace for at most
//     `trace_window_ms` (and not past the trigger's deadline), then spools it as a segment.
// Every problem (an unwritable spool, a full disk, a bad trigger) is noted once in the agent's
// log in the spool and otherwise ignored: the job is never affected.
#ifndef EXPANSE_CAPTURE_CAPTURE_AGENT_H_
#define EXPANSE_CAPTURE_CAPTURE_AGENT_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "capture/activity_window.h"
#include "capture/process_identity.h"
#include "capture/spool_files.h"
#include "capture/trace_segment.h"

namespace expanse::capture {

struct AgentOptions {
  std::string control_dir;  // the node-local control directory (triggers in phase-b/)
  std::string spool_dir;    // the node-local capture spool
  uint64_t window_ms = 10000;
  uint64_t trace_window_ms = 10000;
  SegmentLimits segment_limits;
  uint64_t min_free_bytes = kMinFreeBytes;
};

class CaptureAgent {
 public:
  CaptureAgent(AgentOptions options, ProcessIdentity process, std::function<uint64_t()> now_ms);

  void OnActivity(const Activity& activity);
  void OnDropped(uint64_t records);
  // CUPTI was off for `ms` (RecordBudget's bursts): the open window and trace say so.
  void OnUnobserved(uint64_t ms);
  // Whether a Phase B trace is being kept (it may spend a larger budget).
  bool Tracing();

  // Whether the open trace closes at a Tick at or before `now_ms` (false when none is open).
  bool TraceEndsBy(uint64_t now_ms);
  // Runs `fn` on the open trace segment, under the agent's lock; false when none is open.
  bool WithTrace(const std::function<void(TraceSegment&)>& fn);

  void Tick();
  // The process is exiting: spools the open window and any trace in progress.
  void Finish();

  // Writes `line` to the agent's log the first time `key` is noted (at most 32 keys).
  void Note(const std::string& key, const std::string& line);

  const ProcessIdentity& process() const { return process_; }
  std::string LogFileName() const;

 private:
  void Spool(const std::string& name, const std::string& content, const char* what);

  const AgentOptions options_;
  const std::function<uint64_t()> now_ms_;
  std::mutex mu_;  // guards everything below
  ProcessIdentity process_;
  ActivityWindow window_;
  std::optional<TraceSegment> segment_;
  uint64_t segment_until_ms_ = 0;
  std::string last_trigger_id_;
  std::set<std::string> noted_;
};

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_CAPTURE_AGENT_H_
