// SqliteStore as a JobStore: Python stacks per job, host and window, and the migration that added
// them.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/migrations.h"
#include "store/sqlite_connection.h"
#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_stacks_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kMinute = 60'000;

// A one-minute window of job 7 on gpu01 starting `minutes` after kNow.
StackSample Stack(const std::string& folded, int64_t count, int64_t minutes = 0,
                  const std::string& host = "gpu01", const std::string& thread_state = "gil",
                  bool gpu_idle = false) {
  StackSample sample;
  sample.compute_id = "cmp_a";
  sample.job_id = "7";
  sample.host = host;
  sample.window_start_ms = kNow + minutes * kMinute;
  sample.window_end_ms = sample.window_start_ms + kMinute;
  sample.folded = folded;
  sample.thread_state = thread_state;
  sample.count = count;
  sample.gpu_idle = gpu_idle;
  return sample;
}

class StacksTest : public store_testing::SqliteStoreTest {
 protected:
  void SetUp() override {
    SqliteStoreTest::SetUp();
    MakeCompute("cmp_a");
  }

  JobStore& jobs() { return store().Jobs(); }

  void Put(const std::vector<StackSample>& stacks) {
    const Status status = jobs().PutStacks(stacks);
    ASSERT_TRUE(status.ok()) << status;
  }

  // "folded/thread_state=count(idle)" of each total, in the order returned.
  std::vector<std::string> Totals(int64_t from_ms = 0, int64_t to_ms = 0, int limit = 100) {
    const Result<std::vector<StackTotal>> totals =
        jobs().JobStacks("cmp_a", "7", from_ms, to_ms, limit);
    EXPECT_TRUE(totals.ok()) << totals.status();
    std::vector<std::string> described;
    for (const StackTotal& total : totals.ok() ? *totals : std::vector<StackTotal>{}) {
      described.push_back(total.folded + "/" + total.thread_state + "=" +
                          std::to_string(total.count) + "(" + std::to_string(total.gpu_idle_count) +
                          ")");
    }
    return described;
  }
};
INSTANTIATE_TEST_SUITE_P(Backings, StacksTest, kBackings, BackingName);

TEST_P(StacksTest, ReplayingABatchStoresItOnce) {
  const std::vector<StackSample> batch = {Stack("a.py:main:1;a.py:step:9", 30),
                                          Stack("a.py:main:1;a.py:load:4", 10)};
  Put(batch);
  Put(batch);
  EXPECT_THAT(Totals(), ElementsAre("a.py:main:1;a.py:step:9/gil=30(0)",
                                    "a.py:main:1;a.py:load:4/gil=10(0)"));
}

TEST_P(StacksTest, ARepeatedWindowReplacesItsCountNeverAdds) {
  Put({Stack("a.py:main:1", 30)});
  Put({Stack("a.py:main:1", 12)});
  EXPECT_THAT(Totals(), ElementsAre("a.py:main:1/gil=12(0)"));
  // Within one batch, too, the last report of a window wins.
  Put({Stack("a.py:main:1", 5), Stack("a.py:main:1", 8)});
  EXPECT_THAT(Totals(), ElementsAre("a.py:main:1/gil=8(0)"));
}

TEST_P(StacksTest, SumsAcrossHostsAndWindows) {
  Put({Stack("a.py:main:1", 10, 0, "gpu01"), Stack("a.py:main:1", 20, 0, "gpu02"),
       Stack("a.py:main:1", 5, 1, "gpu01"), Stack("a.py:main:1", 7, 1, "gpu01", "gil", true),
       Stack("a.py:main:1", 3, 1, "gpu01", "idle")});
  // gpu_idle is part of the key but summed into one total; thread_state stays apart.
  EXPECT_THAT(Totals(), ElementsAre("a.py:main:1/gil=42(7)", "a.py:main:1/idle=3(0)"));
}

TEST_P(StacksTest, WindowsOverlappingTheRangeCountWhole) {
  Put({Stack("a.py:w0:1", 1, 0), Stack("a.py:w1:1", 2, 1), Stack("a.py:w2:1", 4, 2)});
  EXPECT_THAT(Totals(kNow + kMinute, kNow + 2 * kMinute), ElementsAre("a.py:w1:1/gil=2(0)"));
  // A range that cuts a window includes it.
  EXPECT_THAT(Totals(kNow + kMinute / 2, kNow + kMinute + 1),
              ElementsAre("a.py:w1:1/gil=2(0)", "a.py:w0:1/gil=1(0)"));
  EXPECT_THAT(Totals(kNow + 2 * kMinute), ElementsAre("a.py:w2:1/gil=4(0)"));
  EXPECT_THAT(Totals(0, kNow + kMinute), ElementsAre("a.py:w0:1/gil=1(0)"));
  EXPECT_THAT(Totals(kNow + 3 * kMinute), IsEmpty());
  EXPECT_THAT(Totals(0, kNow), IsEmpty());
}

