// Telemetry store ingest and query, side by side with the obvious alternative: one
// SQLite row per sample, a transaction per batch. Both get the same synthetic H200
// telemetry (tsdb_telemetry.h): N nodes x 8 GPUs x 20 fields at 1 Hz, appended in
// one-second batches with an fsync per batch (synchronous=FULL for SQLite). Reported:
// samples/s and bytes per sample at rest (after Flush / checkpoint), and their ratios.
// Figures and the command are recorded in docs/performance.md.

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <benchmark/benchmark.h>

#include "core/clock.h"
#include "tsdb/tsdb.h"
#include "tsdb_telemetry.h"

namespace {

using expanse::bench::TelemetryGenerator;
using expanse::tsdb::Batch;
using expanse::tsdb::OwnedKey;
using expanse::tsdb::Sample;
using expanse::tsdb::SeriesKey;
using expanse::tsdb::Tsdb;

constexpr int64_t kStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

std::string TempDir() {
  char pattern[] = "/tmp/bench_tsdb_XXXXXX";
  if (mkdtemp(pattern) == nullptr)
    std::abort();
  return pattern;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    bytes += entry.file_size();
  return bytes;
}

// Built by append: g++ 12 -O3 reports a false -Wrestrict on "literal" + std::to_string().
std::string BatchId(const char* prefix, int n) {
  std::string id(prefix);
  id += std::to_string(n);
  return id;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_tsdb: %s failed\n", what);
    std::abort();
  }
}

struct IngestFigures {
  double samples_per_s = 0;
  double bytes_per_sample = 0;
};

IngestFigures IngestTsdb(int nodes, int seconds) {
  const std::string dir = TempDir();
  expanse::SystemClock clock;
  auto db = Tsdb::Open({.directory = dir}, clock);
  Check(db.ok(), "Tsdb::Open");
  TelemetryGenerator gen(nodes, 1);
  uint64_t samples = 0;
  std::chrono::steady_clock::duration busy{};
  for (int s = 0; s < seconds; ++s) {
    const Batch batch = gen.Next(kStartMs + s * 1000);
    const auto start = std::chrono::steady_clock::now();
    auto result = (*db)->Append(BatchId("batch-", s), batch);
    busy += std::chrono::steady_clock::now() - start;
    Check(result.ok(), "Append");
    samples += result->samples;
  }
  const auto start = std::chrono::steady_clock::now();
  Check((*db)->Flush().ok(), "Flush");
  busy += std::chrono::steady_clock::now() - start;
  IngestFigures figures{samples / Seconds(busy),
                        static_cast<double>(DirBytes(dir)) / static_cast<double>(samples)};
  db->reset();
  std::filesystem::remove_all(dir);
  return figures;
}

void Exec(sqlite3* db, const char* sql) {
  Check(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK, sql);
}

IngestFigures IngestSqliteRows(int nodes, int seconds) {
  const std::string dir = TempDir();
  sqlite3* db = nullptr;
  Check(sqlite3_open((dir + "/rows.sqlite").c_str(), &db) == SQLITE_OK, "sqlite open");
  Exec(db, "PRAGMA journal_mode=WAL");
  Exec(db, "PRAGMA synchronous=FULL");
  Exec(db,
       "CREATE TABLE series (id INTEGER PRIMARY KEY, compute_id TEXT, host TEXT, device TEXT, "
       "metric TEXT, UNIQUE (compute_id, host, device, metric));"
       "CREATE TABLE samples (series_id INTEGER NOT NULL, t_ms INTEGER NOT NULL, v REAL NOT "
       "NULL, PRIMARY KEY (series_id, t_ms)) WITHOUT ROWID;");
  TelemetryGenerator gen(nodes, 1);
  std::map<expanse::tsdb::SeriesKey, int64_t, std::less<>> ids;
  for (const auto& key : gen.keys())
    ids.emplace(key, static_cast<int64_t>(ids.size()) + 1);
  sqlite3_stmt* insert = nullptr;
  Check(sqlite3_prepare_v2(db, "INSERT INTO samples VALUES (?, ?, ?)", -1, &insert, nullptr) ==
            SQLITE_OK,
        "prepare");
  uint64_t samples = 0;
  std::chrono::steady_clock::duration busy{};
  for (int s = 0; s < seconds; ++s) {
    const Batch batch = gen.Next(kStartMs + s * 1000);
    const auto start = std::chrono::steady_clock::now();
    Exec(db, "BEGIN");
    for (const auto& [key, points] : batch) {
      const int64_t id = ids.find(key)->second;
      for (const auto& p : points) {
        sqlite3_bind_int64(insert, 1, id);
        sqlite3_bind_int64(insert, 2, p.t_ms);
        sqlite3_bind_double(insert, 3, p.v);
        Check(sqlite3_step(insert) == SQLITE_DONE, "insert");
        sqlite3_reset(insert);
        ++samples;
      }
    }
    Exec(db, "COMMIT");
    busy += std::chrono::steady_clock::now() - start;
  }
  Exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sqlite3_finalize(insert);
  sqlite3_close(db);
  IngestFigures figures{samples / Seconds(busy),
                        static_cast<double>(DirBytes(dir)) / static_cast<double>(samples)};
  std::filesystem::remove_all(dir);
  return figures;
}

