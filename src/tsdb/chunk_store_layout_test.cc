// The chunk store's on-disk layout (docs/formats/tsdb-wal.md, "chunks.sqlite"): files from
// earlier builds are upgraded and read as before, batch sequences are kept as bitmaps over
// windows that never claim a missing sequence, and damaged or newer files are refused with a
// clear error, except for damage confined to rows the store can drop (an open chunk that does
// not decode, a series row that repeats a key without data), which must not stop the server.
// Tests go through Tsdb, as the server does, and look into the SQLite file directly.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tsdb/chunk_codec.h"
#include "tsdb/tsdb.h"

namespace expanse::tsdb {
namespace chunk_store_layout_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;

// The tables as builds before layout versioning wrote them (user_version 0).
constexpr const char* kLayoutZeroSchema = R"sql(
CREATE TABLE series (
  id INTEGER PRIMARY KEY,
  compute_id TEXT NOT NULL, host TEXT NOT NULL, device TEXT NOT NULL, metric TEXT NOT NULL,
  UNIQUE (compute_id, host, device, metric)) STRICT;
CREATE TABLE chunks (
  series_id INTEGER NOT NULL REFERENCES series(id),
  start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, count INTEGER NOT NULL,
  data BLOB NOT NULL) STRICT;
CREATE INDEX chunks_by_series ON chunks (series_id, start_ms);
CREATE INDEX chunks_by_end ON chunks (end_ms);
CREATE TABLE heads (
  series_id INTEGER PRIMARY KEY REFERENCES series(id),
  start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, count INTEGER NOT NULL,
  data BLOB NOT NULL) STRICT;
CREATE TABLE batch_ids (
  id TEXT PRIMARY KEY, received_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;
CREATE TABLE batch_streams (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT;
CREATE TABLE batch_seqs (
  stream_id INTEGER NOT NULL REFERENCES batch_streams(id), seq INTEGER NOT NULL,
  received_s INTEGER NOT NULL, PRIMARY KEY (stream_id, seq)) STRICT, WITHOUT ROWID;
)sql";

// A plain SQLite handle on the store's file, beside (or instead of) the Tsdb.
class File {
 public:
  explicit File(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~File() { sqlite3_close(db_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "") << " in " << sql;
    sqlite3_free(error);
  }
  // Every row of a query, its columns joined by ",".
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_) << " in " << sql;
    while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
        row += (i ? "," : "") + std::string(text ? text : "NULL");
      }
      rows.push_back(row);
    }
    sqlite3_finalize(stmt);
    return rows;
  }
  // Flips one bit of a blob in place, as a bad sector would.
  void FlipBit(const char* table, const char* column, int64_t rowid, int byte) {
    sqlite3_blob* blob = nullptr;
    ASSERT_EQ(sqlite3_blob_open(db_, "main", table, column, rowid, 1, &blob), SQLITE_OK)
        << sqlite3_errmsg(db_);
    unsigned char value = 0;
    EXPECT_EQ(sqlite3_blob_read(blob, &value, 1, byte), SQLITE_OK);
    value ^= 0x10;
    EXPECT_EQ(sqlite3_blob_write(blob, &value, 1, byte), SQLITE_OK);
    sqlite3_blob_close(blob);
  }
  void InsertChunk(const char* table, int64_t series_id, int64_t start_ms, int count) {
    std::vector<Sample> samples;
    for (int i = 0; i < count; ++i)
      samples.push_back({start_ms + i * 1000, 1.0 * i});
    Result<std::string> data = EncodeChunk(samples);
    ASSERT_TRUE(data.ok()) << data.status();
    sqlite3_stmt* stmt = nullptr;
    const std::string sql = std::string("INSERT INTO ") + table +
                            " (series_id, start_ms, end_ms, count, data) VALUES (?, ?, ?, ?, ?)";
    ASSERT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
    sqlite3_bind_int64(stmt, 1, series_id);
    sqlite3_bind_int64(stmt, 2, start_ms);
    sqlite3_bind_int64(stmt, 3, start_ms + (count - 1) * 1000);
    sqlite3_bind_int64(stmt, 4, count);
    sqlite3_bind_blob(stmt, 5, data->data(), static_cast<int>(data->size()), SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(stmt);
  }

 private:
  sqlite3* db_ = nullptr;
};

class ChunkStoreLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/chunk_layout_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string FilePath() const { return dir_ + "/chunks.sqlite"; }

  Result<std::unique_ptr<Tsdb>> TryOpen(int64_t retention_ms = 0) {
    TsdbOptions options;
    options.directory = dir_;
    options.retention_ms = retention_ms;
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    return Tsdb::Open(options, clock_);
  }
  std::unique_ptr<Tsdb> OpenDb(int64_t retention_ms = 0) {
    Result<std::unique_ptr<Tsdb>> db = TryOpen(retention_ms);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  static SeriesKey Key(std::string host, std::string device, std::string metric) {
    return {"c1", std::move(host), std::move(device), std::move(metric)};
  }
  static Batch OneSample(const SeriesKey& key, int64_t t) { return {{key, {{t, 1}}}}; }
  bool IsDuplicate(Tsdb& db, const std::string& id) {
    auto result = db.Append(id, OneSample(Key("n", "d", "m"), kT0), Tsdb::Ack::kReceived);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() && result->duplicate;
  }
  static uint32_t SamplesIn(Tsdb& db, const SeriesKey& key, int64_t from_ms = kT0 - kHourMs,
                            int64_t to_ms = kT0 + kHourMs) {
    auto buckets = db.Query(key, from_ms, to_ms, 10);
    EXPECT_TRUE(buckets.ok()) << buckets.status();
    uint32_t n = 0;
    if (buckets.ok()) {
      for (const auto& b : *buckets)
        n += b.count;
    }
    return n;
  }

  std::string dir_;
  ManualClock clock_{kT0};
  std::vector<std::string> log_;
};

TEST_F(ChunkStoreLayoutTest, ALayoutZeroFileIsUpgradedAndReadAsBefore) {
  {
    File file(FilePath());
    file.Exec(kLayoutZeroSchema);
    file.Exec(
        "INSERT INTO series VALUES (1, 'c1', 'node01', 'GPU-0', 'util'), "
        "(2, 'c1', 'node01', 'GPU-1', 'util'), (3, 'c1', 'node02', 'GPU-0', 'power')");
    file.InsertChunk("chunks", 1, kT0 - 20'000, 10);
    file.InsertChunk("heads", 1, kT0, 4);
    file.InsertChunk("heads", 2, kT0, 5);
    file.Exec("INSERT INTO batch_streams VALUES (1, 'c1/telemetry'), (2, 'c1/jobs')");
    const std::string s = std::to_string(kT0 / 1000), s5 = std::to_string(kT0 / 1000 + 5);
    file.Exec("INSERT INTO batch_seqs VALUES (1, 1, " + s + "), (1, 2, " + s + "), (1, 3, " + s5 +
              "), (1, 5, " + s + "), (1, 6, " + s + "), (2, 3, " + s + ")");
    file.Exec("INSERT INTO batch_ids VALUES ('plain', " + std::to_string(kT0) + ")");
  }
  clock_.Set(kT0 + 10'000);
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    File file(FilePath());
    EXPECT_THAT(file.Rows("PRAGMA user_version"), ElementsAre("2"));
    EXPECT_THAT(file.Rows("SELECT name FROM sqlite_schema WHERE name = 'batch_seqs'"),
                ElementsAre());
    EXPECT_THAT(file.Rows("SELECT name FROM labels ORDER BY name"),
                ElementsAre("GPU-0", "GPU-1", "c1", "node01", "node02", "power", "util"));
    // One window per stream: sequences 1, 2, 3, 5 and 6 are bits 0, 1, 2, 4 and 5 from 1
    // (0x37), with the oldest and newest receive second.
    const std::string s = std::to_string(kT0 / 1000), s5 = std::to_string(kT0 / 1000 + 5);
    EXPECT_THAT(file.Rows("SELECT stream_id, first_seq, hex(members), first_s, last_s "
                          "FROM batch_windows ORDER BY stream_id, first_seq"),
                ElementsAre("1,1,37," + s + "," + s5, "2,3,01," + s + "," + s));

    // The same series, samples and batch ids as before the upgrade.
    Result<std::vector<SeriesKey>> keys = db->ListSeries("c1", "");
    ASSERT_TRUE(keys.ok()) << keys.status();
    EXPECT_THAT(*keys, ElementsAre(Key("node01", "GPU-0", "util"), Key("node01", "GPU-1", "util"),
                                   Key("node02", "GPU-0", "power")));
    EXPECT_EQ(SamplesIn(*db, Key("node01", "GPU-0", "util")), 14u);
    EXPECT_EQ(SamplesIn(*db, Key("node01", "GPU-1", "util")), 5u);
    for (const char* id :
         {"c1/telemetry/1", "c1/telemetry/3", "c1/telemetry/6", "c1/jobs/3", "plain"})
      EXPECT_TRUE(IsDuplicate(*db, id)) << id;
    // The gap stays a gap: the sequence between the two runs was never stored.
    EXPECT_FALSE(IsDuplicate(*db, "c1/telemetry/4"));
    ASSERT_TRUE(db->Append("c1/x/1", OneSample(Key("node03", "GPU-0", "util"), kT0)).ok());
    ASSERT_TRUE(db->Flush().ok());
    // 4 filled its bit; a new stream and its labels went in beside the old ones.
    EXPECT_THAT(file.Rows("SELECT hex(members) FROM batch_windows WHERE stream_id = 1"),
                ElementsAre("3F"));
    EXPECT_THAT(file.Rows("SELECT count(*) FROM labels"), ElementsAre("11"));  // node03 n d m
  }
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  for (const char* id : {"c1/telemetry/2", "c1/telemetry/4", "c1/telemetry/5", "c1/x/1", "plain"})
    EXPECT_TRUE(IsDuplicate(*db, id)) << id;
  EXPECT_FALSE(IsDuplicate(*db, "c1/telemetry/7"));
  EXPECT_EQ(SamplesIn(*db, Key("node01", "GPU-0", "util")), 14u);
  EXPECT_EQ(SamplesIn(*db, Key("node03", "GPU-0", "util")), 1u);
}

// The first builds wrote only series, chunks and batch_ids; the rest is added.
TEST_F(ChunkStoreLayoutTest, TheOldestFilesAreUpgradedToo) {
  {
    File file(FilePath());
    file.Exec(
        "CREATE TABLE series (id INTEGER PRIMARY KEY, compute_id TEXT NOT NULL, host TEXT NOT "
        "NULL, device TEXT NOT NULL, metric TEXT NOT NULL, UNIQUE (compute_id, host, device, "
        "metric)) STRICT;"
        "CREATE TABLE chunks (series_id INTEGER NOT NULL REFERENCES series(id), start_ms INTEGER "
        "NOT NULL, end_ms INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL) STRICT;"
        "CREATE TABLE batch_ids (id TEXT PRIMARY KEY, received_ms INTEGER NOT NULL) STRICT, "
        "WITHOUT ROWID;"
        "INSERT INTO series VALUES (7, 'c1', 'node01', 'GPU-0', 'util');"
        "INSERT INTO batch_ids VALUES ('c1/telemetry/9', " +
        std::to_string(kT0) + ");");
    file.InsertChunk("chunks", 7, kT0, 3);
  }
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(SamplesIn(*db, Key("node01", "GPU-0", "util")), 3u);
    EXPECT_TRUE(IsDuplicate(*db, "c1/telemetry/9"));
    EXPECT_FALSE(IsDuplicate(*db, "c1/telemetry/10"));
    ASSERT_TRUE(db->Flush().ok());
  }
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(IsDuplicate(*db, "c1/telemetry/9"));
  EXPECT_TRUE(IsDuplicate(*db, "c1/telemetry/10"));
  File file(FilePath());
  EXPECT_THAT(file.Rows("SELECT first_seq, hex(members) FROM batch_windows"), ElementsAre("10,01"));
}