// Retention deletes whole windows that ended before the cut, oldest first, at most `limit`
// a call; windows ending at or after it stay, and so does every other job's newer stack.
TEST_P(StacksTest, RetentionDeletesTheOldestWindowsInBatches) {
  Put({Stack("a.py:w0:1", 1, 0), Stack("a.py:w1:1", 2, 1), Stack("a.py:w1:2", 3, 1),
       Stack("a.py:w2:1", 4, 2), Stack("a.py:w3:1", 8, 3)});
  // w0 ends at kNow + 1 min, w1 at + 2 min, w2 at + 3 min: the cut at + 3 min keeps w2 and w3.
  const int64_t cut = kNow + 3 * kMinute;
  Result<int64_t> deleted = jobs().ExpireStacks(cut, 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  EXPECT_EQ(Totals().size(), 3u) << "w0 and one of w1's two stacks";
  EXPECT_THAT(Totals(0, kNow + kMinute), IsEmpty()) << "the oldest window went first";
  deleted = jobs().ExpireStacks(cut, 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_THAT(Totals(), ElementsAre("a.py:w3:1/gil=8(0)", "a.py:w2:1/gil=4(0)"));
  deleted = jobs().ExpireStacks(cut, 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 0);
  for (const int bad : {0, -1, kMaxExpireStacksLimit + 1})
    EXPECT_EQ(jobs().ExpireStacks(cut, bad).status().code(), StatusCode::kInvalidArgument) << bad;
}

TEST_P(StacksTest, TopNByCountThenByStack) {
  Put({Stack("c.py:f:1", 5), Stack("b.py:f:1", 5), Stack("a.py:f:1", 1), Stack("d.py:f:1", 9)});
  EXPECT_THAT(Totals(0, 0, 3),
              ElementsAre("d.py:f:1/gil=9(0)", "b.py:f:1/gil=5(0)", "c.py:f:1/gil=5(0)"));
  EXPECT_THAT(Totals(0, 0, 1), ElementsAre("d.py:f:1/gil=9(0)"));
}

TEST_P(StacksTest, OtherJobsAndComputesAreApart) {
  MakeCompute("cmp_b");
  StackSample other_job = Stack("a.py:main:1", 3);
  other_job.job_id = "8";
  StackSample other_compute = Stack("a.py:main:1", 4);
  other_compute.compute_id = "cmp_b";
  Put({Stack("a.py:main:1", 2), other_job, other_compute});
  EXPECT_THAT(Totals(), ElementsAre("a.py:main:1/gil=2(0)"));
  EXPECT_THAT(*jobs().JobStacks("cmp_a", "9", 0, 0, 10), IsEmpty());
}

TEST_P(StacksTest, BadInputStoresNothing) {
  StackSample bad = Stack("a.py:main:1", 0);
  EXPECT_EQ(jobs().PutStacks({Stack("a.py:ok:1", 1), bad}),
            InvalidArgumentError("stacks[1]: count is 0; it must be 1 to 1000000000"));
  bad = Stack("a.py:main:1", 1);
  bad.window_end_ms = bad.window_start_ms;
  EXPECT_EQ(jobs().PutStacks({bad}),
            InvalidArgumentError("stacks[0]: window_end_ms (2023-11-14T22:13:20.000Z) must be "
                                 "after window_start_ms (2023-11-14T22:13:20.000Z)"));
  bad = Stack("a.py:main:1", 1, 0, "gpu01", "sleeping");
  EXPECT_EQ(jobs().PutStacks({bad}),
            InvalidArgumentError("stacks[0]: thread_state \"sleeping\" is not \"gil\", "
                                 "\"running\", \"idle\" or \"\" (unknown)"));
  EXPECT_EQ(jobs().PutStacks({Stack("", 1)}), InvalidArgumentError("stacks[0]: folded is empty"));
  EXPECT_EQ(jobs().PutStacks({Stack(std::string(kMaxFoldedStackBytes + 1, 'x'), 1)}),
            InvalidArgumentError("stacks[0]: folded is 16385 bytes; at most 16384 are allowed"));
  EXPECT_EQ(jobs().PutStacks({Stack("a.py:\xff:1", 1)}),
            InvalidArgumentError("stacks[0]: folded is not valid UTF-8"));
  EXPECT_EQ(jobs().PutStacks({Stack("a.py:main:1\n", 1)}),
            InvalidArgumentError("stacks[0]: folded contains a control character"));
  EXPECT_EQ(jobs().PutStacks({Stack("a.py:main:1;;b.py:f:2", 1)}),
            InvalidArgumentError("stacks[0]: folded has an empty frame: "
                                 "\"a.py:main:1;;b.py:f:2\""));
  EXPECT_EQ(jobs().PutStacks({Stack("a.py:main:1", 1, 0, "")}),
            InvalidArgumentError("stacks[0]: host is empty"));
  bad = Stack("a.py:main:1", 1);
  bad.window_start_ms = 0;
  EXPECT_EQ(jobs().PutStacks({bad}),
            InvalidArgumentError("stacks[0]: window_start_ms is 0; it must be positive"));
  // Exactly the limit is fine on its own, but the batch above with it was refused whole.
  EXPECT_THAT(Totals(), IsEmpty());
  Put({Stack(std::string(kMaxFoldedStackBytes, 'x'), kMaxStackSampleCount)});
  EXPECT_EQ(Totals().size(), 1u);
}

// A deep stack of distinct frames near the size limit does not compress the way a run of one
// letter does; it is stored, and replaced by a redelivery, like any other (an index entry of
// PostgreSQL holds at most about 2.7 kB, so the stack itself cannot be in a unique key there).
TEST_P(StacksTest, ALongStackThatDoesNotCompressIsStoredAndMerged) {
  std::string folded;
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (int frame = 0; folded.size() < kMaxFoldedStackBytes - 64; ++frame) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    folded += (frame ? ";" : "") + std::string("m") + std::to_string(state) + ".py:f" +
              std::to_string(state >> 7) + ":" + std::to_string(frame);
  }
  ASSERT_LE(folded.size(), kMaxFoldedStackBytes);
  Put({Stack(folded, 2), Stack(folded + "x", 1)});
  Put({Stack(folded, 3)});  // the same window again: it replaces the first
  EXPECT_THAT(Totals(), ElementsAre(folded + "/gil=3(0)", folded + "x/gil=1(0)"));
}

TEST_P(StacksTest, UnknownComputeIsNotFound) {
  StackSample sample = Stack("a.py:main:1", 1);
  sample.compute_id = "cmp_zz";
  EXPECT_EQ(jobs().PutStacks({Stack("a.py:ok:1", 1), sample}),
            NotFoundError("compute cmp_zz not found"));
  EXPECT_THAT(Totals(), IsEmpty());
  EXPECT_EQ(jobs().JobStacks("cmp_zz", "7", 0, 0, 10).status(),
            NotFoundError("compute cmp_zz not found"));
}

TEST_P(StacksTest, QueryArgumentsAreChecked) {
  EXPECT_EQ(jobs().JobStacks("cmp_a", "7", 0, 0, 0).status(),
            InvalidArgumentError("job stacks: limit is 0; it must be between 1 and 10000"));
  EXPECT_EQ(jobs().JobStacks("cmp_a", "7", 0, 0, kMaxJobStacksLimit + 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().JobStacks("cmp_a", "7", kNow, kNow, 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().JobStacks("cmp_a", "", 0, 0, 10).status(),
            InvalidArgumentError("job stacks: job_id is empty"));
}

TEST_P(StacksTest, SqlMetacharactersInFramesAreStoredVerbatim) {
  // kOddText holds control characters, which a folded stack may not; the rest is kept.
  std::string odd;
  for (const char c : kOddText) {
    if (static_cast<unsigned char>(c) >= 0x20) {
      odd += c;
    }
  }
  const std::string folded = "x.py:f:1;" + odd + ";y.py:%_*:2";
  StackSample sample = Stack(folded, 3);
  sample.job_id = "7'; DELETE FROM job_stacks;--";
  Put({sample, Stack("a.py:main:1", 1)});
  const Result<std::vector<StackTotal>> totals = jobs().JobStacks("cmp_a", sample.job_id, 0, 0, 10);
  ASSERT_TRUE(totals.ok()) << totals.status();
  ASSERT_EQ(totals->size(), 1u);
  EXPECT_EQ((*totals)[0].folded, folded);
  EXPECT_EQ((*totals)[0].count, 3);
  EXPECT_THAT(Totals(), ElementsAre("a.py:main:1/gil=1(0)"));
}

// A read stops once the folded text it returns passes `max_folded_bytes`, counted in bytes (not
// characters): the stack that passes it is the last returned, so a caller sees it was passed.
// Without it, a read of kMaxJobStacksLimit stacks could take 160 MiB whatever the caller needed.
TEST_P(StacksTest, AByteBudgetEndsTheReadAfterTheStackThatPassesIt) {
  std::vector<StackSample> samples;
  std::string pad;
  for (int i = 0; i < 500; ++i)
    pad += "\u00e9";  // two bytes each
  for (int i = 0; i < 5; ++i)
    samples.push_back(Stack("m" + std::to_string(i) + ".py:" + pad + ":1", 10 - i));
  Put(samples);
  const size_t bytes = samples[0].folded.size();
  ASSERT_EQ(bytes, 1'008u);
  auto Counts = [&](size_t max_bytes) {
    const Result<std::vector<StackTotal>> totals =
        jobs().JobStacks("cmp_a", "7", 0, 0, 100, max_bytes);
    EXPECT_TRUE(totals.ok()) << totals.status();
    std::vector<int64_t> counts;
    for (const StackTotal& t : totals.ok() ? *totals : std::vector<StackTotal>{})
      counts.push_back(t.count);
    return counts;
  };
  EXPECT_THAT(Counts(2 * bytes + 1), ElementsAre(10, 9, 8));
  EXPECT_THAT(Counts(2 * bytes), ElementsAre(10, 9, 8));
  EXPECT_THAT(Counts(2 * bytes - 1), ElementsAre(10, 9));
  EXPECT_THAT(Counts(0), ElementsAre(10));
  EXPECT_THAT(Counts(5 * bytes), ElementsAre(10, 9, 8, 7, 6));
  // The limit still applies within the budget; the default budget holds them all.
  const Result<std::vector<StackTotal>> two = jobs().JobStacks("cmp_a", "7", 0, 0, 2, 1u << 20);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->size(), 2u);
  EXPECT_EQ(Totals().size(), 5u);
}

// A database written by a server that knew schema version 2.
TEST(StacksMigrationTest, VersionTwoDatabaseIsMigratedKeepingItsData) {
  const store_testing::TempDir dir;
  const std::string path = dir.path() + "/store.db";
  {
    Result<sqlite_internal::SqliteConnection> db =
        sqlite_internal::SqliteConnection::Open(path, 5000);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(db->ExecuteScript(sqlite_internal::Migrations()[0].sql).ok());
    ASSERT_TRUE(db->ExecuteScript(sqlite_internal::Migrations()[1].sql).ok());
    ASSERT_TRUE(db->ExecuteScript(
                      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                      "applied_at_ms INTEGER NOT NULL) STRICT; "
                      "INSERT INTO schema_migrations VALUES (1, 1), (2, 2); "
                      "INSERT INTO organizations (slug, name, created_at_ms) "
                      "VALUES ('acme', 'Acme', 5); "
                      "INSERT INTO computes (id, org_id, name, type, state, created_at_ms, "
                      "created_by_user, pinned_daemon_version, control_plane_url, data_plane_url) "
                      "VALUES ('cmp_a', 1, 'old', 'slurm', 'active', 5, 0, '0.1.0', 'c', 'd'); "
                      "INSERT INTO job_node_events (compute_id, job_id, host, kind, at_ms) "
                      "VALUES ('cmp_a', '7', 'gpu01', 'start', 9)")
                    .ok());
  }
  SqliteStoreOptions options;
  options.path = path;
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const Result<std::vector<JobNodeEvent>> events = (*store)->Jobs().NodeEvents("cmp_a", "7");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].at_ms, 9);
  ASSERT_TRUE((*store)->Jobs().PutStacks({Stack("a.py:main:1", 4)}).ok());
  const Result<std::vector<StackTotal>> totals = (*store)->Jobs().JobStacks("cmp_a", "7", 0, 0, 5);
  ASSERT_TRUE(totals.ok()) << totals.status();
  ASSERT_EQ(totals->size(), 1u);
  EXPECT_EQ((*totals)[0].count, 4);
}

}  // namespace
}  // namespace sqlite_store_stacks_test
}  // namespace expanse::store
