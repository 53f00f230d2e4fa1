// The idle ledger of single jobs: exact GPU-milliseconds per GPU and in total, cut cells at the
// allocation's ends, open allocations, windows, and reads split into rounds and queries.
#include "server/idle_ledger.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/ledger_test_util.h"

namespace expanse::server {
namespace idle_ledger_test {
namespace {

using namespace ledger_testing;  // NOLINT(google-build-using-namespace): test constants

struct Figures {
  int64_t allocated_ms, sampled_ms, active_ms, idle_ms;
  bool never_used;
};

void ExpectGpu(const GpuLedger& g, const Figures& want, const std::string& what) {
  EXPECT_EQ(g.allocated_ms, want.allocated_ms) << what;
  EXPECT_EQ(g.sampled_ms, want.sampled_ms) << what;
  EXPECT_EQ(g.active_ms, want.active_ms) << what;
  EXPECT_EQ(g.idle_ms(), want.idle_ms) << what;
  EXPECT_EQ(g.never_used(), want.never_used) << what;
}

void ExpectSameTotals(const LedgerTotals& a, const LedgerTotals& b, const std::string& what) {
  EXPECT_EQ(a.gpus, b.gpus) << what;
  EXPECT_EQ(a.never_used_gpus, b.never_used_gpus) << what;
  EXPECT_EQ(a.requested_ms, b.requested_ms) << what;
  EXPECT_EQ(a.allocated_ms, b.allocated_ms) << what;
  EXPECT_EQ(a.sampled_ms, b.sampled_ms) << what;
  EXPECT_EQ(a.active_ms, b.active_ms) << what;
}

class IdleLedgerTest : public LedgerTest {
 protected:
  // Job 1: 2 GPUs held over [kM + 30 s, kM + 10 min 15 s) (585 s), both cut cells at the ends.
  // GPU-A is busy for its first 150 s, idle until 8 min, then unsampled; a busy sample at the
  // allocation's end is outside it. GPU-B reads 0 throughout; its busy samples just before the
  // allocation (the previous job's, in the same cell) are outside it.
  store::JobRecord TwoGpuJob() {
    const int64_t from = kM + 30 * kSecond;
    const int64_t to = kM + 10 * kMinute + 15 * kSecond;
    store::JobRecord job = Job("1", from, to, 2);
    Allocate("1", "GPU-A", 0, from, to);
    Allocate("1", "GPU-B", 1, from, to);
    Utilisation("GPU-A", from, kM + 3 * kMinute, 50);
    Utilisation("GPU-A", kM + 3 * kMinute, kM + 8 * kMinute, 0);
    Utilisation("GPU-A", to, to + kSecond, 90);
    Utilisation("GPU-B", kM + 10 * kSecond, from, 90);
    Utilisation("GPU-B", from, to, 0);
    return job;
  }
};

TEST_F(IdleLedgerTest, OneGpuBusyForAWhileAndOneNeverUsed) {
  const store::JobRecord job = TwoGpuJob();
  for (const size_t cells_per_read : {size_t{250'000}, size_t{1}}) {
    const std::string what = "cells per read " + std::to_string(cells_per_read);
    const JobLedger ledger = LedgerOf(job, {}, kM + 60 * kMinute, cells_per_read);
    EXPECT_EQ(ledger.requested_gpus, 2) << what;
    ASSERT_EQ(ledger.gpus.size(), 2u) << what;
    const GpuLedger& a = ledger.gpus[0];
    EXPECT_EQ(a.gpu_uuid, "GPU-A");
    EXPECT_EQ(a.counted_from_ms, kM + 30 * kSecond);
    EXPECT_EQ(a.counted_to_ms, kM + 10 * kMinute + 15 * kSecond);
    // Active: the cut first cell (30 s) and cells 1 and 2. Sampled: those and cells 3..7.
    ExpectGpu(a, {585'000, 450'000, 150'000, 435'000, false}, what + ", GPU-A");
    ExpectGpu(ledger.gpus[1], {585'000, 585'000, 0, 585'000, true}, what + ", GPU-B");
    const LedgerTotals& t = ledger.totals;
    EXPECT_EQ(t.gpus, 2) << what;
    EXPECT_EQ(t.never_used_gpus, 1) << what;
    EXPECT_EQ(t.requested_ms, 1'170'000) << what;
    EXPECT_EQ(t.allocated_ms, 1'170'000) << what;
    EXPECT_EQ(t.sampled_ms, 1'035'000) << what;
    EXPECT_EQ(t.active_ms, 150'000) << what;
    EXPECT_EQ(t.idle_ms(), 1'020'000) << what;
  }
}

TEST_F(IdleLedgerTest, GpuWithoutSamplesIsIdleWhole) {
  const store::JobRecord job = Job("2", kM, kM + 2 * kMinute, 1);
  Allocate("2", "GPU-C", 0, kM, kM + 2 * kMinute);
  const JobLedger ledger = LedgerOf(job, {}, kM + 60 * kMinute);
  ASSERT_EQ(ledger.gpus.size(), 1u);
  ExpectGpu(ledger.gpus[0], {120'000, 0, 0, 120'000, true}, "GPU-C");
  EXPECT_EQ(ledger.totals.never_used_gpus, 1);
}

TEST_F(IdleLedgerTest, OpenAllocationsEndAtTheJobsEndOrNow) {
  // Running: counted to now, not to the samples already stored past it.
  const store::JobRecord running = Job("3", kM, 0, 1);
  Allocate("3", "GPU-D", 0, kM, 0);
  Utilisation("GPU-D", kM, kM + 10 * kMinute, 80);
  const int64_t now = kM + 5 * kMinute + 20 * kSecond;
  JobLedger ledger = LedgerOf(running, {}, now);
  ASSERT_EQ(ledger.gpus.size(), 1u);
  EXPECT_EQ(ledger.gpus[0].to_ms, 0);
  EXPECT_EQ(ledger.gpus[0].counted_to_ms, now);
  ExpectGpu(ledger.gpus[0], {320'000, 320'000, 320'000, 0, false}, "running");
  EXPECT_EQ(ledger.totals.requested_ms, 320'000);

  // Ended, but its Epilog never reported: the allocation ends with the job.
  const store::JobRecord ended = Job("4", kM, kM + 2 * kMinute, 1);
  Allocate("4", "GPU-E", 0, kM, 0);
  ledger = LedgerOf(ended, {}, now);
  ASSERT_EQ(ledger.gpus.size(), 1u);
  EXPECT_EQ(ledger.gpus[0].counted_to_ms, kM + 2 * kMinute);
  EXPECT_EQ(ledger.gpus[0].allocated_ms, 120'000);

  // An Epilog after SLURM's end: allocated until the Epilog, requested until the end.
  const store::JobRecord late = Job("5", kM, kM + 2 * kMinute, 1);
  Allocate("5", "GPU-F", 0, kM, kM + 2 * kMinute + 30 * kSecond);
  ledger = LedgerOf(late, {}, now);
  EXPECT_EQ(ledger.totals.allocated_ms, 150'000);
  EXPECT_EQ(ledger.totals.requested_ms, 120'000);
}

// A requeued job's record is its latest run: the GPUs of its earlier run (one a crashed node
// never closed, one closed before this run) are left out, as usage and verdicts leave them.
TEST_F(IdleLedgerTest, AnEarlierRunsGpusAreNotCounted) {
  const int64_t start = kM + 2 * 60 * kMinute;
  const store::JobRecord job = Job("6", start, start + 10 * kMinute, 1);
  Allocate("6", "GPU-OLD-OPEN", 0, kM, 0);                    // crashed node, never closed
  Allocate("6", "GPU-OLD-CLOSED", 1, kM, kM + 30 * kMinute);  // ended before this run
  Allocate("6", "GPU-NOW", 0, start, start + 10 * kMinute);
  Utilisation("GPU-NOW", start, start + 10 * kMinute, 80);
  const JobLedger ledger = LedgerOf(job, {}, start + 20 * kMinute);
  ASSERT_EQ(ledger.gpus.size(), 1u);
  EXPECT_EQ(ledger.gpus[0].gpu_uuid, "GPU-NOW");
  EXPECT_EQ(ledger.totals.allocated_ms, 600'000);
  EXPECT_EQ(ledger.totals.requested_ms, 600'000);
}

TEST_F(IdleLedgerTest, WindowCountsOnlyThePartInside) {
  const store::JobRecord job = TwoGpuJob();
  const int64_t now = kM + 60 * kMinute;
  JobLedger ledger = LedgerOf(job, {kM + 2 * kMinute, kM + 5 * kMinute}, now);
  ASSERT_EQ(ledger.gpus.size(), 2u);
  EXPECT_EQ(ledger.gpus[0].counted_from_ms, kM + 2 * kMinute);
  EXPECT_EQ(ledger.gpus[0].counted_to_ms, kM + 5 * kMinute);
  ExpectGpu(ledger.gpus[0], {180'000, 180'000, 60'000, 120'000, false}, "GPU-A in [2, 5) min");
  ExpectGpu(ledger.gpus[1], {180'000, 180'000, 0, 180'000, true}, "GPU-B in [2, 5) min");
  EXPECT_EQ(ledger.totals.requested_ms, 360'000);

  // A bound inside a cell cuts it: of cell 2, only [2.5, 3) min is counted.
  ledger = LedgerOf(job, {kM + 2 * kMinute + 30 * kSecond, kM + 4 * kMinute}, now);
  ExpectGpu(ledger.gpus[0], {90'000, 90'000, 30'000, 60'000, false}, "GPU-A in [2.5, 4) min");

  // Nothing of the job inside: listed, nothing counted.
  ledger = LedgerOf(job, {kM + 20 * kMinute, kM + 30 * kMinute}, now);
  ASSERT_EQ(ledger.gpus.size(), 2u);
  EXPECT_EQ(ledger.gpus[0].allocated_ms, 0);
  EXPECT_FALSE(ledger.gpus[0].never_used());
  EXPECT_EQ(ledger.totals.gpus, 0);
  EXPECT_EQ(ledger.totals.requested_ms, 0);

  // Windows bounded on the grid add up to the whole ledger.
  LedgerTotals sum;
  const int64_t cuts[] = {0, kM + 2 * kMinute, kM + 5 * kMinute,
                          std::numeric_limits<int64_t>::max()};
  for (int i = 0; i < 3; ++i) {
    LedgerTotals part = LedgerOf(job, {cuts[i], cuts[i + 1]}, now).totals;
    part.gpus = part.never_used_gpus = 0;  // counts, not durations: they do not add up
    sum.Add(part);
  }
  LedgerTotals whole = LedgerOf(job, {}, now).totals;
  whole.gpus = whole.never_used_gpus = 0;
  ExpectSameTotals(sum, whole, "three windows against the whole");
}

TEST_F(IdleLedgerTest, AllocationsLongerThanOneQueryAreReadInPieces) {
  // 70 days (100,800 cells; one query takes at most 100,000) from 15 s past a minute, with a
  // busy 5 s at the start of each day. Day 0's is before the allocation; day 70's falls in the
  // cut last cell, so counts 15 s.
  constexpr int64_t kDay = 24 * 60 * kMinute;
  const int64_t from = kM + 15 * kSecond;
  const int64_t to = from + 70 * kDay;
  const store::JobRecord job = Job("6", from, to, 1);
  Allocate("6", "GPU-L", 0, from, to);
  std::vector<tsdb::Sample> samples;
  for (int64_t day = 0; day <= 70; ++day) {
    for (int64_t s = 0; s < 5; ++s)
      samples.push_back({kM + day * kDay + s * kSecond, 60});
  }
  ASSERT_TRUE(tsdb_->Append("long", {{{kCompute, "w1", "GPU-L", "gpu.sm_util"}, samples}}).ok());
  const JobLedger ledger = LedgerOf(job, {}, to + kDay);
  ASSERT_EQ(ledger.gpus.size(), 1u);
  ExpectGpu(ledger.gpus[0],
            {70 * kDay, 69 * kMinute + 15'000, 69 * kMinute + 15'000,
             70 * kDay - 69 * kMinute - 15'000, false},
            "GPU-L");
}

TEST_F(IdleLedgerTest, RequestedGpuTimeSaturates) {
  const store::JobRecord job = Job("7", kM, kM + kMinute, std::numeric_limits<int64_t>::max());
  const JobLedger ledger = LedgerOf(job, {}, kM + 60 * kMinute);
  EXPECT_EQ(ledger.totals.requested_ms, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ledger.totals.gpus, 0);
  LedgerTotals sum = ledger.totals;
  sum.Add(ledger.totals);
  EXPECT_EQ(sum.requested_ms, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(SaturatingAdd(2, 3), 5);
  EXPECT_EQ(SaturatingMul(4, 5), 20);
}

}  // namespace
}  // namespace idle_ledger_test
}  // namespace expanse::server