// Two streams share one sequence counter (as the daemon's outbox does), so each has gaps
// where the other's batches went. Each stream's bits go into windows of 4096 sequences.
// Batches come a little out of order (several connections); one that reaches a later Flush
// than those after it still joins their window, here even moving its start back (4097
// arrives after 4098 started the second telemetry window). A sequence never received is
// never a member.
TEST_F(ChunkStoreLayoutTest, InterleavedStreamsFillTheirWindowsAndGapsStay) {
  std::vector<std::string> ids;
  for (int seq = 1; seq <= 6000; ++seq) {
    if (seq != 100)
      ids.push_back((seq % 7 == 0 ? "c1/jobs/" : "c1/telemetry/") + std::to_string(seq));
  }
  std::mt19937 rng(7);
  for (size_t block = 0; block + 8 <= ids.size(); block += 8)
    std::shuffle(ids.begin() + block, ids.begin() + block + 8, rng);
  const auto late = std::find(ids.begin(), ids.end(), "c1/telemetry/4097");
  ASSERT_LT(late - ids.begin(), 4999);
  std::rotate(late, late + 1, ids.begin() + 5001);  // now right after the Flush at 4999
  {
    auto db = OpenDb();
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_FALSE(IsDuplicate(*db, ids[i])) << ids[i];
      if (i % 1000 == 999) {
        ASSERT_TRUE(db->Flush().ok());
      }
    }
    ASSERT_TRUE(db->Flush().ok());
  }
  {
    File file(FilePath());
    // 4109 = 7 * 587 is the first job past 7 + 4095.
    EXPECT_THAT(file.Rows("SELECT name, first_seq, length(members) FROM batch_windows JOIN "
                          "batch_streams ON batch_streams.id = stream_id ORDER BY name, first_seq"),
                ElementsAre("c1/jobs,7,512", "c1/jobs,4109,237", "c1/telemetry,1,512",
                            "c1/telemetry,4097,238"));
  }
  auto db = OpenDb();
  for (const std::string& id : ids)
    ASSERT_TRUE(IsDuplicate(*db, id)) << id;
  for (const char* id : {"c1/telemetry/0", "c1/telemetry/100", "c1/telemetry/7", "c1/jobs/8",
                         "c1/jobs/100", "c1/telemetry/6001", "c1/jobs/6006"})
    EXPECT_FALSE(IsDuplicate(*db, id)) << id;
}

