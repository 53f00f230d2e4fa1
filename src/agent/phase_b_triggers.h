// The sampler's half of Phase B (docs/capture-agent.md): when the escalation policy picks a GPU
// of a job (it went idle, or its throughput halved), every capture agent of that job on this
// node is asked to record one bounded trace window. The request is a file
// <control>/phase-b/<job id> (capture/capture_trigger.h) the agents check once a second.
//
// The node-local control directory is the daemon account's: <control>/phase-b is 0755 (agents,
// running as job users, read it; only the daemon writes), <control>/capture 1733 (agents create
// their files; only the owner of a file, or the daemon, may remove it; nobody but the daemon
// lists it).
#ifndef EXPANSE_AGENT_PHASE_B_TRIGGERS_H_
#define EXPANSE_AGENT_PHASE_B_TRIGGERS_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "capture/capture_trigger.h"
#include "core/result.h"
#include "core/status.h"

namespace expanse::agent {

// Creates <control>/capture and <control>/phase-b with their modes (repairing a mode that
// drifted). An error names the path.
Status PrepareCaptureDirectories(const std::string& control_dir);

// Where a node's capture agents spool their windows and find their Phase B triggers, as the
// operator's settings allow (both <control>, where the agents look; "" = not used):
// EXPANSE_PROFILING_AGENT_ENABLE=0 (`agent_enabled` false) gives neither, and no directory is
// made; EXPANSE_PROFILING_ENABLE=0 (`escalation_enabled` false) keeps the aggregates but writes
// no trigger, so no agent ever records a trace window. The directories are prepared
// (PrepareCaptureDirectories) when the agent is on; an error names the path.
struct CaptureDirectories {
  std::string capture_control_dir;  // NodeCollectorOptions::capture_control_dir
  std::string phase_b_control_dir;  // NodeCollectorOptions::phase_b_control_dir
};
Result<CaptureDirectories> CaptureDirectoriesFor(bool agent_enabled, bool escalation_enabled,
                                                 const std::string& control_dir);

// Writes the trigger for `job_id` (a numeric SLURM job id), replacing an earlier one, and
// removes triggers `keep` older than it (their jobs are long past the window). Returns the
// trigger written.
Result<capture::CaptureTrigger> WritePhaseBTrigger(
    const std::string& control_dir, const std::string& job_id, const std::string& reason,
    const std::string& gpu_uuid, int64_t now_ms, std::chrono::milliseconds window,
    std::chrono::milliseconds keep = std::chrono::minutes(10));

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_PHASE_B_TRIGGERS_H_
