// Controller-side spool drain: 1,000 worker host directories with a few spool files each
// (60 records of ~2 KiB JSON per file, zstd level 1 as the writer stores them), drained by
// Aggregator::DrainOnce into a sink that only counts, on one thread and on the default
// eight. Reported: spool files/s, records/s and file MB/s of the drain alone (the files are
// laid down and synced untimed). The target is >= 5,000 files/s; figures and the
// command are in docs/performance.md.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "core/clock.h"
#include "spool/aggregator.h"
#include "spool/spool_file.h"
#include "spool/spool_names.h"

namespace {

using expanse::spool::Aggregator;
using expanse::spool::AggregatorOptions;
using expanse::spool::DrainStats;
using expanse::spool::SpoolFile;

constexpr int kRecordsPerFile = 60;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_spool_aggregator: %s failed\n", what);
    std::abort();
  }
}

double ProcessCpuSeconds() {
  timespec ts{};
  Check(::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0, "clock_gettime");
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Under $BENCH_SPOOL_DIR (default /tmp): /dev/shm takes the disk out of the figures.
std::string TempDir() {
  const char* parent = std::getenv("BENCH_SPOOL_DIR");
  std::string pattern = std::string(parent != nullptr ? parent : "/tmp") + "/bench_spool_XXXXXX";
  Check(mkdtemp(pattern.data()) != nullptr, "mkdtemp");
  return pattern;
}

// One gpu_series record of ~2 KiB: a node's 8 GPUs x 12 fields for one second, shaped like
// the sampler's JSON, with noisy values so zstd sees realistic (not constant) input.
std::string SeriesRecord(std::mt19937& rng, const std::string& host, int64_t t_ms) {
  static const char* const kFields[] = {"util",    "mem_used",  "mem_total", "power_w",
                                        "temp_c",  "sm_clock",  "mem_clock", "pcie_tx",
                                        "pcie_rx", "nvlink_tx", "nvlink_rx", "ecc_sbe"};
  std::uniform_int_distribution<int> value(0, 99'999);
  std::string json = "{\"host\":\"" + host + "\",\"t_ms\":" + std::to_string(t_ms) + ",\"gpus\":[";
  for (int gpu = 0; gpu < 8; ++gpu) {
    json += gpu ? ",{" : "{";
    json += "\"uuid\":\"GPU-4f1c2e7a-91b3-4c55-8d2e-00000000000" + std::to_string(gpu) + "\"";
    for (const char* field : kFields) {
      json += ",\"";
      json += field;
      json += "\":";
      json += std::to_string(value(rng));
      json += '.';
      json += std::to_string(value(rng) % 100);
    }
    json += ",\"job_id\":" + std::to_string(4'000'000 + gpu / 4) + "}";
  }
  json += "]}";
  return json;
}

// Lays down hosts x files_per_host spool files (untimed); returns the bytes written.
uint64_t FillSpool(const std::string& root, int hosts, int files_per_host, int zstd_level) {
  std::mt19937 rng(42);
  uint64_t bytes = 0;
  const int64_t t0 = 1'767'225'600'000;
  for (int h = 0; h < hosts; ++h) {
    char host[32];
    std::snprintf(host, sizeof host, "gpu-node%04d", h);
    const std::string dir = root + "/" + host;
    Check(::mkdir(dir.c_str(), 0750) == 0, "mkdir host");
    for (int f = 1; f <= files_per_host; ++f) {
      SpoolFile file{host,
                     "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab",
                     static_cast<uint64_t>(f),
                     t0 + f * 15'000,
                     {}};
      for (int r = 0; r < kRecordsPerFile; ++r)
        file.records.push_back({"gpu_series", SeriesRecord(rng, host, t0 + f * 15'000 + r * 250)});
      auto encoded = expanse::spool::EncodeSpoolFile(file, {.zstd_level = zstd_level});
      Check(encoded.ok(), "EncodeSpoolFile");
      std::ofstream out(dir + "/" + expanse::spool::SpoolFileName(file.sequence, file.boot_id),
                        std::ios::binary);
      out.write(encoded->data(), static_cast<std::streamsize>(encoded->size()));
      Check(out.good(), "write spool file");
      bytes += encoded->size();
    }
  }
  return bytes;
}

void BM_DrainSpool(benchmark::State& state) {
  const int hosts = static_cast<int>(state.range(0));
  const int files_per_host = static_cast<int>(state.range(1));
  const int zstd_level = static_cast<int>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  for (auto _ : state) {
    const std::string dir = TempDir();
    const std::string root = dir + "/spool";
    Check(::mkdir(root.c_str(), 0750) == 0, "mkdir root");
    const uint64_t bytes = FillSpool(root, hosts, files_per_host, zstd_level);
    // Files arrive spread over a flush interval in production; without this, the drain's
    // first state fsync would wait for the writeback of everything just laid down.
    ::sync();

    expanse::SystemClock clock;
    AggregatorOptions options;
    options.spool_root = root;
    options.state_dir = dir + "/state";
    options.expected_uid = ::geteuid();
    options.threads = static_cast<uint32_t>(threads);
    auto aggregator = Aggregator::Open(options, clock);
    Check(aggregator.ok(), "Aggregator::Open");
    uint64_t records_seen = 0;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ProcessCpuSeconds();
    auto stats = (*aggregator)->DrainOnce([&](const SpoolFile& file) {
      records_seen += file.records.size();
      return expanse::OkStatus();
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
    Check(stats.ok(), "DrainOnce");
    Check(stats->files == static_cast<uint64_t>(hosts) * files_per_host && stats->bad == 0,
          "every file delivered");
    state.SetIterationTime(seconds);
    state.counters["files_per_s"] = static_cast<double>(stats->files) / seconds;
    // CPU time of all drain threads: steadier than wall time on a shared machine.
    state.counters["files_per_cpu_s"] = static_cast<double>(stats->files) / cpu_seconds;
    state.counters["records_per_s"] = static_cast<double>(records_seen) / seconds;
    state.counters["file_MB_per_s"] = static_cast<double>(bytes) / seconds / 1e6;
    state.counters["avg_file_KiB"] = static_cast<double>(bytes) / stats->files / 1024;
    std::printf("%s (%.3f s, %.3f CPU s)\n", expanse::spool::DrainLogLine(*stats).c_str(), seconds,
                cpu_seconds);
    std::filesystem::remove_all(dir);
  }
}
// Args: hosts, files per host, zstd level (0 = stored uncompressed), drain threads.
BENCHMARK(BM_DrainSpool)
    ->Args({1000, 3, 1, 1})
    ->Args({1000, 3, 1, 8})
    ->Args({1000, 3, 0, 8})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