// In any arrival order, however scattered over Flushes, every stored id is a duplicate
// after a restart and no other is.
TEST_F(ChunkStoreLayoutTest, AnyArrivalOrderKeepsEveryIdAndClaimsNoOther) {
  std::vector<int> seqs;
  for (int seq = 1; seq <= 9000; seq += 1 + seq % 3)
    seqs.push_back(seq);
  std::mt19937 rng(11);
  std::shuffle(seqs.begin(), seqs.end(), rng);
  const size_t stored = seqs.size() * 2 / 3;
  {
    auto db = OpenDb();
    for (size_t i = 0; i < stored; ++i) {
      ASSERT_FALSE(IsDuplicate(*db, "c1/t/" + std::to_string(seqs[i])));
      if (i % 300 == 299) {
        ASSERT_TRUE(db->Flush().ok());
      }
    }
    ASSERT_TRUE(db->Flush().ok());
  }
  auto db = OpenDb();
  for (size_t i = 0; i < seqs.size(); ++i)
    ASSERT_EQ(IsDuplicate(*db, "c1/t/" + std::to_string(seqs[i])), i < stored) << seqs[i];
  for (const int seq : {0, 2, 5, 9001, 20000})  // never sent: 2 and 5 are gaps of the pattern
    EXPECT_FALSE(IsDuplicate(*db, "c1/t/" + std::to_string(seq))) << seq;
}

