#include "agent/capture_intake.h"

#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "capture/aggregate_json.h"
#include "capture/capture_trigger.h"
#include "capture/trace_segment.h"
#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace capture_intake_test {
namespace {

using ::expanse::testing::TempDir;

class CaptureIntakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_ / "control/capture");
    options_.control_dir = dir_ / "control";
    options_.hostname = "gpu7";
    options_.segment_dir = dir_ / "control/capture-ready";
    options_.job_uid = [this](const std::string& job) -> std::optional<uid_t> {
      auto it = job_users_.find(job);
      return it == job_users_.end() ? std::nullopt : std::optional<uid_t>(it->second);
    };
    process_.job_id = "4242";
    process_.host = "gpu7";
    process_.pid = 777;
    process_.uid = getuid();
    job_users_["4242"] = getuid();
  }

  std::string Spool(const std::string& name, const std::string& content) {
    const std::string path = dir_ / ("control/capture/" + name);
    std::ofstream(path) << content;
    return path;
  }
  std::string Aggregate(uint64_t end_ms = 1796000010000) {
    capture::WindowSummary w;
    w.start_ms = end_ms - 10000;
    w.end_ms = end_ms;
    w.kernel_count = 3;
    w.kernel_ns = 3000;
    w.top_kernels = {{"gemm", 3, 3000}};
    w.devices = {0};
    return capture::AggregateJson(process_, w);
  }
  std::string Segment(uint64_t start_ms = 1796000000000) {
    capture::TraceSegment segment(process_, {"t-1", 1796000060000, "gpu_idle", {"GPU-a"}},
                                  start_ms);
    capture::Activity kernel;
    kernel.name = "gemm";
    kernel.start_ns = 1796000000100000000;
    kernel.end_ns = 1796000000200000000;
    segment.Add(kernel);
    return segment.ToJson(start_ms + 10000);
  }
  std::vector<std::string> Quarantined() {
    std::vector<std::string> names;
    if (!std::filesystem::exists(dir_ / "control/capture-quarantine"))
      return names;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "control/capture-quarantine"))
      names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  bool InSpool(const std::string& name) {
    return std::filesystem::exists(dir_ / ("control/capture/" + name));
  }

  TempDir dir_;
  CaptureIntakeOptions options_;
  capture::ProcessIdentity process_;
  std::map<std::string, uid_t> job_users_;
  const int64_t now_ms_ = 1796000020000;
};

TEST_F(CaptureIntakeTest, TakesTheAgentsAggregatesAndDeletesThemOnCommit) {
  Spool("agg-4242-gpu7-777-1796000010000.json", Aggregate());
  Spool("agent-4242-gpu7-777.log", "1796000000000 a note\n");
  CaptureIntake intake(options_);
  CaptureScan scan = intake.Scan(now_ms_);
  ASSERT_EQ(scan.aggregates.size(), 1u) << (intake.problems().empty() ? "" : intake.problems()[0]);
  EXPECT_EQ(scan.aggregates[0].job_id, "4242");
  EXPECT_EQ(scan.aggregates[0].top_kernels[0].name, "gemm");
  EXPECT_TRUE(InSpool("agg-4242-gpu7-777-1796000010000.json"));  // until handed on
  intake.Commit(scan);
  EXPECT_FALSE(InSpool("agg-4242-gpu7-777-1796000010000.json"));
  EXPECT_TRUE(InSpool("agent-4242-gpu7-777.log"));
  EXPECT_TRUE(intake.refused().empty());
}

TEST_F(CaptureIntakeTest, NoJobSpeaksForAnotherJobOrHost) {
  Spool("agg-4242-gpu7-777-1.json", Aggregate());
  job_users_["4242"] = getuid() + 1;  // the job belongs to someone else
  CaptureIntake intake(options_);
  EXPECT_TRUE(intake.Scan(now_ms_).aggregates.empty());
  EXPECT_EQ(intake.refused().at("not_the_jobs_user"), 1u);

  job_users_.erase("4242");  // a job this node never ran
  Spool("agg-4242-gpu7-777-2.json", Aggregate());
  EXPECT_TRUE(intake.Scan(now_ms_).aggregates.empty());
  EXPECT_EQ(intake.refused().at("not_the_jobs_user"), 2u);

  job_users_["4242"] = getuid();
  process_.host = "gpu8";
  Spool("agg-4242-gpu8-777-3.json", Aggregate());
  EXPECT_TRUE(intake.Scan(now_ms_).aggregates.empty());
  EXPECT_EQ(intake.refused().at("wrong_host"), 1u);

  process_.host = "gpu7";
  process_.uid = getuid() + 5;  // claims another account than the file's owner
  Spool("agg-4242-gpu7-777-4.json", Aggregate());
  EXPECT_TRUE(intake.Scan(now_ms_).aggregates.empty());
  EXPECT_EQ(intake.refused().at("wrong_owner"), 1u);
  EXPECT_EQ(Quarantined(), (std::vector<std::string>{"agg-4242-gpu7-777-1.json.not_the_jobs_user",
                                                     "agg-4242-gpu7-777-2.json.not_the_jobs_user",
                                                     "agg-4242-gpu7-777-4.json.wrong_owner",
                                                     "agg-4242-gpu8-777-3.json.wrong_host"}));

  // A file named for another job than it holds.
  Spool("agg-4243-gpu7-777-5.json", Aggregate());
  job_users_["4243"] = getuid();
  process_.uid = getuid();
  EXPECT_TRUE(intake.Scan(now_ms_).aggregates.empty());
  EXPECT_EQ(intake.refused().at("wrong_owner"), 2u);
}

