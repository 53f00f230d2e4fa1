// The telemetry store under hostile senders: the per-compute series limit, series that are
// forgotten once retention leaves them empty, and the files' modes whatever the umask.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tsdb/tsdb.h"

namespace expanse::tsdb {
namespace tsdb_limits_test {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;

class TsdbLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tsdb_limits_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Tsdb> OpenDb(size_t max_series, int64_t retention_ms = 0) {
    TsdbOptions options;
    options.directory = dir_ + "/tsdb";
    options.retention_ms = retention_ms;
    options.max_series_per_compute = max_series;
    options.log = [](std::string_view) {};
    Result<std::unique_ptr<Tsdb>> db = Tsdb::Open(options, clock_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  // `count` series of compute `compute` (metrics m<first>..), one sample each at `t_ms`.
  static Batch NewSeries(const std::string& compute, int first, int count, int64_t t_ms) {
    Batch batch;
    for (int i = first; i < first + count; ++i)
      batch.Add(SeriesKey{compute, "node01", "GPU-0", "m" + std::to_string(i)}, {{{t_ms, 1.0}}});
    return batch;
  }

  std::string dir_;
  ManualClock clock_{kT0};
};

TEST_F(TsdbLimitsTest, BatchPastTheSeriesLimitIsRefusedWholeAndStoresNothing) {
  auto db = OpenDb(/*max_series=*/10);
  ASSERT_TRUE(db->Append("a", NewSeries("c1", 0, 8, kT0)).ok());
  // 8 held + 3 new > 10: refused, although two of them would fit.
  Result<Tsdb::AppendResult> refused = db->Append("b", NewSeries("c1", 8, 3, kT0));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().reason(), "series_limit");
  EXPECT_THAT(refused.status().message(),
              HasSubstr("the batch adds 3 new series to a compute that has 8; at most 10"));
  EXPECT_EQ(db->CheckSeriesLimit(NewSeries("c1", 8, 3, kT0)).reason(), "series_limit");
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 8u);
  EXPECT_EQ(db->GetStats().refused_batches, 1u);
  // Nothing of it reached the WAL either: it is not there after a restart, and the same id
  // is not a duplicate.
  db.reset();
  db = OpenDb(10);
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 8u);
  // Repeated keys count once; known series never count; other computes have their own limit.
  Batch fits = NewSeries("c1", 8, 2, kT0 + 1000);
  fits.Add(fits.front().key, fits.front().samples);
  const Batch known = NewSeries("c1", 0, 8, kT0 + 1000);
  for (const auto& [key, samples] : known)
    fits.Add(key, samples);
  Result<Tsdb::AppendResult> ok = db->Append("b", fits);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE(ok->duplicate);
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 10u);
  EXPECT_TRUE(db->Append("c", NewSeries("c2", 0, 10, kT0)).ok());
  EXPECT_EQ(db->Append("d", NewSeries("c1", 10, 1, kT0)).status().reason(), "series_limit");
}

TEST_F(TsdbLimitsTest, SeriesEmptiedByRetentionAreForgottenAndNoLongerCount) {
  auto db = OpenDb(/*max_series=*/4, /*retention_ms=*/6 * kHourMs);
  ASSERT_TRUE(db->Append("old", NewSeries("c1", 0, 3, kT0)).ok());
  ASSERT_TRUE(db->Append("new", NewSeries("c1", 3, 1, kT0 + 5 * kHourMs)).ok());
  ASSERT_TRUE(db->Flush().ok());
  EXPECT_EQ(db->Append("more", NewSeries("c1", 4, 2, kT0)).status().reason(), "series_limit");
  // m0..m2 were last written at kT0: past retention at kT0 + 7 h, while m3 still has data.
  clock_.Set(kT0 + 7 * kHourMs);
  ASSERT_TRUE(db->ApplyRetention().ok());
  std::vector<SeriesKey> left = *db->ListSeries("c1", "");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].metric, "m3");
  EXPECT_EQ(db->GetStats().series, 1u);
  // Gone from disk too: a restart does not load them again.
  db.reset();
  db = OpenDb(4, 6 * kHourMs);
  EXPECT_EQ(db->GetStats().series, 1u);
  // Their room is free again, and a forgotten series written anew starts afresh.
  ASSERT_TRUE(db->Append("more", NewSeries("c1", 0, 3, kT0 + 7 * kHourMs)).ok());
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 4u);
  std::vector<Tsdb::Bucket> buckets =
      *db->Query({"c1", "node01", "GPU-0", "m0"}, kT0, kT0 + 8 * kHourMs, 1);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].count, 1u);
}

TEST_F(TsdbLimitsTest, WithoutRetentionNoSeriesIsForgotten) {
  auto db = OpenDb(/*max_series=*/10, /*retention_ms=*/0);
  ASSERT_TRUE(db->Append("a", NewSeries("c1", 0, 3, kT0)).ok());
  ASSERT_TRUE(db->Flush().ok());
  clock_.Set(kT0 + 1000 * kHourMs);
  ASSERT_TRUE(db->ApplyRetention().ok());
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 3u);
}

TEST_F(TsdbLimitsTest, RejectsAZeroSeriesLimit) {
  TsdbOptions options;
  options.directory = dir_ + "/tsdb";
  options.max_series_per_compute = 0;
  EXPECT_EQ(Tsdb::Open(options, clock_).status().code(), StatusCode::kInvalidArgument);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST_F(TsdbLimitsTest, FilesAreOwnerOnlyWhateverTheUmask) {
  const mode_t old_umask = ::umask(022);
  auto db = OpenDb(10);
  ASSERT_TRUE(db->Append("a", NewSeries("c1", 0, 3, kT0)).ok());
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_TRUE(db->Append("b", NewSeries("c1", 0, 3, kT0 + 1000)).ok());
  const std::string dir = dir_ + "/tsdb";
  EXPECT_EQ(ModeOf(dir), 0700u);
  for (const char* name : {"chunks.sqlite", "chunks.sqlite-wal", "chunks.sqlite-shm", "wal.log"})
    EXPECT_EQ(ModeOf(dir + "/" + name), 0600u) << name;
  db.reset();
  // Files an older build left readable are tightened on open.
  ASSERT_EQ(::chmod((dir + "/chunks.sqlite").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  db = OpenDb(10);
  EXPECT_EQ(ModeOf(dir + "/chunks.sqlite"), 0600u);
  EXPECT_EQ(ModeOf(dir), 0700u);
  ::umask(old_umask);
}

}  // namespace
}  // namespace tsdb_limits_test
}  // namespace expanse::tsdb