// A window takes members only within an hour of each other, so retention, which drops a
// window with its newest member, keeps no id much longer than it would one by one; and a
// batch received again after its id was forgotten in memory keeps its window alive.
TEST_F(ChunkStoreLayoutTest, WindowsSpanAnHourAndRetentionGoesByTheirNewestMember) {
  auto open_check_close = [&](const std::vector<std::pair<std::string, bool>>& expected) {
    auto db = OpenDb();
    for (const auto& [id, duplicate] : expected)
      EXPECT_EQ(IsDuplicate(*db, id), duplicate) << id;
  };
  {
    auto db = OpenDb();
    for (const auto& [seq, minutes] : std::vector<std::pair<int, int>>{{1, 0}, {2, 30}, {3, 61}}) {
      clock_.Set(kT0 + minutes * 60'000);
      ASSERT_FALSE(IsDuplicate(*db, "c1/telemetry/" + std::to_string(seq)));
      ASSERT_TRUE(db->Flush().ok());
    }
    File file(FilePath());
    const std::string s = std::to_string(kT0 / 1000);
    EXPECT_THAT(file.Rows("SELECT first_seq, hex(members), first_s - " + s + ", last_s - " + s +
                          " FROM batch_windows ORDER BY first_seq"),
                ElementsAre("1,03,0,1800", "3,01,3660,3660"));
    // The cutoff passes 1's time but not 2's: the window, and so 1, stays on disk, though
    // memory forgets 1 by its own time; 1 received again is stored again.
    clock_.Set(kT0 + 7 * 24 * kHourMs + 15 * 60'000);
    ASSERT_TRUE(db->ApplyRetention().ok());
    EXPECT_THAT(file.Rows("SELECT first_seq FROM batch_windows"), ElementsAre("1", "3"));
    EXPECT_FALSE(IsDuplicate(*db, "c1/telemetry/1"));
    ASSERT_TRUE(db->Flush().ok());
  }
  open_check_close({{"c1/telemetry/1", true}, {"c1/telemetry/2", true}});
  {
    // Past 2's time, but 1 was received again and keeps the window, and with it 2.
    clock_.Set(kT0 + 7 * 24 * kHourMs + 45 * 60'000);
    auto db = OpenDb();
    ASSERT_TRUE(db->ApplyRetention().ok());
  }
  open_check_close({{"c1/telemetry/1", true}, {"c1/telemetry/2", true}, {"c1/telemetry/3", true}});
  {
    // Past the repeat of 1 and past 3: everything is forgotten.
    clock_.Set(kT0 + 14 * 24 * kHourMs + 30 * 60'000);
    auto db = OpenDb();
    ASSERT_TRUE(db->ApplyRetention().ok());
  }
  open_check_close(
      {{"c1/telemetry/1", false}, {"c1/telemetry/2", false}, {"c1/telemetry/3", false}});
}

// Layout-0 rows are put into windows as a Flush would: a new window once the hour or the
// 4096 sequences run out.
TEST_F(ChunkStoreLayoutTest, ALongRunOfLayoutZeroSequencesBecomesSeveralWindows) {
  const int64_t s0 = kT0 / 1000;
  {
    File file(FilePath());
    file.Exec(kLayoutZeroSchema);
    file.Exec("INSERT INTO batch_streams VALUES (1, 'c1/telemetry')");
    file.Exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
        "INSERT INTO batch_seqs SELECT 1, i, " +
        std::to_string(s0) + " + i FROM n");
  }
  clock_.Set(kT0 + 5000 * 1000);
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  {
    File file(FilePath());
    // Sequence i came at s0 + i: 1..3600 are within the hour (450 bytes of bits), 3601..5000
    // start the next window.
    EXPECT_THAT(
        file.Rows("SELECT first_seq, length(members), first_s - " + std::to_string(s0) +
                  ", last_s - " + std::to_string(s0) + " FROM batch_windows ORDER BY first_seq"),
        ElementsAre("1,450,1,3600", "3601,175,3601,5000"));
  }
  for (int seq = 1; seq <= 5000; seq += 1 + seq % 5)
    ASSERT_TRUE(IsDuplicate(*db, "c1/telemetry/" + std::to_string(seq))) << seq;
  EXPECT_TRUE(IsDuplicate(*db, "c1/telemetry/5000"));
  EXPECT_FALSE(IsDuplicate(*db, "c1/telemetry/5001"));
}

// Random arrivals (mostly new sequences with gaps, some late, some received again), a clock
// that runs over two weeks, Flushes, retention and restarts, checked against a model: an id
// never stored is never called a repeat, and a stored one is until max(retention, 7 days)
// after its latest receipt.
TEST_F(ChunkStoreLayoutTest, MatchesAModelOfWhatMustBeRemembered) {
  std::mt19937 rng(2026);
  auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  std::map<int64_t, int64_t> stored;  // seq -> latest receipt (ms) that stored it
  const int64_t keep_ms = 7 * 24 * kHourMs;
  int64_t next_seq = 1;
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  for (int round = 0; round < 500; ++round) {
    clock_.Set(clock_.NowMs() + static_cast<int64_t>(rng() % 3600) * 1000);
    for (int i = 0; i < 4; ++i) {
      int64_t seq;
      if (chance(80)) {
        seq = next_seq;
        next_seq += 1 + rng() % 3;
      } else {
        seq = 1 + static_cast<int64_t>(rng() % next_seq);  // late, repeated or never sent
      }
      const auto known = stored.find(seq);
      const bool must_remember = known != stored.end() && known->second >= clock_.NowMs() - keep_ms;
      const bool duplicate = IsDuplicate(*db, "c1/t/" + std::to_string(seq));
      if (known == stored.end()) {
        ASSERT_FALSE(duplicate) << "never stored: " << seq << " round " << round;
      }
      if (must_remember) {
        ASSERT_TRUE(duplicate) << "forgotten early: " << seq << " round " << round;
      }
      if (!duplicate)
        stored[seq] = clock_.NowMs();
    }
    // Ids near the end of what must be remembered, where forgetting early would show.
    std::vector<int64_t> expiring;
    for (const auto& [seq, received_ms] : stored) {
      if (received_ms >= clock_.NowMs() - keep_ms &&
          received_ms < clock_.NowMs() - keep_ms + kHourMs)
        expiring.push_back(seq);
    }
    std::shuffle(expiring.begin(), expiring.end(), rng);
    for (size_t i = 0; i < expiring.size() && i < 3; ++i)
      ASSERT_TRUE(IsDuplicate(*db, "c1/t/" + std::to_string(expiring[i]))) << expiring[i];
    if (chance(30)) {
      ASSERT_TRUE(db->Flush().ok());
    }
    if (chance(20)) {
      ASSERT_TRUE(db->ApplyRetention().ok());
    }
    if (chance(10)) {
      db.reset();
      db = OpenDb();
      ASSERT_NE(db, nullptr);
    }
  }
}

// Layout 1 differs only in what its chunks may hold: its file is taken as it is.
TEST_F(ChunkStoreLayoutTest, ALayoutOneFileIsRecordedAsLayoutTwo) {
  {
    auto db = OpenDb();
    ASSERT_FALSE(IsDuplicate(*db, "c1/telemetry/1"));
    ASSERT_TRUE(db->Flush().ok());
  }
  {
    File file(FilePath());
    file.Exec("PRAGMA user_version = 1");
  }
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(IsDuplicate(*db, "c1/telemetry/1"));
  EXPECT_EQ(SamplesIn(*db, Key("n", "d", "m")), 1u);
  File file(FilePath());
  EXPECT_THAT(file.Rows("PRAGMA user_version"), ElementsAre("2"));
}

TEST_F(ChunkStoreLayoutTest, AFileFromANewerBuildIsRefusedAndLeftAsItWas) {
  {
    File file(FilePath());
    file.Exec("PRAGMA user_version = 3");
  }
  Result<std::unique_ptr<Tsdb>> db = TryOpen();
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(), HasSubstr("layout 3, written by a newer expanse-server"));
  File file(FilePath());
  EXPECT_THAT(file.Rows("PRAGMA user_version"), ElementsAre("3"));
  EXPECT_THAT(file.Rows("PRAGMA journal_mode"), ElementsAre("delete"));
  EXPECT_THAT(file.Rows("SELECT name FROM sqlite_schema"), ElementsAre());
}

// The upgrade is one transaction. Here its last step fails (a stray batch_windows table of
// another shape), after the series were already rewritten: the file keeps its old layout.
TEST_F(ChunkStoreLayoutTest, AFailedUpgradeChangesNothing) {
  {
    File file(FilePath());
    file.Exec(kLayoutZeroSchema);
    file.Exec("INSERT INTO series VALUES (1, 'c1', 'node01', 'GPU-0', 'util')");
    file.Exec("INSERT INTO batch_streams VALUES (1, 'c1/telemetry')");
    file.Exec("INSERT INTO batch_seqs VALUES (1, 1, 1700000000)");
    file.Exec("CREATE TABLE batch_windows (x)");
  }
  Result<std::unique_ptr<Tsdb>> db = TryOpen();
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(db.status().message(), HasSubstr("batch window"));
  File file(FilePath());
  EXPECT_THAT(file.Rows("PRAGMA user_version"), ElementsAre("0"));
  EXPECT_THAT(file.Rows("SELECT compute_id, host FROM series"), ElementsAre("c1,node01"));
  EXPECT_THAT(file.Rows("SELECT * FROM batch_seqs"), ElementsAre("1,1,1700000000"));
  EXPECT_THAT(file.Rows("SELECT name FROM sqlite_schema WHERE name = 'labels'"), ElementsAre());
}

// A Flush whose transaction fails (here a trigger aborts the batch-window write) leaves no
// trace, not even in the store's caches of label and stream ids: the next Flush writes the
// new series, labels and stream in full.
TEST_F(ChunkStoreLayoutTest, AFlushThatFailsCanBeRetried) {
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Append("c1/new/1", OneSample(Key("node09", "GPU-9", "fresh"), kT0)).ok());
  {
    File file(FilePath());
    file.Exec(
        "CREATE TRIGGER refuse BEFORE INSERT ON batch_windows "
        "BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
  }
  Status failed = db->Flush();
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("refused by test"));
  {
    File file(FilePath());
    EXPECT_THAT(file.Rows("SELECT count(*) FROM labels"), ElementsAre("0"));
    file.Exec("DROP TRIGGER refuse");
  }
  ASSERT_TRUE(db->Flush().ok());
  db.reset();
  db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(SamplesIn(*db, Key("node09", "GPU-9", "fresh")), 1u);
  EXPECT_TRUE(IsDuplicate(*db, "c1/new/1"));
}

TEST_F(ChunkStoreLayoutTest, DamagedSeriesAndWindowsAreReportedNotSkipped) {
  {
    auto db = OpenDb();
    ASSERT_FALSE(IsDuplicate(*db, "c1/telemetry/1"));
    ASSERT_TRUE(db->Append("c1/telemetry/2", OneSample(Key("n", "d", "other"), kT0)).ok());
    ASSERT_TRUE(db->Flush().ok());
  }
  const std::vector<std::pair<std::string, std::string>> damage = {
      {"DELETE FROM labels WHERE name = 'other'", "refers to a label that is not stored"},
      // Two rows of one key that both hold data (a row without any is dropped, below).
      {"INSERT INTO series SELECT 99, compute, host, device, metric FROM series WHERE id = 1;"
       "INSERT INTO heads SELECT 99, start_ms, end_ms, count, data FROM heads WHERE series_id = 1",
       "have the same key"},
      {"UPDATE batch_windows SET members = x'02'", "batch window 1 of stream 1 is damaged"},
      {"UPDATE batch_windows SET members = x''", "is damaged (0-byte bitmap"},
      {"UPDATE batch_windows SET members = CAST(x'01' || zeroblob(512) AS BLOB)", "is damaged"},
      {"UPDATE batch_windows SET first_seq = 999999999999999999", "is damaged"},
      {"UPDATE batch_windows SET first_seq = -1", "is damaged"},
      {"UPDATE batch_windows SET last_s = first_s - 1", "is damaged"},
      {"UPDATE batch_windows SET first_s = -1", "is damaged"},
      {"UPDATE batch_windows SET last_s = 1000000000001", "is damaged"},
      {"DELETE FROM batch_streams", "batch stream 1 has sequences but no name"},
  };
  const std::string good = FilePath() + ".good";
  std::filesystem::copy_file(FilePath(), good);
  for (const auto& [sql, error] : damage) {
    std::filesystem::copy_file(good, FilePath(), std::filesystem::copy_options::overwrite_existing);
    {
      File file(FilePath());
      file.Exec(sql);
    }
    Result<std::unique_ptr<Tsdb>> db = TryOpen();
    ASSERT_FALSE(db.ok()) << sql;
    EXPECT_EQ(db.status().code(), StatusCode::kDataLoss) << sql;
    EXPECT_THAT(db.status().message(), HasSubstr(error)) << sql;
  }
}

// An open chunk that does not decode (here one flipped bit fails its checksum) is dropped at
// Open: logged, counted and its row deleted, while every other series and the series' sealed
// chunks open as before. It used to be loaded as it was, and the first query, seal or flush of
// the series aborted the server, again at every start.
TEST_F(ChunkStoreLayoutTest, AnOpenChunkThatDoesNotDecodeIsDroppedAtOpen) {
  const SeriesKey good = Key("n", "d", "good"), bad = Key("n", "d", "bad");
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    Batch batch;
    batch.Add(good, std::vector<Sample>{{kT0, 1}, {kT0 + 1000, 2}});
    // A sealed chunk three hours back, then an open one.
    batch.Add(bad, std::vector<Sample>{{kT0 - 3 * kHourMs, 1}, {kT0, 2}, {kT0 + 1000, 3}});
    ASSERT_TRUE(db->Append("c1/telemetry/1", batch).ok());
    ASSERT_TRUE(db->Flush().ok());
  }
  int64_t bad_id = 0;
  {
    File file(FilePath());
    const std::vector<std::string> id = file.Rows(
        "SELECT s.id FROM series s JOIN labels m ON m.id = s.metric WHERE m.name = 'bad'");
    ASSERT_EQ(id.size(), 1u);
    bad_id = std::stoll(id[0]);
    EXPECT_THAT(file.Rows("SELECT count(*) FROM heads"), ElementsAre("2"));
    file.FlipBit("heads", "data", bad_id, kChunkHeaderSize);
  }
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->GetStats().damaged_open_chunks, 1u);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0],
              HasSubstr("dropping the stored open chunk of series c1/n/d/bad (2 samples)"));
  EXPECT_THAT(log_[0], HasSubstr("checksum mismatch"));
  EXPECT_EQ(SamplesIn(*db, good), 2u);
  EXPECT_EQ(SamplesIn(*db, bad, kT0 - 4 * kHourMs, kT0 + kHourMs), 1u);  // the sealed one
  {
    File file(FilePath());
    EXPECT_THAT(file.Rows("SELECT count(*) FROM heads WHERE series_id = " + std::to_string(bad_id)),
                ElementsAre("0"));
  }
  // The series goes on: written, sealed and flushed like any other.
  ASSERT_TRUE(db->Append("c1/telemetry/2", OneSample(bad, kT0 + 2000)).ok());
  ASSERT_TRUE(db->Append("c1/telemetry/3", OneSample(bad, kT0 + 3 * kHourMs)).ok());
  ASSERT_TRUE(db->Flush().ok());
  db.reset();
  log_.clear();
  db = OpenDb();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->GetStats().damaged_open_chunks, 0u);  // gone, not dropped again
  EXPECT_TRUE(log_.empty()) << log_[0];
  EXPECT_EQ(SamplesIn(*db, good), 2u);
  EXPECT_EQ(SamplesIn(*db, bad, kT0 - 4 * kHourMs, kT0 + 4 * kHourMs), 3u);
}