TEST_F(CaptureIntakeTest, RefusesWhatIsNotAPlainFileOfItsSize) {
  const std::string real = Spool("agg-4242-real.json", Aggregate());
  ASSERT_EQ(symlink(real.c_str(), (dir_ / "control/capture/agg-4242-link.json").c_str()), 0);
  ASSERT_EQ(link(real.c_str(), (dir_ / "control/capture/agg-4242-hard.json").c_str()), 0);
  ASSERT_EQ(mkfifo((dir_ / "control/capture/agg-4242-fifo.json").c_str(), 0644), 0);
  Spool("agg-4242-big.json", std::string(options_.max_aggregate_bytes + 1, ' '));
  Spool("agg-4242-bad.json", "{\"format\": \"expanse-capture-aggregate/1\"");
  Spool("core.1234", "x");
  CaptureIntake intake(options_);
  const CaptureScan scan = intake.Scan(now_ms_);
  EXPECT_TRUE(scan.aggregates.empty());  // agg-real has two links too
  const auto& refused = intake.refused();
  EXPECT_EQ(refused.at("symlink"), 1u);
  EXPECT_EQ(refused.at("hardlink"), 2u);
  EXPECT_EQ(refused.at("not_regular"), 1u);
  EXPECT_EQ(refused.at("too_large"), 1u);
  EXPECT_EQ(refused.at("bad_aggregate"), 1u);
  EXPECT_EQ(refused.at("unknown_name"), 1u);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "control/capture"));
  // The link was moved, not followed: the file it pointed at went its own way.
  EXPECT_EQ(std::filesystem::symlink_status(dir_ /
                                            "control/capture-quarantine/agg-4242-link.json.symlink")
                .type(),
            std::filesystem::file_type::symlink);
}

TEST_F(CaptureIntakeTest, SegmentsAreCheckedAndMovedForUpload) {
  Spool("seg-4242-gpu7-777-1796000000000.json", Segment());
  Spool("seg-4242-gpu7-777-1.json", "{\"traceEvents\": []}");
  Spool("seg-4242-gpu7-777-2.json", std::string(options_.max_segment_bytes + 1, '['));
  CaptureIntake intake(options_);
  intake.NoteTrigger("4242", "t-1", 1796000060000);  // the trigger Segment() answers
  const CaptureScan scan = intake.Scan(now_ms_);
  ASSERT_EQ(scan.segments.size(), 1u) << intake.problems().front();
  const ReadySegment& s = scan.segments[0];
  EXPECT_EQ(s.job_id, "4242");
  EXPECT_EQ(s.pid, 777);
  EXPECT_EQ(s.trigger_id, "t-1");
  EXPECT_EQ(s.window_start_ms, 1796000000000);
  EXPECT_EQ(s.window_end_ms, 1796000010000);
  EXPECT_EQ(s.path, options_.segment_dir + "/seg-4242-gpu7-777-1796000000000.json");
  EXPECT_TRUE(std::filesystem::exists(s.path));
  EXPECT_EQ(intake.refused().at("bad_segment"), 1u);
  EXPECT_EQ(intake.refused().at("too_large"), 1u);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "control/capture"));
}

