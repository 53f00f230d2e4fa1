// SLURM's view of a job as the record the controller sends (wire::JobRecord), fitted to what
// the server's decoder and store take. A batch is accepted or refused whole, and users write
// much of a job's text: a name with a tab or over 256 bytes, an account with a control
// character, or a large job's node list over 4 KiB would otherwise have the server refuse the
// controller's whole round, its own node's samples with it, each time the record went out.
#ifndef EXPANSE_AGENT_SLURM_JOB_RECORD_H_
#define EXPANSE_AGENT_SLURM_JOB_RECORD_H_

#include <cstdint>
#include <string>

#include "slurm/job_info.h"
#include "wire/records.h"

namespace expanse::agent {

// Whether SLURM's record names one job the server can store: an id of clean text within the
// limit, not a pending array's "123_[5-9]" (its tasks are reported once they exist).
bool StorableJobId(const std::string& job_id);

// Whether a record of `job` goes to the server: a storable id and a state (DecodeJob requires
// one; squeue and sacct leave it empty only when SLURM said none).
bool SendableJob(const slurm::JobInfo& job);

// A host list cut to at most `max_bytes` at a whole entry, so what is sent is a shorter list,
// not a broken one: at the last top-level comma ("a[1-3],b" -> "a[1-3]"), or inside the last
// bracket that fits, closed again ("gpu[0001-0003,0005,...]" -> "gpu[0001-0003,0005]"),
// whichever keeps more. Control characters and invalid UTF-8 are cleaned first (CleanText).
std::string FitNodeList(const std::string& nodes, size_t max_bytes = wire::kMaxJobNodesBytes);

// The record of `job` observed at `observed_ms`: text cleaned and cut to the record's limits,
// times within [0, wire::kMaxTimeMs], an end before the start dropped (0: not known; a
// requeued job's previous end), negative counts 0. Only for a SendableJob.
wire::JobRecord SlurmJobRecord(const slurm::JobInfo& job, int64_t observed_ms);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SLURM_JOB_RECORD_H_
