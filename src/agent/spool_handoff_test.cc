#include "agent/spool_handoff.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "agent/job_events.h"
#include "core/clock.h"
#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace spool_handoff_test {
namespace {

// One flush's worth: a GPU series of a minute of samples, a hook event and a capture window,
// each with the file it came from.
NodeCollection Collection(int n) {
  NodeCollection c;
  wire::SeriesRecord series{"n1", "", "gpu.sm_util", 1'800'000'000'000 + n * 60'000, {}, {}};
  for (int i = 0; i < 60; ++i) {
    series.dt.push_back(i == 0 ? 0 : 1000);
    series.v.push_back(0.5);
  }
  c.series.push_back(series);
  c.events.push_back({"start", std::to_string(100 + n), static_cast<uint32_t>(100 + n), "n1",
                      1'800'000'000'000 + n, "alice", "gpu", "0", "0"});
  c.event_files.push_back("event-" + std::to_string(n));
  wire::CaptureAggregateRecord capture;
  capture.job_id = std::to_string(100 + n);
  capture.host = "n1";
  capture.window_start_ms = 1'800'000'000'000;
  capture.window_end_ms = capture.window_start_ms + 10'000;
  c.captures.push_back(capture);
  c.capture_files.push_back("capture-" + std::to_string(n));
  c.allocations.push_back({.job_id = std::to_string(100 + n),
                           .host = "n1",
                           .gpu_uuid = "GPU-a",
                           .from_ms = 1'800'000'000'000,
                           .to_ms = 1'800'000'000'000 + n});
  return c;
}

class SpoolHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_ / "spool");
    spool::SpoolWriterOptions options;
    options.spool_root = dir_ / "spool";
    options.hostname = "n1";
    options.boot_id = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
    options.state_dir = dir_ / "state";
    options.min_flush_interval_ms = 0;
    options.max_batch_bytes = 64 << 10;  // ~20 collections
    auto writer = spool::SpoolWriter::Open(options, clock_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = std::move(*writer);
    handoff_ = std::make_unique<SpoolHandoff>(
        *writer_,
        SpoolHandoffCallbacks{.commit = [this](const NodeCollection& c) { Note(committed_, c); },
                              .restore = [this](const NodeCollection& c) { Note(restored_, c); }});
  }

  static void Note(std::vector<std::string>& files, const NodeCollection& c) {
    files.insert(files.end(), c.event_files.begin(), c.event_files.end());
    files.insert(files.end(), c.capture_files.begin(), c.capture_files.end());
    for (const wire::GpuAllocationRecord& a : c.allocations)
      files.push_back("allocation-" + a.job_id);
    EXPECT_TRUE(c.series.empty() && c.captures.empty() && c.events.empty())
        << "only file names, stack windows and allocation records are kept";
  }

  testing::TempDir dir_{"spool_handoff_test"};
  ManualClock clock_{1'800'000'000'000};
  std::unique_ptr<spool::SpoolWriter> writer_;
  std::unique_ptr<SpoolHandoff> handoff_;
  std::vector<std::string> committed_, restored_;
};

TEST_F(SpoolHandoffTest, AWrittenFileCommitsWhatItHolds) {
  handoff_->Put(Collection(1));
  handoff_->Put(Collection(2));
  bool wrote = false;
  ASSERT_TRUE(handoff_->Flush(false, &wrote).ok());
  EXPECT_TRUE(wrote);
  EXPECT_EQ(committed_, (std::vector<std::string>{"event-1", "capture-1", "allocation-101",
                                                  "event-2", "capture-2", "allocation-102"}));
  EXPECT_TRUE(restored_.empty());
  EXPECT_EQ(handoff_->pending(), 0u);
}

TEST_F(SpoolHandoffTest, WhileWritesFailNothingGrowsAndWhatTheBatchRefusesIsOfferedAgain) {
  // The host directory goes away under the writer (a shared mount failing): every flush fails
  // and the writer keeps its batch, which fills.
  std::filesystem::remove_all(std::filesystem::path(dir_ / "spool") / "n1");
  size_t pending_after_100 = 0;
  for (int n = 0; n < 500; ++n) {
    handoff_->Put(Collection(n));
    bool wrote = true;
    EXPECT_FALSE(handoff_->Flush(false, &wrote).ok());
    EXPECT_FALSE(wrote);
    if (n == 99)
      pending_after_100 = handoff_->pending();
  }
  EXPECT_GT(writer_->counters().write_errors, 0u);
  EXPECT_GT(writer_->counters().records_dropped_batch_full, 0u);
  // What the full batch refused was handed back, not kept: the collections kept are those the
  // batch holds, however long the outage lasts.
  EXPECT_LT(pending_after_100, 100u);
  EXPECT_EQ(handoff_->pending(), pending_after_100);
  EXPECT_TRUE(committed_.empty());
  ASSERT_FALSE(restored_.empty());
  // An Epilog's close is not derived from its event again: the records go back too.
  EXPECT_EQ(restored_.back(), "allocation-599");
  EXPECT_EQ(restored_[restored_.size() - 2], "capture-499");
  EXPECT_EQ(restored_[restored_.size() - 3], "event-499");
}