TEST_F(CaptureIntakeTest, ReadySegmentsAndTheQuarantineAreBounded) {
  options_.max_quarantine_entries = 1;
  const std::string segment = Segment(1796000000000);
  options_.max_ready_segment_bytes = segment.size() + 10;  // room for one
  Spool("seg-4242-gpu7-777-1796000000000.json", segment);
  Spool("agg-4242-x.json", "not json");
  Spool("agg-4242-y.json", "not json");
  CaptureIntake intake(options_);
  intake.NoteTrigger("4242", "t-1", 1796000060000);
  intake.Scan(now_ms_);
  Spool("seg-4242-gpu7-777-1796000020000.json", Segment(1796000020000));
  intake.Scan(now_ms_);
  EXPECT_EQ(intake.segments_dropped(), 1u);
  // The same segment again (a job re-spooling one) is taken once.
  Spool("seg-4242-gpu7-777-1796000020000.json", Segment(1796000020000));
  intake.Scan(now_ms_);
  EXPECT_EQ(intake.refused().at("duplicate_segment"), 1u);
  size_t ready = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(options_.segment_dir))
    ++ready;
  EXPECT_EQ(ready, 1u);
  EXPECT_EQ(Quarantined(), std::vector<std::string>{"agg-4242-y.json.bad_aggregate"});
  EXPECT_EQ(intake.refused().at("bad_aggregate"), 2u);
}

// A segment must answer a trigger the sampler wrote for its job (in memory, or the job's
// trigger file after a restart), start within its window, and stay within the trigger's
// number of segments and the job's share of the ready directory.
TEST_F(CaptureIntakeTest, SegmentsAnswerATriggerOfTheirJobWithinItsBounds) {
  options_.max_segments_per_trigger = 2;
  CaptureIntake intake(options_);
  Spool("seg-4242-gpu7-777-1796000000000.json", Segment());
  intake.Scan(now_ms_);
  EXPECT_EQ(intake.refused().at("unknown_trigger"), 1u);  // "t-1" was never written for 4242

  // After a restart only the job's trigger file is known.
  std::filesystem::create_directories(dir_ / "control/phase-b");
  std::ofstream(dir_ / "control/phase-b/4242")
      << capture::TriggerJson({"t-1", 1796000060000, "gpu_idle", {"GPU-a"}});
  for (uint64_t start : {1796000000000ull, 1796000001000ull, 1796000002000ull})
    Spool("seg-4242-gpu7-777-" + std::to_string(start) + ".json", Segment(start));
  EXPECT_EQ(intake.Scan(now_ms_).segments.size(), 2u);
  EXPECT_EQ(intake.refused().at("too_many_segments"), 1u);

  CaptureIntake fresh(options_);
  fresh.NoteTrigger("4242", "t-1", 1796000060000);
  Spool("seg-4242-gpu7-777-1795000000000.json", Segment(1795000000000));  // long before
  fresh.Scan(now_ms_);
  EXPECT_EQ(fresh.refused().at("outside_trigger_window"), 1u);

  // The job's share of the ready directory, whatever its triggers.
  options_.max_ready_segment_bytes_per_job = Segment().size() * 2 + 10;  // two are there
  CaptureIntake quota(options_);
  quota.NoteTrigger("4242", "t-1", 1796000060000);
  Spool("seg-4242-gpu7-777-1796000003000.json", Segment(1796000003000));
  EXPECT_TRUE(quota.Scan(now_ms_).segments.empty());
  EXPECT_EQ(quota.refused().at("job_segment_quota"), 1u);
}

// The quarantine keeps the newest refusals (a job cannot keep it full of its own old files) and
// no large file (nor fill the node's disk through it).
TEST_F(CaptureIntakeTest, TheQuarantineKeepsTheNewestSmallRefusals) {
  options_.max_quarantine_entries = 2;
  options_.max_quarantined_file_bytes = 100;
  CaptureIntake intake(options_);
  for (const char* name : {"agg-4242-a.json", "agg-4242-b.json", "agg-4242-c.json"}) {
    Spool(name, "not json");
    intake.Scan(now_ms_);
  }
  Spool("agg-4242-d.json", std::string(1000, '{'));  // refused, and too large to keep
  intake.Scan(now_ms_);
  EXPECT_EQ(Quarantined(), (std::vector<std::string>{"agg-4242-b.json.bad_aggregate",
                                                     "agg-4242-c.json.bad_aggregate"}));
  EXPECT_FALSE(InSpool("agg-4242-d.json"));
  EXPECT_EQ(intake.refused().at("bad_aggregate"), 4u);
}

