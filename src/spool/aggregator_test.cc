#include "spool/aggregator.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "spool/spool_names.h"
#include "spool/spool_test_util.h"

namespace expanse::spool {
namespace {

using ::expanse::spool::testing::EncodeOrDie;
using ::expanse::spool::testing::ListNames;
using ::expanse::spool::testing::MakeSpoolFile;
using ::expanse::spool::testing::ReadBytes;
using ::expanse::spool::testing::WriteBytes;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class AggregatorTest : public testing::SpoolTest {
 protected:
  // Writes `files` spool files of `records` records each through a real writer.
  void WriteFiles(const std::string& host, int files, int records = 2) {
    auto writer = OpenWriter(host);
    ASSERT_NE(writer, nullptr);
    for (int f = 0; f < files; ++f) {
      for (int r = 0; r < records; ++r)
        ASSERT_TRUE(writer->Add("gpu_series", "{\"f\":" + std::to_string(f) + "}").ok());
      ASSERT_TRUE(writer->Flush().ok());
      clock_.Advance(10'000);
    }
  }

  std::vector<std::pair<std::string, uint64_t>> DeliveredIds() const {
    std::vector<std::pair<std::string, uint64_t>> ids;
    for (const SpoolFile& file : delivered_)
      ids.emplace_back(file.host, file.sequence);
    return ids;
  }
};

TEST_F(AggregatorTest, DeliversEveryHostInSequenceOrderAndDeletesAfterwards) {
  WriteFiles("node01", 3);
  WriteFiles("node02", 1, 5);
  uint64_t bytes = 0;
  for (const std::string host : {"node01", "node02"}) {
    for (const std::string& name : ListNames(HostDir(host)))
      bytes += ReadBytes(HostDir(host) + "/" + name).size();
  }
  auto aggregator = OpenAggregator();
  Result<DrainStats> stats = aggregator->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_THAT(DeliveredIds(),
              ElementsAre(std::pair<std::string, uint64_t>{"node01", 1}, std::pair{"node01", 2},
                          std::pair{"node01", 3}, std::pair{"node02", 1}));
  EXPECT_EQ(stats->files, 4u);
  EXPECT_EQ(stats->records, 11u);
  EXPECT_EQ(stats->bytes, bytes);
  EXPECT_EQ(stats->bad, 0u);
  EXPECT_EQ(stats->per_host["node01"].files, 3u);
  EXPECT_EQ(stats->per_host["node02"].records, 5u);
  EXPECT_THAT(ListNames(HostDir("node01")), IsEmpty());
  EXPECT_THAT(ListNames(HostDir("node02")), IsEmpty());
  EXPECT_THAT(log_, Contains("sampler aggregator drained files=4 records=11 bytes=" +
                             std::to_string(bytes) + " bad=0"));
  EXPECT_EQ(DrainLogLine(*stats), log_.back());
}

TEST_F(AggregatorTest, ParallelDrainKeepsEachHostsOrderAndCallsTheSinkOneAtATime) {
  for (int h = 0; h < 12; ++h)
    WriteFiles("node" + std::to_string(h), 4, 1);
  AggregatorOptions options = DefaultAggregatorOptions();
  options.threads = 4;
  options.state_sync_every_files = 5;
  std::atomic<int> in_sink{0};
  std::map<std::string, std::vector<uint64_t>> sequences;
  Result<DrainStats> stats = OpenAggregator(options)->DrainOnce([&](const SpoolFile& file) {
    EXPECT_EQ(in_sink.fetch_add(1), 0);
    sequences[file.host].push_back(file.sequence);
    in_sink.fetch_sub(1);
    return OkStatus();
  });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->files, 48u);
  EXPECT_EQ(stats->per_host.size(), 12u);
  ASSERT_EQ(sequences.size(), 12u);
  for (const auto& [host, seqs] : sequences)
    EXPECT_THAT(seqs, ElementsAre(1, 2, 3, 4)) << host;
  for (int h = 0; h < 12; ++h)
    EXPECT_THAT(ListNames(HostDir("node" + std::to_string(h))), IsEmpty());
}

TEST_F(AggregatorTest, DeletesAFileOnlyAfterTheSinkReturnedOk) {
  WriteFiles("node01", 1);
  const std::string path = HostDir("node01") + "/" + SpoolFileName(1, "boot-a");
  bool present_during_sink = false;
  auto aggregator = OpenAggregator();
  ASSERT_TRUE(aggregator
                  ->DrainOnce([&](const SpoolFile&) {
                    present_during_sink = ::access(path.c_str(), F_OK) == 0;
                    return OkStatus();
                  })
                  .ok());
  EXPECT_TRUE(present_during_sink);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST_F(AggregatorTest, SinkFailureKeepsTheFileForTheNextRound) {
  WriteFiles("node01", 2);
  auto aggregator = OpenAggregator();
  int calls = 0;
  Result<DrainStats> stats = aggregator->DrainOnce([&](const SpoolFile&) {
    ++calls;
    return UnavailableError("outbox full");
  });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(calls, 1);  // the round stops at the first failure
  EXPECT_EQ(stats->files, 0u);
  EXPECT_EQ(stats->sink_status, UnavailableError("outbox full"));
  EXPECT_EQ(ListNames(HostDir("node01")).size(), 2u);
  // A sink that keeps failing is logged when it starts, not every round.
  ASSERT_TRUE(
      aggregator->DrainOnce([](const SpoolFile&) { return UnavailableError("full"); }).ok());
  EXPECT_EQ(std::count_if(log_.begin(), log_.end(),
                          [](const std::string& line) {
                            return line.find("sink refused") != std::string::npos;
                          }),
            1);

  stats = aggregator->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 2u);
  EXPECT_THAT(log_, Contains("spool aggregator: sink accepts files again"));
  EXPECT_THAT(DeliveredIds(),
              ElementsAre(std::pair<std::string, uint64_t>{"node01", 1}, std::pair{"node01", 2}));
}

TEST_F(AggregatorTest, AFileThatReappearsIsNotDeliveredAgainAfterARestart) {
  WriteFiles("node01", 1);
  const std::string path = HostDir("node01") + "/" + SpoolFileName(1, "boot-a");
  const std::string bytes = ReadBytes(path);
  ASSERT_TRUE(OpenAggregator()->DrainOnce(CollectingSink()).ok());
  ASSERT_EQ(delivered_.size(), 1u);

  // As if the delete had failed after the sink took the file, and the controller restarted.
  WriteBytes(path, bytes);
  auto restarted = OpenAggregator();
  Result<DrainStats> stats = restarted->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(delivered_.size(), 1u);
  EXPECT_EQ(stats->duplicates, 1u);
  EXPECT_EQ(stats->files, 0u);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST_F(AggregatorTest, AFileThatShowsUpLateBelowTheHighMarkIsStillDelivered) {
  Place("node01", SpoolFileName(1, "boot-a"), EncodeOrDie(MakeSpoolFile("node01", "boot-a", 1)));
  Place("node01", SpoolFileName(3, "boot-a"), EncodeOrDie(MakeSpoolFile("node01", "boot-a", 3)));
  auto aggregator = OpenAggregator();
  ASSERT_TRUE(aggregator->DrainOnce(CollectingSink()).ok());
  Place("node01", SpoolFileName(2, "boot-a"), EncodeOrDie(MakeSpoolFile("node01", "boot-a", 2)));
  ASSERT_TRUE(aggregator->DrainOnce(CollectingSink()).ok());
  EXPECT_THAT(DeliveredIds(), ElementsAre(std::pair<std::string, uint64_t>{"node01", 1},
                                          std::pair{"node01", 3}, std::pair{"node01", 2}));
}

TEST_F(AggregatorTest, DeliversTheOlderBootFirst) {
  const std::string old_path = Place("node01", SpoolFileName(7, "zz-old"),
                                     EncodeOrDie(MakeSpoolFile("node01", "zz-old", 7)));
  Place("node01", SpoolFileName(1, "aa-new"), EncodeOrDie(MakeSpoolFile("node01", "aa-new", 1)));
  const timespec times[2] = {{1'000'000, 0}, {1'000'000, 0}};  // the old boot's file is older
  ASSERT_EQ(::utimensat(AT_FDCWD, old_path.c_str(), times, 0), 0);
  ASSERT_TRUE(OpenAggregator()->DrainOnce(CollectingSink()).ok());
  ASSERT_EQ(delivered_.size(), 2u);
  EXPECT_EQ(delivered_[0].boot_id, "zz-old");
  EXPECT_EQ(delivered_[1].boot_id, "aa-new");
}

TEST_F(AggregatorTest, IgnoresAWritersTemporaryFileUntilItIsStale) {
  WriteFiles("node01", 1);
  // A writer that crashed mid-write leaves only its temporary name behind.
  const std::string full = EncodeOrDie(MakeSpoolFile("node01", "boot-a", 2));
  const std::string temp = TempFileName(SpoolFileName(2, "boot-a"));
  Place("node01", temp, full.substr(0, full.size() / 2));
  auto aggregator = OpenAggregator();
  Result<DrainStats> stats = aggregator->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->bad, 0u);
  EXPECT_EQ(stats->stale_temps_removed, 0u);
  EXPECT_THAT(ListNames(HostDir("node01")), ElementsAre(temp));

  clock_.Advance(11 * 60 * 1000);
  stats = aggregator->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->stale_temps_removed, 1u);
  EXPECT_THAT(ListNames(HostDir("node01")), IsEmpty());
  EXPECT_EQ(delivered_.size(), 1u);
}

TEST_F(AggregatorTest, ACorruptDeliveryStateIsReplacedNotFatal) {
  ASSERT_EQ(::mkdir(aggregator_state_.c_str(), 0700), 0);
  WriteBytes(aggregator_state_ + "/spool-delivered.state", "not a state file");
  WriteFiles("node01", 1);
  auto aggregator = OpenAggregator();
  ASSERT_NE(aggregator, nullptr);
  EXPECT_THAT(log_, Contains(HasSubstr("starting afresh")));
  ASSERT_TRUE(aggregator->DrainOnce(CollectingSink()).ok());
  EXPECT_EQ(delivered_.size(), 1u);
  EXPECT_THAT(ReadBytes(aggregator_state_ + "/spool-delivered.state"),
              HasSubstr("node01 boot-a 1 "));
}

TEST_F(AggregatorTest, LeavesTheHealthFileAlone) {
  auto writer = OpenWriter("node01");
  ASSERT_TRUE(writer->WriteHealth("{}").ok());
  Result<DrainStats> stats = OpenAggregator()->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bad, 0u);
  EXPECT_THAT(ListNames(HostDir("node01")), ElementsAre("health.rec"));
}

TEST_F(AggregatorTest, CommitsTheStateInBatches) {
  WriteFiles("node01", 5, 1);
  AggregatorOptions options = DefaultAggregatorOptions();
  options.state_sync_every_files = 2;
  Result<DrainStats> stats = OpenAggregator(options)->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 5u);
  EXPECT_THAT(ListNames(HostDir("node01")), IsEmpty());
}

TEST_F(AggregatorTest, OpenNeedsAnExistingSpoolRootAndAStateDir) {
  AggregatorOptions options = DefaultAggregatorOptions();
  options.spool_root = tmp_.path() + "/missing";
  EXPECT_FALSE(Aggregator::Open(options, clock_).ok());
  options = DefaultAggregatorOptions();
  options.state_dir = "";
  EXPECT_EQ(Aggregator::Open(options, clock_).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace expanse::spool
