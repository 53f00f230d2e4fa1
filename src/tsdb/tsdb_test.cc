#include "tsdb/tsdb.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;

class TsdbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tsdb_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Tsdb> OpenDb(int64_t retention_ms = 0, std::string directory = "") {
    TsdbOptions options;
    options.directory = directory.empty() ? dir_ : directory;
    options.retention_ms = retention_ms;
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    Result<std::unique_ptr<Tsdb>> db = Tsdb::Open(options, clock_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  static SeriesKey Key(std::string metric, std::string device = "GPU-0") {
    return {"c1", "node01", std::move(device), std::move(metric)};
  }

  // One sample per second for `seconds`, value = f(i).
  static Batch Seconds(const SeriesKey& key, int64_t start, int seconds, double step = 1) {
    std::vector<Sample> samples;
    for (int i = 0; i < seconds; ++i)
      samples.push_back({start + i * 1000, i * step});
    return {{key, samples}};
  }

  static double SumOf(const std::vector<Tsdb::Bucket>& buckets) {
    double sum = 0;
    for (const auto& b : buckets)
      sum += b.mean * b.count;
    return sum;
  }
  static uint32_t CountOf(const std::vector<Tsdb::Bucket>& buckets) {
    uint32_t n = 0;
    for (const auto& b : buckets)
      n += b.count;
    return n;
  }

  std::string dir_;
  ManualClock clock_{kT0};
  std::vector<std::string> log_;
};

TEST_F(TsdbTest, RoundTripThroughFlushAndReopen) {
  {
    auto db = OpenDb();
    ASSERT_TRUE(db->Append("b1", Seconds(Key("power"), kT0, 3 * 3600)).ok());
    ASSERT_TRUE(db->Flush().ok());
    EXPECT_EQ(db->GetStats().chunks, 2u);  // 2-hour aligned windows
  }
  auto db = OpenDb();
  Result<std::vector<Tsdb::Bucket>> buckets = db->Query(Key("power"), kT0, kT0 + 3 * kHourMs, 3);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  ASSERT_EQ(buckets->size(), 3u);
  EXPECT_EQ(CountOf(*buckets), 3u * 3600);
  EXPECT_EQ((*buckets)[0].min, 0);
  EXPECT_EQ((*buckets)[2].last, 3 * 3600 - 1);
  EXPECT_EQ(db->GetStats().samples, 3u * 3600);
}

TEST_F(TsdbTest, ReplaysWalAfterCrashWithoutFlush) {
  {
    auto db = OpenDb();
    ASSERT_TRUE(db->Append("b1", Seconds(Key("util"), kT0, 100)).ok());
    ASSERT_TRUE(db->Append("b2", Seconds(Key("util"), kT0 + 100'000, 100)).ok());
  }  // no Flush: only the WAL holds the data
  auto db = OpenDb();
  auto buckets = db->Query(Key("util"), kT0, kT0 + 200'000, 1);
  ASSERT_TRUE(buckets.ok());
  EXPECT_EQ(CountOf(*buckets), 200u);
  EXPECT_TRUE(log_.empty());
}

// Group commit: appends from many threads share syncs; every acknowledged batch must be
// in the files at the moment of acknowledgement, also with flushes racing the syncs.
// The copy of the directory taken right after the last acknowledgement is what a crash
// at that instant would leave behind.
TEST_F(TsdbTest, ConcurrentAppendsAreAllDurableAtAcknowledgement) {
  constexpr int kThreads = 8, kBatches = 25, kSeconds = 10;
  const std::string crash_dir = dir_ + "-crash";
  {
    auto db = OpenDb();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&db, t] {
        for (int b = 0; b < kBatches; ++b) {
          const std::string id = "t" + std::to_string(t) + "-" + std::to_string(b);
          auto batch =
              Seconds(Key("util", "GPU-" + std::to_string(t)), kT0 + b * kSeconds * 1000, kSeconds);
          auto result = db->Append(id, batch);
          ASSERT_TRUE(result.ok()) << result.status();
          EXPECT_FALSE(result->duplicate);
          // A concurrent retry of the same batch is acknowledged as a duplicate.
          auto retry = db->Append(id, batch);
          ASSERT_TRUE(retry.ok() && retry->duplicate);
          if (t == 0 && b % 10 == 5) {
            ASSERT_TRUE(db->Flush().ok());
          }
        }
      });
    }
    for (auto& thread : threads)
      thread.join();
    std::filesystem::copy(dir_, crash_dir);
  }
  auto db = OpenDb(0, crash_dir);
  for (int t = 0; t < kThreads; ++t) {
    auto buckets = db->Query(Key("util", "GPU-" + std::to_string(t)), kT0,
                             kT0 + kBatches * kSeconds * 1000, 1);
    ASSERT_TRUE(buckets.ok());
    EXPECT_EQ(CountOf(*buckets), uint32_t{kBatches * kSeconds}) << "thread " << t;
  }
  EXPECT_EQ(db->GetStats().samples, uint64_t{kThreads * kBatches * kSeconds});
  db.reset();
  std::filesystem::remove_all(crash_dir);
}

TEST_F(TsdbTest, TornWalTailIsCutWithALogLine) {
  {
    auto db = OpenDb();
    ASSERT_TRUE(db->Append("b1", Seconds(Key("util"), kT0, 10)).ok());
    ASSERT_TRUE(db->Append("b2", Seconds(Key("util"), kT0 + 10'000, 10)).ok());
  }
  const std::string wal = dir_ + "/wal.log";
  std::filesystem::resize_file(wal, std::filesystem::file_size(wal) - 5);
  {
    auto db = OpenDb();
    ASSERT_EQ(log_.size(), 1u);
    EXPECT_THAT(log_[0], HasSubstr("torn or corrupt tail"));
    EXPECT_EQ(CountOf(*db->Query(Key("util"), kT0, kT0 + 100'000, 1)), 10u);
    // The cut batch was never acknowledged durably; its retry is stored.
    auto retry = db->Append("b2", Seconds(Key("util"), kT0 + 10'000, 10));
    ASSERT_TRUE(retry.ok());
    EXPECT_FALSE(retry->duplicate);
  }
  auto db = OpenDb();
  EXPECT_EQ(CountOf(*db->Query(Key("util"), kT0, kT0 + 100'000, 1)), 20u);
}

TEST_F(TsdbTest, DuplicateBatchIdIsAcknowledgedAcrossRestarts) {
  {
    auto db = OpenDb();
    ASSERT_FALSE(db->Append("b1", Seconds(Key("util"), kT0, 10))->duplicate);
    EXPECT_TRUE(db->Append("b1", Seconds(Key("util"), kT0, 10))->duplicate);
  }
  {
    auto db = OpenDb();  // from the WAL
    EXPECT_TRUE(db->Append("b1", Seconds(Key("util"), kT0, 10))->duplicate);
    ASSERT_TRUE(db->Flush().ok());
  }
  auto db = OpenDb();  // from the chunk store
  EXPECT_TRUE(db->Append("b1", Seconds(Key("util"), kT0, 10))->duplicate);
  EXPECT_EQ(db->GetStats().samples, 10u);
}

TEST_F(TsdbTest, QuerySpansSealedAndHeadChunks) {
  auto db = OpenDb();
  ASSERT_TRUE(db->Append("b1", Seconds(Key("mem"), kT0, 1000)).ok());
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_TRUE(db->Append("b2", Seconds(Key("mem"), kT0 + 1'000'000, 1000)).ok());
  auto buckets = db->Query(Key("mem"), kT0, kT0 + 2'000'000, 2);
  ASSERT_TRUE(buckets.ok());
  ASSERT_EQ(buckets->size(), 2u);
  EXPECT_EQ((*buckets)[0].count, 1000u);
  EXPECT_EQ((*buckets)[1].count, 1000u);
  EXPECT_EQ((*buckets)[1].start_ms, kT0 + 1'000'000);
}

TEST_F(TsdbTest, OutOfOrderSamplesWithinHeadAreSortedOlderOnesDropped) {
  auto db = OpenDb();
  ASSERT_TRUE(db->Append("b1", {{Key("t"), {{kT0 + 2000, 2}, {kT0, 0}, {kT0 + 1000, 1}}}}).ok());
  ASSERT_TRUE(db->Append("b2", {{Key("t"), {{kT0 + 1000, 5}}}}).ok());  // replaces
  auto buckets = db->Query(Key("t"), kT0, kT0 + 3000, 3);
  ASSERT_EQ(buckets->size(), 3u);
  EXPECT_EQ((*buckets)[1].last, 5);
  ASSERT_TRUE(db->Flush().ok());
  auto late = db->Append("b3", {{Key("t"), {{kT0 + 500, 9}, {kT0 + 5000, 9}}}});
  EXPECT_EQ(late->samples, 1u);
  EXPECT_EQ(db->GetStats().dropped_samples, 1u);
}

TEST_F(TsdbTest, DownsamplingMatchesBruteForceOnRandomData) {
  auto db = OpenDb();
  std::mt19937_64 rng(7);
  std::vector<Sample> all;
  int64_t t = kT0;
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<Sample> samples;
    for (int i = 0; i < 500; ++i) {
      t += 1 + static_cast<int64_t>(rng() % 5000);
      samples.push_back({t, static_cast<double>(rng() % 100000) / 100});
    }
    all.insert(all.end(), samples.begin(), samples.end());
    ASSERT_TRUE(db->Append("b" + std::to_string(batch), {{Key("p"), samples}}).ok());
    if (batch == 10) {
      ASSERT_TRUE(db->Flush().ok());
    }
  }
  const int64_t from = kT0 + 1'234'567;
  const int64_t to = t - 777'777;
  const int points = 97;
  auto buckets = db->Query(Key("p"), from, to, points);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  const auto width = static_cast<int64_t>((to - from + points - 1) / points);
  std::map<int64_t, std::vector<double>> expected;
  for (const Sample& s : all) {
    if (s.t_ms >= from && s.t_ms < to)
      expected[from + (s.t_ms - from) / width * width].push_back(s.v);
  }
  ASSERT_EQ(buckets->size(), expected.size());
  size_t i = 0;
  for (const auto& [start, values] : expected) {
    const Tsdb::Bucket& b = (*buckets)[i++];
    EXPECT_EQ(b.start_ms, start);
    EXPECT_EQ(b.count, values.size());
    EXPECT_EQ(b.min, *std::min_element(values.begin(), values.end()));
    EXPECT_EQ(b.max, *std::max_element(values.begin(), values.end()));
    EXPECT_EQ(b.last, values.back());
    double sum = 0;
    for (double v : values)
      sum += v;
    EXPECT_DOUBLE_EQ(b.mean, sum / values.size());
  }
}

TEST_F(TsdbTest, RetentionDropsOldChunks) {
  auto db = OpenDb(/*retention_ms=*/6 * kHourMs);
  ASSERT_TRUE(db->Append("old", Seconds(Key("u"), kT0, 60)).ok());
  ASSERT_TRUE(db->Append("new", Seconds(Key("u"), kT0 + 10 * kHourMs, 60)).ok());
  ASSERT_TRUE(db->Flush().ok());
  clock_.Set(kT0 + 12 * kHourMs);
  ASSERT_TRUE(db->ApplyRetention().ok());
  EXPECT_EQ(db->GetStats().chunks, 1u);
  EXPECT_EQ(CountOf(*db->Query(Key("u"), kT0, kT0 + 12 * kHourMs, 10)), 60u);
}

TEST_F(TsdbTest, ListSeriesFiltersByComputeAndHostPrefix) {
  auto db = OpenDb();
  Batch batch = {{{"c1", "node01", "GPU-0", "util"}, {{kT0, 1}}},
                 {{"c1", "node02", "", "load"}, {{kT0, 1}}},
                 {{"c2", "node01", "GPU-0", "util"}, {{kT0, 1}}}};
  ASSERT_TRUE(db->Append("b", batch).ok());
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 2u);
  auto node2 = db->ListSeries("c1", "node02");
  ASSERT_EQ(node2->size(), 1u);
  EXPECT_EQ((*node2)[0].metric, "load");
}

TEST_F(TsdbTest, RejectsBadInput) {
  auto db = OpenDb();
  EXPECT_EQ(db->Append("", {}).status().reason(), "bad_batch_id");
  EXPECT_EQ(db->Append("b", {{{"c1", "", "", "m"}, {}}}).status().reason(), "bad_series_key");
  EXPECT_EQ(db->Query(Key("x"), 10, 10, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(db->Query(Key("x"), 0, 10, 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace expanse::tsdb