// Entries refused before a byte is read do not use up the scan's files: directories named like
// aggregates (placed to sort first) cannot keep the agents' files from being read. One that
// cannot be removed (not empty) is refused once, then passed over.
TEST_F(CaptureIntakeTest, EntriesRefusedUnreadDoNotUseUpTheScan) {
  options_.max_files_per_scan = 2;
  for (int i = 0; i < 3; ++i) {
    const std::string dir = "control/capture/agg-4242-!" + std::to_string(i) + ".json";
    std::filesystem::create_directories(dir_ / dir);
    std::ofstream(dir_ / (dir + "/inside")) << "x";
  }
  Spool("agg-4242-gpu7-777-1796000010000.json", Aggregate(1796000010000));
  Spool("agg-4242-gpu7-777-1796000010001.json", Aggregate(1796000010001));
  CaptureIntake intake(options_);
  CaptureScan scan = intake.Scan(now_ms_);
  EXPECT_EQ(scan.aggregates.size(), 2u);
  EXPECT_EQ(intake.refused().at("not_regular"), 3u);
  intake.Commit(scan);
  EXPECT_TRUE(intake.Scan(now_ms_).aggregates.empty());
  EXPECT_EQ(intake.refused().at("not_regular"), 3u);  // not counted again
  EXPECT_TRUE(InSpool("agg-4242-!0.json"));
  // Emptied and then removable, or replaced by a file: judged afresh.
  std::filesystem::remove_all(dir_ / "control/capture/agg-4242-!0.json");
  Spool("agg-4242-!0.json", "not json");
  intake.Scan(now_ms_);
  EXPECT_EQ(intake.refused().at("bad_aggregate"), 1u);
}

// Each job running here gets its turn in a scan whatever another job spools: files are taken
// from the jobs in turn, and names claiming no job here wait behind them.
TEST_F(CaptureIntakeTest, EachJobsFilesTakeTheirTurnWhateverAnotherJobSpools) {
  options_.max_files_per_scan = 4;
  job_users_["123"] = getuid();  // sorts before 4242
  for (int i = 0; i < 50; ++i)   // job 123 floods (its own, valid-looking names)
    Spool("agg-123-gpu7-1-" + std::to_string(1796000000000 + i) + ".json", "not json");
  for (int i = 0; i < 50; ++i)
    Spool("agg-!" + std::to_string(i) + ".json", "x");  // no job
  Spool("agg-4242-gpu7-777-1796000010000.json", Aggregate(1796000010000));
  CaptureIntake intake(options_);
  EXPECT_EQ(intake.Scan(now_ms_).aggregates.size(), 1u);
  EXPECT_EQ(intake.refused().at("bad_aggregate"), 3u);
  EXPECT_FALSE(intake.refused().contains("not_the_jobs_user"));
}

// A flood of other names (a job can make millions) is handled a bounded share per scan, after
// the agents' files, which are never kept waiting behind it.
TEST_F(CaptureIntakeTest, AFloodOfOtherNamesNeitherDelaysAgentsFilesNorTakesAScanWhole) {
  options_.max_entries_per_scan = 10;
  for (int i = 0; i < 50; ++i)
    Spool("!junk-" + std::to_string(100 + i), "x");  // sorts before "agg-"
  Spool("agg-4242-gpu7-777-1796000010000.json", Aggregate(1796000010000));
  CaptureIntake intake(options_);
  EXPECT_EQ(intake.Scan(now_ms_).aggregates.size(), 1u);
  EXPECT_EQ(intake.refused().at("unknown_name"), 9u);
  EXPECT_TRUE(InSpool("!junk-149"));
}

TEST_F(CaptureIntakeTest, AKilledAgentsTemporaryGoesOnceOldAndLogsAfterADay) {
  Spool(".agg-1.json.tmp", "{");
  Spool("agent-4242-gpu7-777.log", "1 a note\n");
  const utimbuf future{4'000'000'000, 4'000'000'000};  // a job cannot make its files look new
  ASSERT_EQ(utime((dir_ / "control/capture/.agg-1.json.tmp").c_str(), &future), 0);
  CaptureIntake intake(options_);
  const int64_t real_now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  intake.Scan(real_now);
  EXPECT_TRUE(InSpool(".agg-1.json.tmp"));
  intake.Scan(real_now + options_.stale_temporary_ms + 2000);
  EXPECT_FALSE(InSpool(".agg-1.json.tmp"));
  EXPECT_TRUE(InSpool("agent-4242-gpu7-777.log"));
  intake.Scan(real_now + 86'402'000);
  EXPECT_FALSE(InSpool("agent-4242-gpu7-777.log"));
  EXPECT_TRUE(intake.refused().empty());
}

TEST_F(CaptureIntakeTest, WorkPerScanIsBounded) {
  options_.max_files_per_scan = 2;
  for (int i = 0; i < 5; ++i)
    Spool("agg-4242-gpu7-777-" + std::to_string(1796000010000 + i) + ".json",
          Aggregate(1796000010000 + i));
  for (int i = 0; i < 3000; ++i)
    Spool(".tmp-" + std::to_string(i), "x");  // never count against the bound
  CaptureIntake intake(options_);
  CaptureScan first = intake.Scan(now_ms_);
  EXPECT_EQ(first.aggregates.size(), 2u);
  intake.Commit(first);
  EXPECT_EQ(intake.Scan(now_ms_).aggregates.size(), 2u);
}

}  // namespace
}  // namespace capture_intake_test
}  // namespace expanse::agent