// Args: nodes, seconds of telemetry.
void BM_IngestTsdbVsSqliteRows(benchmark::State& state) {
  const auto nodes = static_cast<int>(state.range(0));
  const auto seconds = static_cast<int>(state.range(1));
  IngestFigures ours;
  IngestFigures rows;
  for (auto _ : state) {
    ours = IngestTsdb(nodes, seconds);
    rows = IngestSqliteRows(nodes, seconds);
  }
  state.counters["tsdb_samples_per_s"] = ours.samples_per_s;
  state.counters["tsdb_bytes_per_sample"] = ours.bytes_per_sample;
  state.counters["rows_samples_per_s"] = rows.samples_per_s;
  state.counters["rows_bytes_per_sample"] = rows.bytes_per_sample;
  state.counters["speed_ratio"] = ours.samples_per_s / rows.samples_per_s;
  state.counters["size_ratio"] = rows.bytes_per_sample / ours.bytes_per_sample;
}
BENCHMARK(BM_IngestTsdbVsSqliteRows)
    ->Args({8, 3600})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

// A 24-hour job on one node's 8 GPUs: 8 x 86,400 power readings read back as 1,000
// buckets per GPU, from flushed chunks.
void BM_Query24hJob8Gpus(benchmark::State& state) {
  const std::string dir = TempDir();
  expanse::SystemClock clock;
  auto db = Tsdb::Open({.directory = dir}, clock);
  Check(db.ok(), "Tsdb::Open");
  TelemetryGenerator gen(1, 2);
  constexpr int kDaySeconds = 86'400;
  for (int s = 0; s < kDaySeconds; s += 60) {
    std::vector<std::pair<SeriesKey, std::vector<Sample>>> series;
    for (int i = 0; i < 60; ++i) {
      const Batch second = gen.Next(kStartMs + (s + i) * 1000);
      for (const auto& [key, points] : second) {
        if (key.metric != "gpu.power_w")
          continue;
        if (i == 0)
          series.emplace_back(OwnedKey(key), std::vector<Sample>{});
        for (auto& [minute_key, minute_points] : series) {
          if (minute_key == key)
            minute_points.push_back(points[0]);
        }
      }
    }
    Batch minute;
    for (const auto& [key, points] : series)
      minute.Add(key, points);
    Check((*db)->Append(BatchId("m", s), minute).ok(), "Append");
  }
  Check((*db)->Flush().ok(), "Flush");
  const auto keys = (*db)->ListSeries("cluster-a", "node0");
  Check(keys.ok() && keys->size() == 8, "ListSeries");
  uint64_t points = 0;
  for (auto _ : state) {
    for (const auto& key : *keys) {
      auto buckets = (*db)->Query(key, kStartMs, kStartMs + kDaySeconds * 1000LL, 1000);
      Check(buckets.ok() && buckets->size() == 1000, "Query");
      points += 86'400;
    }
  }
  state.counters["samples_read_per_s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
  db->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_Query24hJob8Gpus)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
