// SlurmClient: runs SLURM's commands for the controller daemon and parses what they print.
//
//   ListJobs          squeue --all --json                   every job, one call per interval
//   ShowJobGres       scontrol show job -d <id>             GPU indices per host of one job
//   ShowAllJobGres    scontrol show job -d                  the same for every job, one call
//   ListAccounted     sacct --json -X --allusers --starttime <local time>
//
// Each command runs through core/subprocess (argv, no shell) with a timeout and an output cap.
// The programs are found on the search path; the child inherits this process's environment
// unless Options::env replaces it, which is how SLURM_CONF reaches them.
//
// Thread safety: the methods keep no state and may be called concurrently.
#ifndef EXPANSE_SLURM_SLURM_CLIENT_H_
#define EXPANSE_SLURM_SLURM_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/subprocess.h"
#include "slurm/job_info.h"

namespace expanse::slurm {

struct SlurmClientOptions {
  // Names looked up in `search_path` (unset: this process's PATH), or paths.
  std::string squeue = "squeue";
  std::string scontrol = "scontrol";
  std::string sacct = "sacct";
  std::optional<std::string> search_path;
  // "NAME=value" entries replacing the children's environment (e.g. with SLURM_CONF); unset
  // inherits this process's.
  std::optional<std::vector<std::string>> env;
  // Per command. slurmctld answers in well under a second when healthy; it can stall for tens
  // of seconds when busy, and slurmdbd queries over a long window take longer still.
  std::chrono::milliseconds timeout{30000};
  // squeue prints ~3.5 KB of JSON per job (22.05), so 256 MiB covers ~70 000 jobs.
  size_t max_output_bytes = 256u << 20;
};

// Runs a program; RunSubprocess in production, a fake in tests.
using CommandRunner = std::function<Result<SubprocessResult>(const SubprocessOptions&)>;

class SlurmClient {
 public:
  explicit SlurmClient(SlurmClientOptions options, CommandRunner runner = RunSubprocess);

  // Errors shared by all methods:
  //   the program missing: kNotFound, reason "not_found" (from RunSubprocess);
  //   no answer in time: kDeadlineExceeded, reason "slurm_timeout";
  //   exit status not 0: kUnavailable, reason "slurm_command_failed", with the first line it
  //     printed ("squeue --json exited with status 1: \"slurm_load_jobs error: Unable to
  //     contact slurm controller (connect failure)\"");
  //   output over the cap: kResourceExhausted, reason "slurm_output_too_large";
  //   output that does not parse: kInvalidArgument, reason "slurm_output".
  Result<std::vector<JobInfo>> ListJobs() const;

  // `job_id` as JobInfo::job_id prints it ("123", "123_4", "123+1"); the id of an array or het
  // job gives all its tasks or components. kInvalidArgument for any other text (it is passed
  // as an argument, so it must not look like an option); kNotFound, reason "job_not_found",
  // when slurmctld no longer knows the job.
  Result<std::vector<JobGres>> ShowJobGres(std::string_view job_id) const;
  Result<std::vector<JobGres>> ShowAllJobGres() const;

  // Jobs that were eligible, running or ended since `since_unix_s`, from slurmdbd.
  // kFailedPrecondition, reason "accounting_disabled", when the cluster keeps no accounting:
  // the daemon then works from squeue alone.
  Result<std::vector<JobInfo>> ListAccounted(int64_t since_unix_s) const;

 private:
  // Runs `program` with `args`; the result when it ran to completion within the limits, whatever
  // its exit status.
  Result<SubprocessResult> Run(const std::string& program,
                               const std::vector<std::string>& args) const;

  SlurmClientOptions options_;
  CommandRunner runner_;
};

// "YYYY-MM-DDTHH:MM:SS" in this machine's local time zone, the form sacct's --starttime reads
// (SLURM's parse_time() takes no zone suffix and no epoch seconds).
std::string FormatSlurmLocalTime(int64_t unix_s);

// Whether `job_id` is an id ShowJobGres accepts: digits, optionally "_<digits>" or "+<digits>".
bool IsValidJobIdArgument(std::string_view job_id);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_SLURM_CLIENT_H_