// A job's events and the allocations derived from them go together or not at all: with room
// in the batch for the start event alone, neither it nor its opening, nor the job's end, is
// taken (the start taken without its opening would lose the opening for good).
TEST_F(SpoolHandoffTest, AJobsEventsAndAllocationsAreTakenTogetherOrNotAtAll) {
  NodeCollection c;
  c.events.push_back({"start", "7", 7, "n1", 1'800'000'000'000, "alice", "gpu", "0", "0"});
  c.events.push_back({"end", "7", 7, "n1", 1'800'000'060'000, "alice", "gpu", "0", "0"});
  c.event_files = {"start-7", "end-7"};
  c.allocations.push_back(
      {.job_id = "7", .host = "n1", .gpu_uuid = "GPU-a", .from_ms = 1'800'000'000'000});
  c.allocations.push_back({.job_id = "7",
                           .host = "n1",
                           .gpu_uuid = "GPU-a",
                           .from_ms = 1'800'000'000'000,
                           .to_ms = 1'800'000'060'000});
  const size_t start_record =
      9 + std::string("job_event").size() + DumpJson(ToJson(c.events[0])).size();
  const size_t filler = (64 << 10) - (9 + 6) - start_record - 5;  // room for the start only
  ASSERT_TRUE(writer_->Add("filler", std::string(filler, 'x')).ok());
  handoff_->Put(c);
  EXPECT_EQ(restored_, (std::vector<std::string>{"start-7", "end-7", "allocation-7"}));
  bool wrote = false;
  ASSERT_TRUE(handoff_->Flush(false, &wrote).ok());
  EXPECT_TRUE(committed_.empty());
  // Next time, in an empty batch, all of it is taken.
  restored_.clear();
  handoff_->Put(c);
  ASSERT_TRUE(handoff_->Flush(false, &wrote).ok());
  EXPECT_TRUE(restored_.empty());
  EXPECT_EQ(committed_, (std::vector<std::string>{"start-7", "end-7", "allocation-7"}));
}

// More job events than a whole batch holds: the longest run of them that fits goes with every
// allocation record up to its time, so no start goes without its opening; the rest (an opening
// of a later start among them) waits for the next collection.
TEST_F(SpoolHandoffTest, MoreEventsThanABatchHoldsGoARunAtATimeWithTheirRecords) {
  NodeCollection c;
  for (int i = 0; i < 400; ++i) {
    const int64_t at = 1'800'000'000'000 + i * 1000;
    c.events.push_back({"start", std::to_string(1000 + i), static_cast<uint32_t>(1000 + i), "n1",
                        at, "alice", "gpu", "0", "0"});
    c.event_files.push_back("start-" + std::to_string(1000 + i));
    c.allocations.push_back(
        {.job_id = std::to_string(1000 + i), .host = "n1", .gpu_uuid = "GPU-a", .from_ms = at});
  }
  handoff_->Put(c);  // ~100 KB: more than the 64 KiB batch
  bool wrote = false;
  ASSERT_TRUE(handoff_->Flush(false, &wrote).ok());
  ASSERT_TRUE(wrote);
  const size_t sent = committed_.size();
  ASSERT_GT(sent, 0u);
  ASSERT_LT(sent, 400u);
  EXPECT_EQ(committed_.back(), "start-" + std::to_string(1000 + sent - 1));
  EXPECT_EQ(restored_.front(), "start-" + std::to_string(1000 + sent));
  EXPECT_EQ(restored_.size(), 400 - sent);
  // Every start taken went with its opening: the one file written holds two records per start.
  EXPECT_EQ(writer_->counters().files_written, 1u);
  EXPECT_EQ(writer_->counters().records_written, 2 * sent);
}

// Closes kept through a spool outage may fill a batch on their own: they go one by one, in
// order, ahead of the events after them (all of them waited before, for good).
TEST_F(SpoolHandoffTest, ClosesKeptThroughAnOutageGoEvenWhenTheyFillABatchAlone) {
  NodeCollection c;
  for (int i = 0; i < 600; ++i) {
    c.allocations.push_back({.job_id = std::to_string(2000 + i),
                             .host = "n1",
                             .gpu_uuid = "GPU-a",
                             .from_ms = 1'700'000'000'000 + i,
                             .to_ms = 1'700'000'100'000 + i});
  }
  c.events.push_back({"start", "7", 7, "n1", 1'800'000'000'000, "alice", "gpu", "0", "0"});
  c.event_files = {"start-7"};
  c.allocations.push_back(
      {.job_id = "7", .host = "n1", .gpu_uuid = "GPU-b", .from_ms = 1'800'000'000'000});
  handoff_->Put(c);  // ~120 KB of closes: more than the 64 KiB batch
  bool wrote = false;
  ASSERT_TRUE(handoff_->Flush(false, &wrote).ok());
  ASSERT_TRUE(wrote);
  ASSERT_FALSE(committed_.empty());
  EXPECT_EQ(committed_.front(), "allocation-2000");
  EXPECT_EQ(std::count(restored_.begin(), restored_.end(), "start-7"), 1);
}

}  // namespace
}  // namespace spool_handoff_test
}  // namespace expanse::agent
