// The store when its files fail it: a chunk store that refuses flushes (a SQLite trigger), and a
// WAL damaged in the middle or in its magic. No acknowledged batch may be lost that can be kept,
// and a failing flush must not be retried at every append.
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/bytes.h"
#include "tsdb/tsdb.h"

namespace expanse::tsdb {
namespace tsdb_failure_test {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;
// The start of an aligned two-hour chunk window.
constexpr int64_t kWindow = kT0 / (2 * kHourMs) * (2 * kHourMs) + 2 * kHourMs;

class TsdbFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tsdb_failure_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Tsdb> OpenDb(uint64_t wal_flush_bytes = 64u << 20) {
    TsdbOptions options;
    options.directory = dir_;
    options.wal_flush_bytes = wal_flush_bytes;
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    Result<std::unique_ptr<Tsdb>> db = Tsdb::Open(options, clock_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  // Runs `sql` on the chunk store's file beside the open store; returns the first column of the
  // first row, if any.
  std::string Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir_ + "/chunks.sqlite").c_str(), &db), SQLITE_OK);
    std::string first;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    if (stmt && sqlite3_step(stmt) == SQLITE_ROW)
      first = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return first;
  }

  static SeriesKey Key(std::string metric) { return {"c1", "node01", "GPU-0", std::move(metric)}; }

  static Batch Seconds(const SeriesKey& key, int64_t start, int seconds) {
    std::vector<Sample> samples;
    for (int i = 0; i < seconds; ++i)
      samples.push_back({start + i * 1000, double(i)});
    return {{key, samples}};
  }

  static uint32_t Count(Tsdb& db, const SeriesKey& key) {
    Result<std::vector<Tsdb::Bucket>> buckets = db.Query(key, kT0, kT0 + 100 * kHourMs, 1);
    EXPECT_TRUE(buckets.ok()) << buckets.status();
    uint32_t n = 0;
    for (const auto& b : buckets.ok() ? *buckets : std::vector<Tsdb::Bucket>{})
      n += b.count;
    return n;
  }

  size_t LogLinesWith(std::string_view text) const {
    size_t n = 0;
    for (const std::string& line : log_)
      n += line.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

  std::string dir_;
  ManualClock clock_{kT0};
  std::vector<std::string> log_;
};