// A sealed chunk that does not decode (a flipped bit on disk) is skipped by every read, logged
// and counted once, while the series' other chunks and every other series still answer: it
// used to fail the read, and with it every job list page that asked about the series.
TEST_F(ChunkStoreLayoutTest, ASealedChunkThatDoesNotDecodeIsSkippedByReads) {
  const SeriesKey good = Key("n", "d", "good"), bad = Key("n", "d", "bad");
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    Batch batch;
    batch.Add(good, std::vector<Sample>{{kT0 - 3 * kHourMs, 1}, {kT0, 2}});
    // Two sealed chunks (each a later sample seals the one before), then an open one.
    batch.Add(bad, std::vector<Sample>{{kT0 - 5 * kHourMs, 1},
                                       {kT0 - 3 * kHourMs, 2},
                                       {kT0 - 3 * kHourMs + 1000, 3},
                                       {kT0, 4}});
    ASSERT_TRUE(db->Append("c1/telemetry/1", batch).ok());
    ASSERT_TRUE(db->Flush().ok());
  }
  {
    File file(FilePath());
    const std::vector<std::string> rows = file.Rows(
        "SELECT c.rowid FROM chunks c JOIN series s ON s.id = c.series_id JOIN labels m "
        "ON m.id = s.metric WHERE m.name = 'bad' ORDER BY c.start_ms");
    ASSERT_EQ(rows.size(), 2u);
    file.FlipBit("chunks", "data", std::stoll(rows[1]), kChunkHeaderSize);  // the 2-sample one
  }
  auto db = OpenDb();
  ASSERT_NE(db, nullptr);
  const int64_t from = kT0 - 6 * kHourMs, to = kT0 + kHourMs;
  EXPECT_EQ(SamplesIn(*db, bad, from, to), 2u);  // the first sealed chunk and the open one
  EXPECT_EQ(SamplesIn(*db, good, from, to), 2u);
  auto many =
      db->QueryMany({{bad, from, to, 6}, {good, from, to, 6}, {bad, from, kT0 - 4 * kHourMs, 1}});
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), 3u);
  const auto count = [](const std::vector<Bucket>& buckets) {
    uint32_t n = 0;
    for (const Bucket& b : buckets)
      n += b.count;
    return n;
  };
  EXPECT_EQ(count((*many)[0]), 2u);
  EXPECT_EQ(count((*many)[1]), 2u);
  EXPECT_EQ(count((*many)[2]), 1u);
  EXPECT_EQ(db->GetStats().damaged_chunks, 1u);  // read three times, noted once
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0], HasSubstr("skipping a chunk of series c1/n/d/bad from " +
                                 std::to_string(kT0 - 3 * kHourMs) + " ms"));
  EXPECT_THAT(log_[0], HasSubstr("checksum mismatch"));
}

