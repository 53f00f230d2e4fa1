// Internal to the slurm module: the rules squeue, sacct and scontrol records share (display ids,
// states), so the three parsers name a job and its state the same way.
#ifndef EXPANSE_SLURM_JOB_FIELDS_H_
#define EXPANSE_SLURM_JOB_FIELDS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace expanse::slurm::job_fields {

// SLURM's numbering of one record. array_job_id and het_job_id are 0 for plain jobs.
struct JobIdParts {
  int64_t job_id = 0;
  int64_t array_job_id = 0;
  std::optional<int64_t> array_task_id;
  // The tasks not yet started, which SLURM keeps in the array's own record: "5-9" or "5,7%2"
  // (squeue), or a hex bitmap "0x3E0" (sacct 22.05.8, verified), bit i standing for task i.
  std::string array_task_string;
  int64_t het_job_id = 0;
  int64_t het_job_offset = 0;
};

// "123", "123_4", "123_[5-9]" or "123+1", as squeue prints the JOBID column.
std::string FormatJobId(const JobIdParts& parts);

// "0x3E0" -> "5-9", "0x2A" -> "1,3,5": a task bitmap as the range list squeue prints. Text that
// is not a "0x" bitmap is returned unchanged; so is one with a non-hex digit.
std::string TaskRangesFromBitmap(std::string_view text);

// The one state to report. SLURM 22.05 and 23.02 print one string, which is the base state or,
// when a flag is set, the flag's name (COMPLETING, CONFIGURING, REQUEUED, ...); 23.11 and later
// print a list, base state first, then the flags. From a list this returns COMPLETING when
// present (as 22.05 would), else the first base state, else the first entry.
std::string ReportedState(std::span<const std::string> states);

// States in which SLURM's start time is an estimate, not a fact.
bool IsWaitingState(std::string_view state);
// States in which the job has stopped running and its end time is a fact.
bool HasEnded(std::string_view state);

}  // namespace expanse::slurm::job_fields

#endif  // EXPANSE_SLURM_JOB_FIELDS_H_
