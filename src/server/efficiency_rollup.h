// The idle ledger rolled up per user, account or partition over a window: the part of each
// job inside [from, to) (idle_ledger.h), summed per group, as typed records and as CSV.
// Definitions: docs/formats/idle-ledger.md.
#ifndef EXPANSE_SERVER_EFFICIENCY_ROLLUP_H_
#define EXPANSE_SERVER_EFFICIENCY_ROLLUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "server/idle_ledger.h"
#include "store/job_store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::server {

enum class LedgerGroupBy { kUser, kAccount, kPartition };

// "user", "account", "partition"; none for anything else.
std::optional<LedgerGroupBy> ParseLedgerGroupBy(std::string_view text);
std::string_view LedgerGroupByName(LedgerGroupBy group_by);

// Jobs a rollup reads at most: a bound on the work of one request (each job costs a read of
// its allocations and of a minute of gpu.sm_util per GPU per minute held).
inline constexpr int kDefaultRollupJobs = 2'000;
inline constexpr int kMaxRollupJobs = 10'000;

struct RollupOptions {
  std::vector<std::string> compute_ids;  // the computes the caller may see; not empty
  LedgerGroupBy group_by = LedgerGroupBy::kUser;
  LedgerWindow window;  // from_ms < to_ms
  int64_t now_ms = 0;
  int max_jobs = kDefaultRollupJobs;  // 1..kMaxRollupJobs
};

struct RollupGroup {
  std::string key;   // the user, account or partition; "" when the job record had none
  int64_t jobs = 0;  // jobs with GPU time (requested or allocated) inside the window
  LedgerTotals totals;
};

struct Rollup {
  // By idle GPU time, most first, then by key.
  std::vector<RollupGroup> groups;
  int64_t jobs = 0;
  LedgerTotals totals;
  // Jobs read: those whose SLURM run [start, end) overlaps the window, most recently started
  // first. truncated: there were more than max_jobs, and only the first max_jobs counted.
  int64_t jobs_scanned = 0;
  bool truncated = false;
};

// Reads the jobs a page of at most 1,000 at a time (allocations per compute, gpu.sm_util in
// bounded rounds), so memory stays bounded whatever the window.
Result<Rollup> RollUpLedgers(store::JobStore& jobs, tsdb::TelemetryStore& tsdb,
                             const RollupOptions& options);

// RFC 4180 CSV, CRLF line ends: a header row naming the group (user, account or partition),
// then one row per group. GPU-seconds with three decimals (exact milliseconds); idle_share
// with six, empty when nothing was allocated.
std::string RollupCsv(const Rollup& rollup, LedgerGroupBy group_by);

// One CSV field: as is, or in double quotes (quotes inside doubled) when it holds a comma, a
// double quote, CR or LF, or starts or ends with a blank.
std::string CsvField(std::string_view text);

// GPU-milliseconds as seconds with three decimals: 1234567 -> "1234.567".
std::string GpuSecondsText(int64_t ms);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_EFFICIENCY_ROLLUP_H_
