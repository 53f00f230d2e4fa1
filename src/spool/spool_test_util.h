// Test-only helpers shared by the spool tests: a temporary directory, raw file placement
// and a fixture wiring a writer and an aggregator to one spool under /tmp.
#ifndef EXPANSE_SPOOL_SPOOL_TEST_UTIL_H_
#define EXPANSE_SPOOL_SPOOL_TEST_UTIL_H_

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/clock.h"
#include "core/test_temp_dir.h"
#include "spool/aggregator.h"
#include "spool/spool_file.h"
#include "spool/spool_writer.h"

namespace expanse::spool::testing {

using TempDir = ::expanse::testing::TempDir;

inline void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Sorted names in `dir`, empty when it does not exist.
inline std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline SpoolFile MakeSpoolFile(std::string host, std::string boot_id, uint64_t sequence,
                               int records = 3) {
  SpoolFile file{std::move(host), std::move(boot_id), sequence, 1'700'000'000'000, {}};
  for (int i = 0; i < records; ++i) {
    file.records.push_back(
        {i % 2 ? "job_event" : "gpu_series", R"({"seq":)" + std::to_string(sequence) + R"(,"i":)" +
                                                 std::to_string(i) + R"(,"util":[97,98,99]})"});
  }
  return file;
}

inline std::string EncodeOrDie(const SpoolFile& file, int zstd_level = 3) {
  Result<std::string> bytes = EncodeSpoolFile(file, {.zstd_level = zstd_level});
  if (!bytes.ok())
    std::abort();
  return *bytes;
}

// A spool root, a writer state dir and an aggregator state dir under one temporary
// directory. The clock starts at the real time because stale temporary files are judged by
// their real mtime.
class SpoolTest : public ::testing::Test {
 protected:
  SpoolTest()
      : root_(tmp_.path() + "/spool"),
        writer_state_(tmp_.path() + "/writer-state"),
        aggregator_state_(tmp_.path() + "/aggregator-state"),
        clock_(SystemClock().NowMs()) {
    ::mkdir(root_.c_str(), 0750);
  }

  SpoolWriterOptions WriterOptions(const std::string& host, const std::string& boot_id) {
    SpoolWriterOptions options;
    options.spool_root = root_;
    options.hostname = host;
    options.boot_id = boot_id;
    options.state_dir = writer_state_ + "-" + host;
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    return options;
  }
  std::unique_ptr<SpoolWriter> OpenWriter(const std::string& host,
                                          const std::string& boot_id = "boot-a") {
    Result<std::unique_ptr<SpoolWriter>> writer =
        SpoolWriter::Open(WriterOptions(host, boot_id), clock_);
    EXPECT_TRUE(writer.ok()) << writer.status();
    return writer.ok() ? std::move(writer).value() : nullptr;
  }

  AggregatorOptions DefaultAggregatorOptions() {
    AggregatorOptions options;
    options.spool_root = root_;
    options.state_dir = aggregator_state_;
    options.expected_uid = ::geteuid();
    options.threads = 1;  // deterministic order across hosts; the parallel drain has its own test
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    return options;
  }
  std::unique_ptr<Aggregator> OpenAggregator() {
    return OpenAggregator(DefaultAggregatorOptions());
  }
  std::unique_ptr<Aggregator> OpenAggregator(AggregatorOptions options) {
    Result<std::unique_ptr<Aggregator>> aggregator = Aggregator::Open(std::move(options), clock_);
    EXPECT_TRUE(aggregator.ok()) << aggregator.status();
    return aggregator.ok() ? std::move(aggregator).value() : nullptr;
  }

  std::string HostDir(const std::string& host) { return root_ + "/" + host; }
  // Puts raw bytes at <root>/<host>/<name>, creating the host directory.
  std::string Place(const std::string& host, const std::string& name, std::string_view bytes) {
    ::mkdir(HostDir(host).c_str(), 0750);
    const std::string path = HostDir(host) + "/" + name;
    WriteBytes(path, bytes);
    return path;
  }
  std::vector<std::string> Quarantined() { return ListNames(root_ + "/.quarantine"); }

  // A sink that keeps every file it is given.
  Aggregator::Sink CollectingSink() {
    return [this](const SpoolFile& file) {
      delivered_.push_back(file);
      return OkStatus();
    };
  }

  TempDir tmp_;
  std::string root_;
  std::string writer_state_;
  std::string aggregator_state_;
  ManualClock clock_;
  std::vector<std::string> log_;
  std::vector<SpoolFile> delivered_;
};

}  // namespace expanse::spool::testing

#endif  // EXPANSE_SPOOL_SPOOL_TEST_UTIL_H_
