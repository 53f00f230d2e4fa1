// The idle ledger rolled up per user, account and partition: jobs clipped to the window, the
// bound on jobs read, and CSV that round-trips any name.
#include "server/efficiency_rollup.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "server/ledger_test_util.h"

namespace expanse::server {
namespace efficiency_rollup_test {
namespace {

using namespace ledger_testing;  // NOLINT(google-build-using-namespace): test constants

constexpr char kBob[] = "bob, \"the\" builder";

// RFC 4180 records, as a spreadsheet reads them: fields split at commas outside quotes, "" a
// quote inside quotes, records ended by CRLF.
std::vector<std::vector<std::string>> ParseCsv(std::string_view text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::string& field = rows.back().back();
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.emplace_back(1);
      ++i;
    } else {
      field += c;
    }
  }
  if (rows.back() == std::vector<std::string>(1))
    rows.pop_back();  // after the last CRLF
  return rows;
}

class EfficiencyRollupTest : public LedgerTest {
 protected:
  // Window [2, 12) min. Job 1 (ana, ml): GPU-A busy to 3 min, idle to 8 min, then unsampled;
  // GPU-B never used; held [0.5, 10.25) min. Job 2 (bob, "ml,vision"): GPU-C busy over
  // [5, 20) min. Job 3 (ana): CPU only. Job 4 (ana): after the window.
  void SetUp() override {
    LedgerTest::SetUp();
    const int64_t from = kM + 30 * kSecond;
    const int64_t to = kM + 10 * kMinute + 15 * kSecond;
    Job("1", from, to, 2);
    Allocate("1", "GPU-A", 0, from, to);
    Allocate("1", "GPU-B", 1, from, to);
    Utilisation("GPU-A", from, kM + 3 * kMinute, 50);
    Utilisation("GPU-A", kM + 3 * kMinute, kM + 8 * kMinute, 0);
    Utilisation("GPU-B", from, to, 0);
    store::JobRecord bob = Job("2", kM + 5 * kMinute, kM + 20 * kMinute, 1, kBob);
    bob.account = "ml,vision";
    bob.observed_ms = kM + 1;  // a later observation replaces the record
    ASSERT_TRUE(jobs().UpsertJobs({bob}).ok());
    Allocate("2", "GPU-C", 2, kM + 5 * kMinute, kM + 20 * kMinute, "w2");
    Utilisation("GPU-C", kM + 5 * kMinute, kM + 20 * kMinute, 70, "w2");
    Job("3", kM, kM + 10 * kMinute, 0);
    Job("4", kM + 60 * kMinute, kM + 70 * kMinute, 1);
    Allocate("4", "GPU-A", 0, kM + 60 * kMinute, kM + 70 * kMinute);
  }