// Retention whose series delete fails (a full disk; here a trigger) keeps the emptied series in
// memory, so that written again it keeps its id and row, and the next pass deletes what is
// still empty. It used to forget the series anyway: written again, the key got a new id and a
// second row, and the next Open refused the file ("have the same key").
TEST_F(ChunkStoreLayoutTest, SeriesWhoseDeleteFailsAreKeptAndDeletedByTheNextPass) {
  const int64_t retention_ms = 6 * kHourMs;
  const SeriesKey back = Key("n", "d", "back"), gone = Key("n", "d", "gone");
  auto db = OpenDb(retention_ms);
  ASSERT_NE(db, nullptr);
  Batch batch;
  batch.Add(back, std::vector<Sample>{{kT0, 1}});
  batch.Add(gone, std::vector<Sample>{{kT0, 1}});
  ASSERT_TRUE(db->Append("c1/telemetry/1", batch).ok());
  ASSERT_TRUE(db->Flush().ok());
  {
    File file(FilePath());
    file.Exec(
        "CREATE TRIGGER refuse BEFORE DELETE ON series "
        "BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
  }
  clock_.Set(kT0 + 7 * kHourMs);
  Status failed = db->ApplyRetention();
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("refused by test"));
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 2u);  // kept for the next pass
  ASSERT_TRUE(db->Append("c1/telemetry/2", OneSample(back, kT0 + 7 * kHourMs)).ok());
  ASSERT_TRUE(db->Flush().ok());
  {
    File file(FilePath());
    EXPECT_THAT(file.Rows("SELECT count(*) FROM series"), ElementsAre("2"));  // no second row
    file.Exec("DROP TRIGGER refuse");
  }
  ASSERT_TRUE(db->ApplyRetention().ok());
  EXPECT_EQ(db->ListSeries("c1", "")->size(), 1u);
  {
    File file(FilePath());
    EXPECT_THAT(file.Rows("SELECT count(*) FROM series"), ElementsAre("1"));
  }
  db.reset();
  db = OpenDb(retention_ms);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(SamplesIn(*db, back, kT0, kT0 + 8 * kHourMs), 1u);
  EXPECT_EQ(db->GetStats().series, 1u);
}

