#include "server/idle_ledger.h"

#include <algorithm>
#include <utility>

#include "server/job_usage.h"
#include "tsdb/downsample.h"

namespace expanse::server {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Times are never negative (the job store refuses them), so division rounds down.
int64_t FloorToCell(int64_t t) { return t / kLedgerBucketMs * kLedgerBucketMs; }
int64_t CeilToCell(int64_t t) {
  const int64_t floor = FloorToCell(t);
  return floor == t ? t : floor + kLedgerBucketMs;
}

struct Interval {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  bool empty() const { return to_ms <= from_ms; }
};

// [from, to) clipped to the window and to now; empty (to == from) when nothing is left.
Interval Clip(int64_t from_ms, int64_t to_ms, const LedgerWindow& window, int64_t now_ms) {
  Interval iv{std::max(from_ms, window.from_ms), std::min({to_ms, window.to_ms, now_ms})};
  if (iv.to_ms < iv.from_ms)
    iv.to_ms = iv.from_ms;
  return iv;
}

Interval CountedInterval(const store::JobRecord& job, const store::GpuAllocation& a,
                         const LedgerWindow& window, int64_t now_ms) {
  const int64_t end = a.to_ms != 0 ? a.to_ms : job.end_ms != 0 ? job.end_ms : now_ms;
  return Clip(a.from_ms, end, window, now_ms);
}

// The queries that read `iv` (not empty) cell by cell: a cut first cell and a cut last cell
// alone, the whole cells between in one query of one bucket per cell (several when there are
// more than the store answers at once). Each bucket of the answers is then exactly one cell's
// part inside `iv`, holding only that part's samples.
void AddCellQueries(const tsdb::SeriesKey& key, Interval iv,
                    std::vector<tsdb::SeriesQuery>& queries) {
  const int64_t first_whole = CeilToCell(iv.from_ms);
  const int64_t end_whole = FloorToCell(iv.to_ms);
  if (first_whole > end_whole) {  // inside one cell, touching neither of its bounds
    queries.push_back({key, iv.from_ms, iv.to_ms, 1});
    return;
  }
  if (iv.from_ms < first_whole)
    queries.push_back({key, iv.from_ms, first_whole, 1});
  for (int64_t start = first_whole; start < end_whole;) {
    const int64_t cells =
        std::min<int64_t>((end_whole - start) / kLedgerBucketMs, tsdb::kMaxQueryPoints);
    const int64_t end = start + cells * kLedgerBucketMs;
    queries.push_back({key, start, end, static_cast<int>(cells)});
    start = end;
  }
  if (end_whole < iv.to_ms)
    queries.push_back({key, end_whole, iv.to_ms, 1});
}

// A GPU whose activity is being read: where its ledger goes and which queries answer it.
struct PendingGpu {
  GpuLedger* ledger;
  size_t first_query;
  size_t end_query;
};

// Asks the store the queries of `pending` and folds the answers into their ledgers.
Status ReadRound(tsdb::TelemetryStore& tsdb, std::vector<tsdb::SeriesQuery>& queries,
                 std::vector<PendingGpu>& pending) {
  if (queries.empty())
    return OkStatus();
  EXPANSE_ASSIGN_OR_RETURN(const auto answers, tsdb.QueryMany(queries));
  for (const PendingGpu& gpu : pending) {
    for (size_t q = gpu.first_query; q < gpu.end_query; ++q) {
      for (const tsdb::Bucket& b : answers[q]) {
        const int64_t part = b.end_ms - b.start_ms;
        gpu.ledger->sampled_ms += part;
        // A NaN peak compares false: not active.
        if (b.max > kActiveSmPercent)
          gpu.ledger->active_ms += part;
      }
    }
  }
  queries.clear();
  pending.clear();
  return OkStatus();
}

}  // namespace

void LedgerTotals::Add(const LedgerTotals& other) {
  gpus += other.gpus;
  never_used_gpus += other.never_used_gpus;
  requested_ms = SaturatingAdd(requested_ms, other.requested_ms);
  allocated_ms += other.allocated_ms;
  sampled_ms += other.sampled_ms;
  active_ms += other.active_ms;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? kMax : sum;
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? kMax : product;
}

Result<std::vector<JobLedger>> ComputeJobLedgers(tsdb::TelemetryStore& tsdb,
                                                 const std::vector<LedgerJobInput>& jobs,
                                                 const LedgerWindow& window, int64_t now_ms,
                                                 size_t max_cells_per_read) {
  // Sized once: `pending` points into the ledgers.
  std::vector<JobLedger> ledgers(jobs.size());
  std::vector<tsdb::SeriesQuery> queries;
  std::vector<PendingGpu> pending;
  size_t cells = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const store::JobRecord& job = jobs[j].job;
    JobLedger& ledger = ledgers[j];
    ledger.requested_gpus = job.req_gpus;
    if (job.start_ms != 0) {
      const Interval run =
          Clip(job.start_ms, job.end_ms != 0 ? job.end_ms : now_ms, window, now_ms);
      ledger.totals.requested_ms = SaturatingMul(job.req_gpus, run.to_ms - run.from_ms);
    }
    ledger.gpus.reserve(jobs[j].allocations.size());
    for (const store::GpuAllocation& a : jobs[j].allocations) {
      // An earlier run's GPUs (a requeued job) are not this job record's: usage, verdicts and
      // the timeline leave them out too. One a crashed node never closed would otherwise
      // count as idle up to this run's end.
      if (!OfCurrentRun(job, a))
        continue;
      const Interval iv = CountedInterval(job, a, window, now_ms);
      ledger.gpus.push_back({.host = a.host,
                             .gpu_uuid = a.gpu_uuid,
                             .gpu_index = a.gpu_index,
                             .from_ms = a.from_ms,
                             .to_ms = a.to_ms,
                             .counted_from_ms = iv.from_ms,
                             .counted_to_ms = iv.to_ms,
                             .allocated_ms = iv.to_ms - iv.from_ms});
      if (iv.empty())
        continue;
      // Cells this GPU's answers may hold: its whole cells and two cut ones.
      const auto gpu_cells = static_cast<size_t>((iv.to_ms - iv.from_ms) / kLedgerBucketMs) + 2;
      if (!pending.empty() && cells + gpu_cells > max_cells_per_read) {
        EXPANSE_RETURN_IF_ERROR(ReadRound(tsdb, queries, pending));
        cells = 0;
      }
      const size_t first = queries.size();
      AddCellQueries({job.compute_id, a.host, a.gpu_uuid, "gpu.sm_util"}, iv, queries);
      pending.push_back({&ledger.gpus.back(), first, queries.size()});
      cells += gpu_cells;
    }
  }
  EXPANSE_RETURN_IF_ERROR(ReadRound(tsdb, queries, pending));
  for (JobLedger& ledger : ledgers) {
    for (const GpuLedger& gpu : ledger.gpus) {
      if (gpu.allocated_ms <= 0)
        continue;
      ++ledger.totals.gpus;
      if (gpu.never_used())
        ++ledger.totals.never_used_gpus;
      ledger.totals.allocated_ms += gpu.allocated_ms;
      ledger.totals.sampled_ms += gpu.sampled_ms;
      ledger.totals.active_ms += gpu.active_ms;
    }
  }
  return ledgers;
}

}  // namespace expanse::server
