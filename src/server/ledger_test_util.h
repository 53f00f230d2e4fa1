// Test-only: the fixture of the idle ledger's unit tests (idle_ledger_test.cc,
// efficiency_rollup_test.cc). A real SQLite job store in memory and a real telemetry store in a
// temporary directory, with one compute, and helpers that write jobs, allocations and
// per-second gpu.sm_util samples.
#ifndef EXPANSE_SERVER_LEDGER_TEST_UTIL_H_
#define EXPANSE_SERVER_LEDGER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/clock.h"
#include "core/test_temp_dir.h"
#include "server/idle_ledger.h"
#include "store/sqlite_store.h"
#include "store/store.h"
#include "tsdb/tsdb.h"

namespace expanse::server::ledger_testing {

inline constexpr int64_t kSecond = 1'000;
inline constexpr int64_t kMinute = 60 * kSecond;
// A minute boundary (28,333,334 minutes after the epoch), so cells are easy to name: cell k
// is [kM + k minutes, kM + (k + 1) minutes).
inline constexpr int64_t kM = 1'700'000'040'000;
static_assert(kM % kLedgerBucketMs == 0);
inline constexpr char kCompute[] = "cmp_a";

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::OpenSqliteStore({.path = ":memory:"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    auto org = store_->CreateOrganization("acme", "Acme", kM);
    ASSERT_TRUE(org.ok()) << org.status();
    store::Compute compute;
    compute.id = kCompute;
    compute.org_id = org->id;
    compute.name = kCompute;
    compute.type = "slurm";
    ASSERT_TRUE(store_->CreateCompute(compute).ok());
    auto tsdb = tsdb::Tsdb::Open({.directory = dir_.path() + "/tsdb"}, clock_);
    ASSERT_TRUE(tsdb.ok()) << tsdb.status();
    tsdb_ = std::move(tsdb).value();
  }

  store::JobStore& jobs() { return store_->Jobs(); }

  store::JobRecord Job(const std::string& id, int64_t start_ms, int64_t end_ms, int64_t gpus,
                       const std::string& user = "ana") {
    store::JobRecord job;
    job.compute_id = kCompute;
    job.job_id = id;
    job.user = user;
    job.account = "ml";
    job.partition = "gpu";
    job.state = end_ms == 0 ? "RUNNING" : "COMPLETED";
    job.submit_ms = start_ms;
    job.start_ms = start_ms;
    job.end_ms = end_ms;
    job.req_gpus = gpus;
    job.observed_ms = kM;
    EXPECT_TRUE(jobs().UpsertJobs({job}).ok());
    return job;
  }

  void Allocate(const std::string& job_id, const std::string& uuid, int64_t index, int64_t from_ms,
                int64_t to_ms, const std::string& host = "w1") {
    store::GpuAllocation a{.compute_id = kCompute,
                           .job_id = job_id,
                           .host = host,
                           .gpu_uuid = uuid,
                           .gpu_index = index,
                           .gpu_minor = index,
                           .from_ms = from_ms,
                           .to_ms = to_ms};
    EXPECT_TRUE(jobs().PutGpuAllocations({a}).ok());
  }

  // gpu.sm_util of `uuid` once a second over [from_ms, to_ms), all `value`.
  void Utilisation(const std::string& uuid, int64_t from_ms, int64_t to_ms, double value,
                   const std::string& host = "w1") {
    std::vector<tsdb::Sample> samples;
    for (int64_t t = from_ms; t < to_ms; t += kSecond)
      samples.push_back({t, value});
    const tsdb::Batch batch{{{kCompute, host, uuid, "gpu.sm_util"}, samples}};
    auto appended = tsdb_->Append("b" + std::to_string(++batches_), batch);
    EXPECT_TRUE(appended.ok()) << appended.status();
  }

  std::vector<store::GpuAllocation> AllocationsOf(const std::string& job_id) {
    auto allocations = jobs().GpuAllocations(kCompute, job_id);
    EXPECT_TRUE(allocations.ok()) << allocations.status();
    return allocations.ok() ? *allocations : std::vector<store::GpuAllocation>{};
  }

  JobLedger LedgerOf(const store::JobRecord& job, LedgerWindow window, int64_t now_ms,
                     size_t max_cells_per_read = 250'000) {
    const std::vector<store::GpuAllocation> allocations = AllocationsOf(job.job_id);
    auto ledgers =
        ComputeJobLedgers(*tsdb_, {{job, allocations}}, window, now_ms, max_cells_per_read);
    EXPECT_TRUE(ledgers.ok()) << ledgers.status();
    return ledgers.ok() && ledgers->size() == 1 ? ledgers->front() : JobLedger{};
  }

  testing::TempDir dir_;
  ManualClock clock_{kM};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<tsdb::Tsdb> tsdb_;
  int batches_ = 0;
};

}  // namespace expanse::server::ledger_testing

#endif  // EXPANSE_SERVER_LEDGER_TEST_UTIL_H_