// A file that already has a second row for a key (written by a build that forgot series whose
// delete had failed) opens: the row without chunks or an open chunk is deleted, whichever of
// the two it is, and the one with data kept. Two rows with data are still refused (above).
TEST_F(ChunkStoreLayoutTest, ASeriesRowWithoutDataThatRepeatsAKeyIsDeletedAtOpen) {
  const SeriesKey key = Key("n", "d", "m"), other = Key("n", "d", "other");
  {
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->Append("c1/telemetry/1", OneSample(key, kT0)).ok());  // series 1
    ASSERT_TRUE(db->Append("c1/telemetry/2", OneSample(other, kT0)).ok());
    ASSERT_TRUE(db->Flush().ok());
  }
  const std::string good = FilePath() + ".good";
  std::filesystem::copy_file(FilePath(), good);
  const std::vector<std::string> damage = {
      // The empty row after the one with data, and before it (its data moved to the new row).
      "INSERT INTO series SELECT 99, compute, host, device, metric FROM series WHERE id = 1",
      "INSERT INTO series SELECT 99, compute, host, device, metric FROM series WHERE id = 1;"
      "UPDATE heads SET series_id = 99 WHERE series_id = 1",
  };
  for (const std::string& sql : damage) {
    SCOPED_TRACE(sql);
    std::filesystem::copy_file(good, FilePath(), std::filesystem::copy_options::overwrite_existing);
    {
      File file(FilePath());
      file.Exec(sql);
    }
    log_.clear();
    auto db = OpenDb();
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(SamplesIn(*db, key), 1u);
    EXPECT_EQ(SamplesIn(*db, other), 1u);
    EXPECT_THAT(log_, ElementsAre(HasSubstr("deleting 1 series rows without data")));
    {
      File file(FilePath());
      EXPECT_THAT(file.Rows("SELECT count(*) FROM series"), ElementsAre("2"));
    }
    // The kept row takes what comes next, and a new series gets an id of its own.
    ASSERT_TRUE(db->Append("c1/telemetry/3", OneSample(key, kT0 + 1000)).ok());
    ASSERT_TRUE(db->Append("c1/telemetry/4", OneSample(Key("n", "d", "new"), kT0)).ok());
    ASSERT_TRUE(db->Flush().ok());
    db.reset();
    db = OpenDb();
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(SamplesIn(*db, key), 2u);
    EXPECT_EQ(SamplesIn(*db, Key("n", "d", "new")), 1u);
  }
}

}  // namespace
}  // namespace chunk_store_layout_test
}  // namespace expanse::tsdb