// Past wal_flush_bytes every append would flush; while the chunk store refuses the flush, the
// sealed chunks stay in memory and Append retries the flush only every kAutoFlushRetryMs.
TEST_F(TsdbFailureTest, AFailingAutomaticFlushKeepsItsChunksAndBacksOff) {
  auto db = OpenDb(/*wal_flush_bytes=*/1);
  ASSERT_NE(db, nullptr);
  Sql("CREATE TRIGGER refuse BEFORE INSERT ON batch_ids "
      "BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
  constexpr int kSeries = 10;
  for (int i = 0; i < kSeries; ++i) {
    // Across a window boundary: each series seals a chunk of 30 samples and opens another.
    const std::string id = "b" + std::to_string(i);
    ASSERT_TRUE(db->Append(id, Seconds(Key("m" + std::to_string(i)), kWindow - 30'000, 60)).ok());
  }
  EXPECT_EQ(db->GetStats().failed_flushes, 1u);
  EXPECT_EQ(db->GetStats().chunks, uint64_t{kSeries});
  EXPECT_EQ(db->GetStats().samples, uint64_t{kSeries} * 60);
  EXPECT_EQ(LogLinesWith("automatic flush failed"), 1u);
  EXPECT_THAT(log_[0], HasSubstr("refused by test"));

  clock_.Advance(kAutoFlushRetryMs);
  ASSERT_TRUE(db->Append("later", Seconds(Key("m0"), kWindow + 60'000, 10)).ok());
  EXPECT_EQ(db->GetStats().failed_flushes, 2u);
  EXPECT_EQ(LogLinesWith("automatic flush failed"), 1u);  // once per streak
  EXPECT_EQ(db->GetStats().chunks, uint64_t{kSeries});

  Sql("DROP TRIGGER refuse");
  ASSERT_TRUE(db->Append("held", Seconds(Key("m1"), kWindow + 60'000, 10)).ok());
  EXPECT_EQ(Sql("SELECT count(*) FROM chunks"), "0");  // not yet retried
  clock_.Advance(kAutoFlushRetryMs);
  ASSERT_TRUE(db->Append("retried", Seconds(Key("m2"), kWindow + 60'000, 10)).ok());
  EXPECT_EQ(Sql("SELECT count(*) FROM chunks"), std::to_string(kSeries));
  EXPECT_EQ(db->GetStats().failed_flushes, 2u);
  EXPECT_EQ(LogLinesWith("flush succeeded after 2 failed"), 1u);

  db.reset();
  db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->GetStats().chunks, uint64_t{kSeries});
  for (int i = 0; i < kSeries; ++i)
    EXPECT_EQ(Count(*db, Key("m" + std::to_string(i))), i < 3 ? 70u : 60u) << i;
  for (const char* id : {"b0", "b9", "later", "held", "retried"})
    EXPECT_TRUE(db->Append(id, Seconds(Key("x"), kWindow, 1))->duplicate) << id;
}

// The offset of the payload of WAL record `index` (from 0) in `contents`.
size_t PayloadOffset(const std::string& contents, int index) {
  size_t at = sizeof kWalMagic;
  for (int i = 0; i < index; ++i) {
    bytes::ByteReader in(std::string_view(contents).substr(at));
    at += kWalRecordHeaderSize + in.U32();
  }
  return at + kWalRecordHeaderSize;
}

std::string ReadFile(const std::string& path) {
  std::string contents(std::filesystem::file_size(path), '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(std::fread(contents.data(), 1, contents.size(), f), contents.size());
  std::fclose(f);
  return contents;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(contents.data(), 1, contents.size(), f), contents.size());
  std::fclose(f);
}

// A damaged record with acknowledged records after it costs that record only.
TEST_F(TsdbFailureTest, ADamagedWalRecordIsSkippedAndTheRestReplayed) {
  {
    auto db = OpenDb();
    for (const char* id : {"b1", "b2", "b3"})
      ASSERT_TRUE(db->Append(id, Seconds(Key(id), kWindow, 10)).ok());
  }
  const std::string wal = dir_ + "/wal.log";
  std::string contents = ReadFile(wal);
  contents[PayloadOffset(contents, 1) + 5] ^= 0x10;
  WriteFile(wal, contents);
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    ASSERT_EQ(log_.size(), 1u);
    EXPECT_THAT(log_[0], HasSubstr("skipped a damaged record"));
    EXPECT_EQ(db->GetStats().damaged_wal_records, 1u);
    EXPECT_EQ(Count(*db, Key("b1")), 10u);
    EXPECT_EQ(Count(*db, Key("b2")), 0u);
    EXPECT_EQ(Count(*db, Key("b3")), 10u);
    // Its batch is not remembered: the sender's retry is stored.
    auto retry = db->Append("b2", Seconds(Key("b2"), kWindow, 10));
    ASSERT_TRUE(retry.ok());
    EXPECT_FALSE(retry->duplicate);
    ASSERT_TRUE(db->Flush().ok());
  }
  log_.clear();
  auto db = OpenDb();
  EXPECT_TRUE(log_.empty());
  for (const char* id : {"b1", "b2", "b3"})
    EXPECT_EQ(Count(*db, Key(id)), 10u) << id;
}

// A WAL whose magic is damaged is not silently emptied: it is kept aside, loudly, and the store
// starts a new one.
TEST_F(TsdbFailureTest, AWalWithADamagedMagicIsKeptAside) {
  {
    auto db = OpenDb();
    ASSERT_TRUE(db->Append("b1", Seconds(Key("util"), kWindow, 10)).ok());
  }
  const std::string wal = dir_ + "/wal.log";
  std::string contents = ReadFile(wal);
  contents[0] ^= 0x01;
  WriteFile(wal, contents);
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    ASSERT_EQ(log_.size(), 1u);
    EXPECT_THAT(log_[0], HasSubstr("does not start with the WAL magic"));
    EXPECT_THAT(log_[0], HasSubstr("wal.log.corrupt-"));
    std::vector<std::string> aside;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      if (entry.path().filename().string().starts_with("wal.log.corrupt-"))
        aside.push_back(entry.path());
    }
    ASSERT_EQ(aside.size(), 1u);
    EXPECT_EQ(ReadFile(aside[0]), contents);
    EXPECT_EQ(Count(*db, Key("util")), 0u);
    ASSERT_FALSE(db->Append("b1", Seconds(Key("util"), kWindow, 10))->duplicate);
  }
  log_.clear();
  auto db = OpenDb();
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(Count(*db, Key("util")), 10u);
}

// A crash while the log was being created leaves a file without (all of) its magic: that is
// not damage, and nothing is kept aside.
TEST_F(TsdbFailureTest, AWalCutInsideItsMagicIsStartedAfresh) {
  std::filesystem::create_directories(dir_);
  WriteFile(dir_ + "/wal.log", std::string(kWalMagic, 3));
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(log_.empty());
  ASSERT_TRUE(db->Append("b1", Seconds(Key("util"), kWindow, 10)).ok());
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    files += entry.path().filename().string().starts_with("wal.log") ? 1 : 0;
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace tsdb_failure_test
}  // namespace expanse::tsdb