  Rollup RollUp(LedgerGroupBy group_by, int max_jobs = kDefaultRollupJobs) {
    RollupOptions o;
    o.compute_ids = {kCompute};
    o.group_by = group_by;
    o.window = {kM + 2 * kMinute, kM + 12 * kMinute};
    o.now_ms = kM + 120 * kMinute;
    o.max_jobs = max_jobs;
    auto rollup = RollUpLedgers(jobs(), *tsdb_, o);
    EXPECT_TRUE(rollup.ok()) << rollup.status();
    return rollup.ok() ? *rollup : Rollup{};
  }
};

TEST_F(EfficiencyRollupTest, GroupsSumThePartOfEachJobInsideTheWindow) {
  const Rollup r = RollUp(LedgerGroupBy::kUser);
  EXPECT_EQ(r.jobs_scanned, 3);  // jobs 1, 2, 3 overlap the window; 3 has no GPU time
  EXPECT_FALSE(r.truncated);
  ASSERT_EQ(r.groups.size(), 2u);
  // Most idle first. ana: job 1 over [2, 10.25) min, 495 s on each of two GPUs.
  const RollupGroup& ana = r.groups[0];
  EXPECT_EQ(ana.key, "ana");
  EXPECT_EQ(ana.jobs, 1);
  EXPECT_EQ(ana.totals.gpus, 2);
  EXPECT_EQ(ana.totals.never_used_gpus, 1);
  EXPECT_EQ(ana.totals.requested_ms, 990'000);
  EXPECT_EQ(ana.totals.allocated_ms, 990'000);
  EXPECT_EQ(ana.totals.sampled_ms, 360'000 + 495'000);
  EXPECT_EQ(ana.totals.active_ms, 60'000);
  EXPECT_EQ(ana.totals.idle_ms(), 930'000);
  // bob: job 2 over [5, 12) min, busy throughout.
  const RollupGroup& bob = r.groups[1];
  EXPECT_EQ(bob.key, kBob);
  EXPECT_EQ(bob.jobs, 1);
  EXPECT_EQ(bob.totals.never_used_gpus, 0);
  EXPECT_EQ(bob.totals.allocated_ms, 420'000);
  EXPECT_EQ(bob.totals.active_ms, 420'000);
  EXPECT_EQ(bob.totals.idle_ms(), 0);
  EXPECT_EQ(r.jobs, 2);
  EXPECT_EQ(r.totals.gpus, 3);
  EXPECT_EQ(r.totals.allocated_ms, 1'410'000);
  EXPECT_EQ(r.totals.active_ms, 480'000);
  EXPECT_EQ(r.totals.requested_ms, 1'410'000);

  const Rollup by_account = RollUp(LedgerGroupBy::kAccount);
  ASSERT_EQ(by_account.groups.size(), 2u);
  EXPECT_EQ(by_account.groups[0].key, "ml");
  EXPECT_EQ(by_account.groups[1].key, "ml,vision");
  const Rollup by_partition = RollUp(LedgerGroupBy::kPartition);
  ASSERT_EQ(by_partition.groups.size(), 1u);
  EXPECT_EQ(by_partition.groups[0].key, "gpu");
  EXPECT_EQ(by_partition.groups[0].jobs, 2);
  EXPECT_EQ(by_partition.groups[0].totals.idle_ms(), 930'000);
}

TEST_F(EfficiencyRollupTest, ReadsAtMostTheBoundAndSaysSo) {
  // The most recently started first: job 2 alone.
  const Rollup r = RollUp(LedgerGroupBy::kUser, 1);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.jobs_scanned, 1);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].key, kBob);
  // Exactly as many jobs as the bound: nothing was cut.
  const Rollup all = RollUp(LedgerGroupBy::kUser, 3);
  EXPECT_FALSE(all.truncated);
  EXPECT_EQ(all.jobs_scanned, 3);
}

TEST_F(EfficiencyRollupTest, RefusesAnEmptyWindowOrBound) {
  RollupOptions o;
  o.compute_ids = {kCompute};
  o.window = {kM, kM};
  EXPECT_EQ(RollUpLedgers(jobs(), *tsdb_, o).status().code(), StatusCode::kInvalidArgument);
  o.window = {kM, kM + 1};
  o.max_jobs = 0;
  EXPECT_EQ(RollUpLedgers(jobs(), *tsdb_, o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EfficiencyRollupTest, CsvHasAHeaderAndExactFigures) {
  EXPECT_EQ(
      RollupCsv(RollUp(LedgerGroupBy::kUser), LedgerGroupBy::kUser),
      "user,jobs,gpus,never_used_gpus,requested_gpu_s,allocated_gpu_s,sampled_gpu_s,"
      "active_gpu_s,idle_gpu_s,idle_share\r\n"
      "ana,1,2,1,990.000,990.000,855.000,60.000,930.000,0.939394\r\n"
      "\"bob, \"\"the\"\" builder\",1,1,0,420.000,420.000,420.000,420.000,0.000,0.000000\r\n");
  EXPECT_EQ(RollupCsv(Rollup{}, LedgerGroupBy::kPartition),
            "partition,jobs,gpus,never_used_gpus,requested_gpu_s,allocated_gpu_s,sampled_gpu_s,"
            "active_gpu_s,idle_gpu_s,idle_share\r\n");
}

TEST(CsvTest, AnyNameRoundTrips) {
  Rollup rollup;
  const std::vector<std::string> names = {"plain", "a,b",           "say \"hi\"", "\"",
                                          "\"\"",  "line\r\nbreak", "lf\nonly",   " padded ",
                                          "",      "=1+2",          "ünïcödé"};
  for (const std::string& name : names) {
    rollup.groups.push_back({.key = name, .jobs = 1, .totals = {}});
  }
  const auto rows = ParseCsv(RollupCsv(rollup, LedgerGroupBy::kAccount));
  ASSERT_EQ(rows.size(), names.size() + 1);
  EXPECT_EQ(rows[0][0], "account");
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(rows[i + 1].size(), 10u) << names[i];
    EXPECT_EQ(rows[i + 1][0], names[i]);
    EXPECT_EQ(rows[i + 1][1], "1");
    EXPECT_EQ(rows[i + 1][9], "") << "idle share of nothing allocated";
  }
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
}

TEST(CsvTest, GpuSecondsAreExactMilliseconds) {
  EXPECT_EQ(GpuSecondsText(0), "0.000");
  EXPECT_EQ(GpuSecondsText(1), "0.001");
  EXPECT_EQ(GpuSecondsText(1'234'567), "1234.567");
  EXPECT_EQ(GpuSecondsText(std::numeric_limits<int64_t>::max()), "9223372036854775.807");
}

TEST(LedgerGroupByTest, NamesParseBack) {
  for (LedgerGroupBy g :
       {LedgerGroupBy::kUser, LedgerGroupBy::kAccount, LedgerGroupBy::kPartition}) {
    EXPECT_EQ(ParseLedgerGroupBy(LedgerGroupByName(g)), g);
  }
  EXPECT_EQ(ParseLedgerGroupBy("User"), std::nullopt);
  EXPECT_EQ(ParseLedgerGroupBy("node"), std::nullopt);
  EXPECT_EQ(ParseLedgerGroupBy(""), std::nullopt);
}

}  // namespace
}  // namespace efficiency_rollup_test
}  // namespace expanse::server
