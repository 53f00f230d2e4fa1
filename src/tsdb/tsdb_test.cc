#include "tsdb/tsdb.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace tsdb_test {
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
    // 2-hour aligned windows: the first is sealed, the second stays open after Flush.
    EXPECT_EQ(db->GetStats().chunks, 1u);
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

// Acknowledged on receipt: the batch is stored at once, and the background sync makes it
// durable without anyone waiting for it; its mark then falls under the durable mark.
TEST_F(TsdbTest, ReceivedAppendsBecomeDurableInTheBackground) {
  auto db = OpenDb();
  uint64_t last_mark = 0;
  for (int b = 0; b < 20; ++b) {
    auto result = db->Append("r" + std::to_string(b), Seconds(Key("util"), kT0 + b * 10'000, 10),
                             Tsdb::Ack::kReceived);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_FALSE(result->duplicate);
    EXPECT_EQ(result->samples, 10u);
    EXPECT_GT(result->mark, last_mark);  // marks grow with every record
    EXPECT_EQ(result->durable, result->mark <= result->durable_mark);
    last_mark = result->mark;
  }
  // Nothing calls SyncAll or Flush: only the background sync can move the durable mark.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (db->durability().durable_mark < last_mark && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE(db->durability().durable_mark, last_mark);
  auto buckets = db->Query(Key("util"), kT0, kT0 + 200'000, 1);
  ASSERT_TRUE(buckets.ok());
  EXPECT_EQ(CountOf(*buckets), 200u);
}

TEST_F(TsdbTest, SyncAllCoversEveryReceivedBatchAndTheyReplay) {
  std::string first_epoch;
  {
    auto db = OpenDb();
    first_epoch = db->durability().epoch;
    EXPECT_EQ(first_epoch.size(), 16u);
    uint64_t last_mark = 0;
    for (int b = 0; b < 5; ++b) {
      auto result = db->Append("r" + std::to_string(b), Seconds(Key("util"), kT0 + b * 10'000, 10),
                               Tsdb::Ack::kReceived);
      ASSERT_TRUE(result.ok()) << result.status();
      last_mark = result->mark;
    }
    auto synced = db->SyncAll();
    ASSERT_TRUE(synced.ok()) << synced.status();
    EXPECT_EQ(synced->epoch, first_epoch);
    EXPECT_GE(synced->durable_mark, last_mark);
    // A retry on receipt of a batch already durable says so.
    auto retry = db->Append("r4", Seconds(Key("util"), kT0 + 40'000, 10), Tsdb::Ack::kReceived);
    ASSERT_TRUE(retry.ok());
    EXPECT_TRUE(retry->duplicate);
    EXPECT_TRUE(retry->durable);
    EXPECT_GE(retry->mark, last_mark);
  }  // no Flush: the WAL alone holds the batches
  auto db = OpenDb();
  // A new Open is a new epoch: marks from before mean nothing to it.
  EXPECT_NE(db->durability().epoch, first_epoch);
  EXPECT_EQ(db->durability().durable_mark, 0u);
  auto buckets = db->Query(Key("util"), kT0, kT0 + 50'000, 1);
  ASSERT_TRUE(buckets.ok());
  EXPECT_EQ(CountOf(*buckets), 50u);
  auto again = db->Append("r2", Seconds(Key("util"), kT0 + 20'000, 10), Tsdb::Ack::kReceived);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
}

TEST_F(TsdbTest, DurableAppendsReportTheirMarkAsDurable) {
  auto db = OpenDb();
  auto first = db->Append("d1", Seconds(Key("util"), kT0, 10));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->mark, 1u);
  EXPECT_TRUE(first->durable);
  EXPECT_GE(first->durable_mark, 1u);
  auto persisted = db->Append("d1", Seconds(Key("util"), kT0, 10), Tsdb::Ack::kReceived);
  ASSERT_TRUE(persisted.ok());
  EXPECT_TRUE(persisted->duplicate && persisted->durable);
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

// The WAL is kept zero-padded ahead of its last record while open; a crash leaves the
// padding behind, which is the log's clean end, not damage.
TEST_F(TsdbTest, WalPaddingLeftByACrashIsACleanEnd) {
  const std::string crash_dir = dir_ + "-crash";
  const std::string wal = dir_ + "/wal.log";
  {
    auto db = OpenDb();
    ASSERT_TRUE(db->Append("b1", Seconds(Key("util"), kT0, 10)).ok());
    ASSERT_TRUE(db->Append("b2", Seconds(Key("util"), kT0 + 10'000, 10)).ok());
    EXPECT_GE(std::filesystem::file_size(wal), kWalPreallocateBytes);
    std::filesystem::copy(dir_, crash_dir);
  }
  EXPECT_LT(std::filesystem::file_size(wal), 4096u);  // a clean close drops the padding
  {
    auto db = OpenDb(0, crash_dir);
    EXPECT_TRUE(log_.empty()) << log_[0];
    EXPECT_EQ(CountOf(*db->Query(Key("util"), kT0, kT0 + 100'000, 1)), 20u);
    ASSERT_TRUE(db->Append("b3", Seconds(Key("util"), kT0 + 20'000, 10)).ok());
  }
  // Garbage after the padding is damage all the same.
  {
    std::FILE* f = std::fopen((crash_dir + "/wal.log").c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fseek(f, 0, SEEK_END), 0);
    const long end = std::ftell(f);
    for (char c : std::string(64, '\0') + "x")
      std::fputc(c, f);
    std::fclose(f);
    EXPECT_GT(std::filesystem::file_size(crash_dir + "/wal.log"), static_cast<uintmax_t>(end));
  }
  auto db = OpenDb(0, crash_dir);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0], HasSubstr("torn or corrupt tail"));
  EXPECT_EQ(CountOf(*db->Query(Key("util"), kT0, kT0 + 100'000, 1)), 30u);
  db.reset();
  std::filesystem::remove_all(crash_dir);
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

// "<stream>/<sequence>" ids are stored as bits of their stream's windows, anything else as
// text; each must
// come back exactly, so a retry of either is recognised after a restart and none is
// mistaken for another ("x/7" is not "x/07"), and retention forgets both.
TEST_F(TsdbTest, BatchIdsOfEveryShapeSurviveRestartAndRetention) {
  const std::vector<std::string> ids = {"c1/telemetry/0",
                                        "c1/telemetry/7",
                                        "c1/telemetry/999999999999999999",
                                        "c1/jobs/7",
                                        "c1/x/07",
                                        "c1/x/-1",
                                        "c1/x/1e3",
                                        "/5",
                                        "plain",
                                        "c1/x/",
                                        "c1/x/9999999999999999999",
                                        "a/b/c/42"};
  {
    auto db = OpenDb();
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_FALSE(db->Append(ids[i], Seconds(Key("u"), kT0 + i * 1000, 1))->duplicate) << ids[i];
    }
    ASSERT_TRUE(db->Flush().ok());
  }
  {
    auto db = OpenDb();
    for (const std::string& id : ids)
      EXPECT_TRUE(db->Append(id, Seconds(Key("u"), kT0, 1))->duplicate) << id;
    for (const std::string id : {"c1/telemetry/8", "c1/x/7", "c1/jobs/07", "c1/telemetry/00"})
      EXPECT_FALSE(db->Append(id, Seconds(Key("v"), kT0, 1))->duplicate) << id;
    ASSERT_TRUE(db->Flush().ok());
    // Past the batch-id retention (7 days by default), every shape is forgotten.
    clock_.Set(kT0 + 8 * 24 * kHourMs);
    ASSERT_TRUE(db->ApplyRetention().ok());
  }
  auto db = OpenDb();
  for (const std::string& id : ids)
    EXPECT_FALSE(db->Append(id, Seconds(Key("w"), kT0 + 9 * 24 * kHourMs, 1))->duplicate) << id;
}

// Integer batch ids keep their receive time in whole seconds; after a restart an id must not
// be forgotten before the moment it would have been without one (here 999 ms later than a
// rounded-down time would say).
TEST_F(TsdbTest, BatchIdRetentionAfterRestartIsNeverEarlier) {
  clock_.Set(kT0 + 999);
  {
    auto db = OpenDb();
    ASSERT_FALSE(db->Append("c1/telemetry/1", Seconds(Key("u"), kT0, 1))->duplicate);
    ASSERT_TRUE(db->Flush().ok());
  }
  auto db = OpenDb();
  clock_.Set(kT0 + 500 + 7 * 24 * kHourMs);  // the cutoff falls inside the id's second
  ASSERT_TRUE(db->ApplyRetention().ok());
  EXPECT_TRUE(db->Append("c1/telemetry/1", Seconds(Key("u"), kT0, 1))->duplicate);
}

// A Flush either rewrites the whole heads table (most open chunks changed) or replaces the
// changed rows; either way every open chunk, changed or not, and every sealed one survives.
TEST_F(TsdbTest, OpenChunksSurviveFlushesThatRewriteOrPatchTheHeadsTable) {
  std::map<std::string, uint32_t> expected;
  int batch = 0;
  const auto append = [&](Tsdb& db, const std::vector<std::string>& metrics, int64_t start,
                          int seconds) {
    for (const std::string& m : metrics) {
      ASSERT_TRUE(db.Append("b" + std::to_string(++batch), Seconds(Key(m), start, seconds)).ok());
      expected[m] += seconds;
    }
  };
  const int64_t next_window = kT0 + 2 * kHourMs;
  auto db = OpenDb();
  append(*db, {"a", "b", "c"}, kT0, 10);  // all new: written whole
  ASSERT_TRUE(db->Flush().ok());
  append(*db, {"a", "b"}, kT0 + 10'000, 10);  // 2 of 3 changed: rewritten, c kept
  ASSERT_TRUE(db->Flush().ok());
  append(*db, {"a"}, kT0 + 20'000, 10);  // 1 of 3: a's row replaced
  ASSERT_TRUE(db->Flush().ok());
  append(*db, {"b"}, next_window, 5);  // b's chunk sealed, a new one opened
  ASSERT_TRUE(db->Flush().ok());
  append(*db, {"c"}, next_window, 5);  // c sealed too, while a and b stay: patched
  ASSERT_TRUE(db->Flush().ok());
  db.reset();
  db = OpenDb();
  for (const auto& [metric, count] : expected)
    EXPECT_EQ(CountOf(*db->Query(Key(metric), kT0, kT0 + 5 * kHourMs, 1)), count) << metric;
  EXPECT_EQ(db->GetStats().chunks, 2u);  // b's and c's first windows
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
  // Flush leaves the chunk open, so a late sample still lands in it...
  auto late = db->Append("b3", {{Key("t"), {{kT0 + 500, 9}, {kT0 + 5000, 9}}}});
  EXPECT_EQ(late->samples, 2u);
  EXPECT_EQ(db->GetStats().dropped_samples, 0u);
  // ...until a sample of the next window seals it; then older ones are dropped.
  ASSERT_TRUE(db->Append("b4", {{Key("t"), {{kT0 + 2 * kHourMs, 1}}}}).ok());
  auto sealed = db->Append("b5", {{Key("t"), {{kT0 + 600, 9}, {kT0 + 2 * kHourMs + 1000, 9}}}});
  EXPECT_EQ(sealed->samples, 1u);
  EXPECT_EQ(db->GetStats().dropped_samples, 1u);
  EXPECT_EQ(CountOf(*db->Query(Key("t"), kT0, kT0 + 3 * kHourMs, 1)), 7u);
}

// The service flushes every few minutes; chunks must still hold a whole window.
TEST_F(TsdbTest, FlushPersistsOpenChunksWithoutSealingThem) {
  // Aligned, so the window holds all 7,200 seconds.
  const int64_t t0 = kT0 / (2 * kHourMs) * (2 * kHourMs) + 2 * kHourMs;
  for (int part = 0; part < 4; ++part) {
    auto db = OpenDb();
    ASSERT_TRUE(
        db->Append("b" + std::to_string(part), Seconds(Key("u"), t0 + part * 300'000, 300)).ok());
    ASSERT_TRUE(db->Flush().ok());
    ASSERT_TRUE(db->Flush().ok());  // nothing new: writes nothing, loses nothing
    EXPECT_EQ(db->GetStats().chunks, 0u);
    EXPECT_EQ(db->GetStats().samples, (part + 1) * 300u);
  }
  auto db = OpenDb();
  EXPECT_EQ(CountOf(*db->Query(Key("u"), t0, t0 + kHourMs, 1)), 1200u);
  // A value rewritten after a Flush replaces the saved one.
  ASSERT_TRUE(db->Append("fix", {{Key("u"), {{t0 + 5000, 42}}}}).ok());
  auto fixed = db->Query(Key("u"), t0 + 5000, t0 + 6000, 1);
  ASSERT_EQ(fixed->size(), 1u);
  EXPECT_EQ((*fixed)[0].last, 42);
  EXPECT_EQ(CountOf(*db->Query(Key("u"), t0, t0 + kHourMs, 1)), 1200u);
  // The next window seals the open chunk whole: one chunk of 1,200 samples.
  ASSERT_TRUE(db->Append("next", Seconds(Key("u"), t0 + 2 * kHourMs, 10)).ok());
  ASSERT_TRUE(db->Flush().ok());
  EXPECT_EQ(db->GetStats().chunks, 1u);
  EXPECT_EQ(db->GetStats().samples, 1210u);
  db.reset();
  db = OpenDb();
  EXPECT_EQ(db->GetStats().chunks, 1u);
  EXPECT_EQ(CountOf(*db->Query(Key("u"), t0, t0 + 3 * kHourMs, 1)), 1210u);
  auto merged = db->Query(Key("u"), t0 + 5000, t0 + 6000, 1);
  EXPECT_EQ((*merged)[0].last, 42);
}

// A crash inside Flush leaves either the old chunk store with the whole WAL (before the
// commit) or the new chunk store with the old WAL (between commit and WAL reset). Both
// must reopen to exactly the acknowledged data, with retried batches recognised.
TEST_F(TsdbTest, CrashAtEachStepOfFlushLosesAndDuplicatesNothing) {
  const int64_t t0 = kT0 / (2 * kHourMs) * (2 * kHourMs) + 2 * kHourMs;
  const std::string before_commit = dir_ + "-before", after_commit = dir_ + "-after";
  {
    auto db = OpenDb();
    ASSERT_TRUE(db->Append("a", Seconds(Key("u"), t0, 600)).ok());
    ASSERT_TRUE(db->Append("b", Seconds(Key("p"), t0, 600)).ok());
    ASSERT_TRUE(db->Flush().ok());  // both open chunks saved
    // Since: more of the open chunk of u, a sealed chunk and a new open one for p.
    ASSERT_TRUE(db->Append("c", Seconds(Key("u"), t0 + 600'000, 600)).ok());
    ASSERT_TRUE(db->Append("d", Seconds(Key("p"), t0 + 2 * kHourMs, 100)).ok());
    std::filesystem::copy(dir_, before_commit);
    ASSERT_TRUE(db->Flush().ok());
  }
  // Between commit and WAL reset: the committed store with the WAL as it was.
  std::filesystem::copy(dir_, after_commit);
  std::filesystem::copy_file(before_commit + "/wal.log", after_commit + "/wal.log",
                             std::filesystem::copy_options::overwrite_existing);
  for (const std::string& dir : {before_commit, after_commit, dir_}) {
    SCOPED_TRACE(dir);
    {
      auto db = OpenDb(0, dir);
      EXPECT_EQ(CountOf(*db->Query(Key("u"), t0, t0 + 3 * kHourMs, 1)), 1200u);
      EXPECT_EQ(CountOf(*db->Query(Key("p"), t0, t0 + 3 * kHourMs, 1)), 700u);
      for (const char* id : {"a", "b", "c", "d"})
        EXPECT_TRUE(db->Append(id, Seconds(Key("x"), t0, 1))->duplicate) << id;
      ASSERT_TRUE(db->Flush().ok());
      EXPECT_EQ(db->GetStats().chunks, 1u);
      EXPECT_EQ(db->GetStats().samples, 1900u);
    }
    auto db = OpenDb(0, dir);  // and once more after a clean flush
    EXPECT_EQ(CountOf(*db->Query(Key("u"), t0, t0 + 3 * kHourMs, 1)), 1200u);
    EXPECT_EQ(CountOf(*db->Query(Key("p"), t0, t0 + 3 * kHourMs, 1)), 700u);
    EXPECT_EQ(db->GetStats().dropped_samples, 0u);
  }
  std::filesystem::remove_all(before_commit);
  std::filesystem::remove_all(after_commit);
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
    EXPECT_EQ(b.end_ms, std::min(start + width, to));
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

void ExpectSameBuckets(const std::vector<Tsdb::Bucket>& a, const std::vector<Tsdb::Bucket>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].start_ms, b[i].start_ms) << what << " bucket " << i;
    EXPECT_EQ(a[i].end_ms, b[i].end_ms) << what << " bucket " << i;
    // Bit for bit: the same samples, added in the same order.
    EXPECT_EQ(a[i].min, b[i].min) << what << " bucket " << i;
    EXPECT_EQ(a[i].max, b[i].max) << what << " bucket " << i;
    EXPECT_EQ(a[i].mean, b[i].mean) << what << " bucket " << i;
    EXPECT_EQ(a[i].last, b[i].last) << what << " bucket " << i;
    EXPECT_EQ(a[i].count, b[i].count) << what << " bucket " << i;
  }
}

// Random queries, overlapping and repeating on purpose, answered by QueryMany and by Query one
// at a time.
void ExpectQueryManyMatchesQuery(Tsdb& db, const std::vector<SeriesKey>& keys, int64_t end_ms,
                                 std::mt19937_64& random) {
  std::vector<SeriesQuery> queries;
  for (int i = 0; i < 300; ++i) {
    SeriesQuery q;
    q.key = keys[random() % keys.size()];
    if (i > 0 && random() % 4 == 0) {  // the same series again, around the last window
      q = queries.back();
      q.from_ms += static_cast<int64_t>(random() % 7'200'000) - 3'600'000;
    } else {
      q.from_ms = kT0 - 3'600'000 + static_cast<int64_t>(random() % (end_ms - kT0 + 7'200'000));
    }
    const int64_t lengths[] = {1, 60'000, 3'600'000, 7'200'000, 40 * 3'600'000};
    q.to_ms = q.from_ms + 1 + static_cast<int64_t>(random() % lengths[random() % 5]);
    q.points = random() % 3 == 0 ? 1 : 1 + static_cast<int>(random() % 150);
    queries.push_back(q);
  }
  const Result<std::vector<std::vector<Tsdb::Bucket>>> many = db.QueryMany(queries);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), queries.size());
  EXPECT_GT(std::count_if(many->begin(), many->end(), [](const auto& b) { return !b.empty(); }),
            100);
  for (size_t i = 0; i < queries.size(); ++i) {
    const SeriesQuery& q = queries[i];
    const Result<std::vector<Tsdb::Bucket>> one = db.Query(q.key, q.from_ms, q.to_ms, q.points);
    ASSERT_TRUE(one.ok()) << one.status();
    ExpectSameBuckets((*many)[i], *one,
                      q.key.host + "/" + q.key.metric + " [" + std::to_string(q.from_ms - kT0) +
                          ", " + std::to_string(q.to_ms - kT0) + ") points " +
                          std::to_string(q.points));
  }
}

// Samples in every place a query reads them from: sealed chunks in the chunk store and not yet
// flushed, open chunks saved by a flush, samples appended since (some out of order), and after
// a reopen; series that span gaps of hours, and one that was never written.
TEST_F(TsdbTest, QueryManyAnswersExactlyAsQueryOneByOne) {
  std::mt19937_64 random(20261202);
  std::vector<SeriesKey> keys;
  for (const char* host : {"node01", "node02", "node03"}) {
    for (const char* metric : {"gpu.sm_util", "gpu.mem_used_mib"})
      keys.push_back({"c1", host, "GPU-0", metric});
  }
  keys.push_back({"c1", "node09", "GPU-9", "never.written"});
  std::map<size_t, int64_t> last_ms;
  int64_t end_ms = kT0;
  auto db = OpenDb();
  for (int round = 0; round < 60; ++round) {
    Batch batch;
    for (size_t k = 0; k + 1 < keys.size(); ++k) {
      if (random() % 3 == 0)
        continue;
      int64_t t = last_ms.count(k) ? last_ms[k] : kT0;
      if (random() % 10 == 0)
        t += static_cast<int64_t>(random() % (5 * 3'600'000));  // a gap of hours
      std::vector<Sample> samples;
      const int n = 1 + static_cast<int>(random() % 400);
      for (int i = 0; i < n; ++i) {
        t += 1 + static_cast<int64_t>(random() % 60'000);
        samples.push_back({t, static_cast<double>(random() % 10'000) / 7.0});
      }
      if (random() % 4 == 0)  // out of order, still after anything sealed
        std::swap(samples.front(), samples.back());
      last_ms[k] = t;
      end_ms = std::max(end_ms, t);
      batch.Add(keys[k], samples);
    }
    ASSERT_TRUE(db->Append("b" + std::to_string(round), batch).ok());
    if (random() % 5 == 0) {
      ASSERT_TRUE(db->Flush().ok());
    }
    if (round % 15 == 14) {
      ExpectQueryManyMatchesQuery(*db, keys, end_ms, random);
    }
  }
  ASSERT_TRUE(db->Flush().ok());
  ExpectQueryManyMatchesQuery(*db, keys, end_ms, random);
  db.reset();
  db = OpenDb();
  ExpectQueryManyMatchesQuery(*db, keys, end_ms, random);
}

TEST_F(TsdbTest, QueryManyRefusesWhatQueryRefuses) {
  auto db = OpenDb();
  ASSERT_TRUE(db->Append("b", Seconds(Key("util"), kT0, 10)).ok());
  EXPECT_TRUE(db->QueryMany({}).value().empty());
  const Result<std::vector<std::vector<Tsdb::Bucket>>> bad =
      db->QueryMany({{Key("util"), kT0, kT0 + 10'000, 5}, {Key("util"), kT0, kT0, 5}});
  EXPECT_EQ(bad.status(), db->Query(Key("util"), kT0, kT0, 5).status());
  EXPECT_EQ(db->QueryMany({{Key("util"), kT0, kT0 + 1, 0}}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(TsdbTest, RetentionDropsOldChunks) {
  auto db = OpenDb(/*retention_ms=*/6 * kHourMs);
  ASSERT_TRUE(db->Append("old", Seconds(Key("u"), kT0, 60)).ok());
  ASSERT_TRUE(db->Append("new", Seconds(Key("u"), kT0 + 10 * kHourMs, 60)).ok());
  ASSERT_TRUE(db->Flush().ok());
  clock_.Set(kT0 + 12 * kHourMs);
  ASSERT_TRUE(db->ApplyRetention().ok());
  EXPECT_EQ(db->GetStats().chunks, 0u);  // the new samples are an open chunk
  EXPECT_EQ(CountOf(*db->Query(Key("u"), kT0, kT0 + 12 * kHourMs, 10)), 60u);
  // Open chunks past retention go too.
  clock_.Set(kT0 + 20 * kHourMs);
  ASSERT_TRUE(db->ApplyRetention().ok());
  EXPECT_EQ(CountOf(*db->Query(Key("u"), kT0, kT0 + 20 * kHourMs, 10)), 0u);
  db.reset();
  db = OpenDb(6 * kHourMs);
  EXPECT_EQ(db->GetStats().samples, 0u);
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
}  // namespace tsdb_test
}  // namespace expanse::tsdb
