// Job events recorded by the SLURM hooks on each node (docs/formats/job-event.md): the exact
// per-node start (Prolog) and end (Epilog) of a job and the GPUs SLURM gave it there. They are
// what catches a job shorter than one sampling interval.
//
// The hooks write each event as one small file in a node-local directory (never the shared
// mount, which may hang; never the network): atomic, bounded in number, readable by the daemon
// user. The node's sampler (or the controller daemon on its own host) collects them, forwards
// them, and deletes each file once it is safely handed on.
#ifndef EXPANSE_AGENT_JOB_EVENTS_H_
#define EXPANSE_AGENT_JOB_EVENTS_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::agent {

inline constexpr char kDefaultEventsDir[] = "/var/lib/expanse/events";
// More files than this means nobody collects them; new events are then dropped (and the
// hook still exits 0) rather than filling the node's disk.
inline constexpr size_t kMaxPendingEvents = 20'000;

struct JobEvent {
  std::string kind;           // "start" (Prolog) or "end" (Epilog)
  std::string job_id;         // "123", "123_4" (array task), "123+1" (heterogeneous component)
  uint32_t slurm_job_id = 0;  // SLURM_JOB_ID: the number in the job's cgroup path
  std::string host;
  int64_t at_ms = 0;
  std::string user;
  std::string partition;
  std::string gpus;                  // SLURM_JOB_GPUS: GRES indices, e.g. "0,1"
  std::string cuda_visible_devices;  // as SLURM set it for the hook
};

// Builds the event from the hook's environment (SLURM_JOB_ID, SLURM_ARRAY_JOB_ID/TASK_ID,
// SLURM_HET_JOB_ID/OFFSET, SLURMD_NODENAME, SLURM_JOB_USER, ...). kInvalidArgument when the
// environment has no usable job id (the hook was not run by slurmd).
Result<JobEvent> JobEventFromEnvironment(const std::string& kind,
                                         const std::map<std::string, std::string>& env,
                                         const std::string& fallback_host, int64_t now_ms);

nlohmann::json ToJson(const JobEvent& event);
Result<JobEvent> JobEventFromJson(const nlohmann::json& json);

// Writes the event into `dir` (created 0755 if missing) as <at_ms>-<job>-<kind>.json.
Status WriteJobEvent(const std::string& dir, const JobEvent& event);

// Pending events, oldest first, with their file names; malformed files are returned in
// `bad` (and should be removed by the caller).
struct PendingEvents {
  std::vector<std::pair<std::string, JobEvent>> events;
  std::vector<std::string> bad;
};
PendingEvents ReadJobEvents(const std::string& dir, size_t max_events);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_JOB_EVENTS_H_
