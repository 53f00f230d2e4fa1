#include "agent/controller_round.h"

#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/job_events.h"
#include "agent/stack_burst_request.h"
#include "core/memory_host.h"
#include "core/test_temp_dir.h"
#include "slurm/slurm_client.h"
#include "spool/spool_writer.h"
#include "wire/json_parse.h"
#include "wire/records.h"

namespace expanse::agent {
namespace controller_round_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// squeue's record of array task 123_4, whose SLURM_JOB_ID (what the hooks see) is 130, running
// on the controller's host with GRES index 0.
constexpr char kSqueue[] = R"json({"jobs": [{
    "job_id": 130,
    "array_job_id": {"set": true, "number": 123},
    "array_task_id": {"set": true, "number": 4},
    "name": "train", "user_name": "ana", "partition": "gpu",
    "job_state": ["RUNNING"], "nodes": "ctl",
    "start_time": {"set": true, "number": 1700000000},
    "gres_detail": ["gpu:1(IDX:0)"],
    "job_resources": {"allocated_nodes": [{"nodename": "ctl"}]}}]})json";

constexpr char kSacctDisabled[] = "sacct: error: Slurm accounting storage is disabled\n";

// The outbox's zstd payload as JSON; null when it is not one.
nlohmann::json Decompress(const std::string& payload) {
  const unsigned long long size = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    return nullptr;
  std::string json(size, '\0');
  const size_t n = ZSTD_decompress(json.data(), json.size(), payload.data(), payload.size());
  if (ZSTD_isError(n))
    return nullptr;
  Result<nlohmann::json> doc = wire::ParseJson(json.substr(0, n), wire::JsonLimits{});
  return doc.ok() ? *doc : nullptr;
}

class ControllerRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two GPUs; GRES index 0 is /dev/nvidia0, GPU-b, unless gres.conf says otherwise.
    const std::string scenario =
        tmp_.Write("scenario.json", R"({"gpus": [{"uuid": "GPU-a", "minor": 1, "sm_util": 50},
                                      {"uuid": "GPU-b", "minor": 0}]})");
    setenv("EXPANSE_FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    node_.hostname = "ctl";
    node_.backend.kind = "nvml";
    node_.backend.nvml_library = std::string(EXPANSE_FAKES_DIR) + "/nvml/libnvidia-ml.so.1";
    node_.events_dir = tmp_ / "events";
    node_.cgroups.cgroup_root = tmp_ / "no-cgroups";
    collector_ = std::make_unique<NodeCollector>(node_, host_.clock());

    outbox::OutboxOptions box;
    box.directory = tmp_ / "outbox";
    box.log = [](std::string_view) {};
    Result<std::unique_ptr<outbox::Outbox>> opened = outbox::Outbox::Open(box, host_.clock());
    ASSERT_TRUE(opened.ok()) << opened.status();
    outbox_ = std::move(*opened);

    std::filesystem::create_directories(tmp_ / "spool");
    spool::AggregatorOptions agg;
    agg.spool_root = tmp_ / "spool";
    agg.state_dir = tmp_ / "aggregator";
    agg.expected_uid = geteuid();
    agg.threads = 1;
    agg.log = [this](std::string_view line) { log_.emplace_back(line); };
    Result<std::unique_ptr<spool::Aggregator>> aggregator =
        spool::Aggregator::Open(agg, host_.clock());
    ASSERT_TRUE(aggregator.ok()) << aggregator.status();
    aggregator_ = std::move(*aggregator);

    options_.hostname = "ctl";
    options_.settings.profiling_agent_enable = false;  // no permission check of real paths
    options_.log = [this](const std::string& line) { log_.push_back(line); };
    Squeue(0, kSqueue);
    host_.OnRun("sacct", [](const std::vector<std::string>&) {
      return MemoryHost::Exit(1, "", kSacctDisabled);
    });
  }
  void TearDown() override { unsetenv("EXPANSE_FAKE_NVML_SCENARIO"); }

  void Squeue(int code, std::string out) {
    host_.OnRun("squeue", [code, out](const std::vector<std::string>&) {
      return MemoryHost::Exit(code, out,
                              code == 0 ? ""
                                        : "slurm_load_jobs error: Unable to "
                                          "contact slurm controller");
    });
  }

  std::unique_ptr<ControllerRound> MakeRound() {
    return std::make_unique<ControllerRound>(options_, host_, *collector_, *outbox_,
                                             aggregator_.get());
  }

  // A worker's spool file with `records` (kind, payload).
  void WorkerFile(const std::string& host,
                  const std::vector<std::pair<std::string, std::string>>& records) {
    spool::SpoolWriterOptions w;
    w.spool_root = tmp_ / "spool";
    w.hostname = host;
    w.boot_id = "boot-1";
    w.state_dir = tmp_ / ("writer-" + host);
    Result<std::unique_ptr<spool::SpoolWriter>> writer = spool::SpoolWriter::Open(w, host_.clock());
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (const auto& [kind, payload] : records)
      ASSERT_TRUE((*writer)->Add(kind, payload).ok()) << kind;
    ASSERT_TRUE((*writer)->Flush(/*force=*/true).ok());
  }

  // Every batch queued so far, oldest first, and what it carried.
  std::vector<nlohmann::json> Batches() {
    std::vector<nlohmann::json> out;
    uint64_t after = 0;
    while (true) {
      Result<std::optional<outbox::OutboxEntry>> entry = outbox_->Peek(after);
      if (!entry.ok() || !entry->has_value())
        break;
      EXPECT_EQ((*entry)->stream, kTelemetryStream);
      out.push_back(Decompress((*entry)->payload));
      after = (*entry)->sequence;
    }
    return out;
  }

  // sacct's answer of `n` completed jobs 500, 501, …, started at `start_s`, the i-th ending at
  // `end_s` + i * `end_step_s` (Unix seconds).
  static std::string EndedJobs(int n, int64_t start_s, int64_t end_s, int64_t end_step_s) {
    std::string answer = R"({"jobs": [)";
    for (int i = 0; i < n; ++i) {
      answer += std::string(i ? "," : "") + R"({"job_id": )" + std::to_string(500 + i) +
                R"(, "name": "j", "user": "ana", "partition": "gpu",
                  "state": {"current": ["COMPLETED"]}, "time": {"start": )" +
                std::to_string(start_s) + R"(, "end": )" + std::to_string(end_s + i * end_step_s) +
                R"(, "submission": )" + std::to_string(start_s - 1000) + "}}";
    }
    return answer + "]}";
  }

  // A Prolog's start event for SLURM_JOB_ID `number`, as a worker's sampler spools it.
  static std::string EventJson(const std::string& number) {
    JobEvent event;
    event.kind = "start";
    event.job_id = number;
    event.slurm_job_id = static_cast<uint32_t>(std::stoul(number));
    event.host = "w1";
    event.at_ms = 1'800'000'000'000;
    event.gpus = "0";
    return ToJson(event).dump();
  }

  expanse::testing::TempDir tmp_{"controller_round"};
  MemoryHost host_;
  NodeCollectorOptions node_;
  std::unique_ptr<NodeCollector> collector_;
  std::unique_ptr<outbox::Outbox> outbox_;
  std::unique_ptr<spool::Aggregator> aggregator_;
  ControllerRoundOptions options_;
  std::vector<std::string> log_;
};

TEST_F(ControllerRoundTest, QueuesThisHostsSamplesAndSlurmsJobsInOneBatch) {
  std::unique_ptr<ControllerRound> round = MakeRound();
  collector_->TickFast();
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());

  ASSERT_EQ(host_.commands().size(), 2u);
  EXPECT_EQ(host_.commands()[0], "squeue --all --json");
  EXPECT_THAT(host_.commands()[1], StartsWith("sacct --json -X --allusers --starttime "));
  const std::vector<nlohmann::json> batches = Batches();
  ASSERT_GE(batches.size(), 1u);
  const nlohmann::json& batch = batches[0];
  ASSERT_TRUE(batch.is_object());
  EXPECT_FALSE(batch["series"].empty());
  ASSERT_EQ(batch["jobs"].size(), 1u);
  EXPECT_EQ(batch["jobs"][0]["job_id"], "123_4");
  EXPECT_EQ(batch["jobs"][0]["observed_ms"], host_.clock().NowMs());

  EXPECT_EQ(report->inventory.gpus.size(), 2u);
  EXPECT_EQ(report->diagnostics["slurm"], "ok");
  EXPECT_EQ(report->diagnostics["sacct"], "accounting disabled");
  EXPECT_EQ(report->diagnostics["round_failures"], 0);
  EXPECT_EQ(report->diagnostics["aggregator"]["files"], 0);
}

// squeue lists a job every round; its record goes out when it changed, and again within five
// minutes (less a per-job share of up to a quarter), not every 10 s with only the time it was
// seen changed.
TEST_F(ControllerRoundTest, AJobsRecordIsSentWhenItChangesAndEveryFiveMinutes) {
  std::unique_ptr<ControllerRound> round = MakeRound();
  size_t queued = 0;
  // The job records of every batch the next round queues, 10 s on.
  auto round_jobs = [&] {
    host_.clock().Advance(10'000);
    collector_->TickFast();
    EXPECT_TRUE(round->Run().has_value());
    const std::vector<nlohmann::json> batches = Batches();
    nlohmann::json jobs = nlohmann::json::array();
    for (size_t i = queued; i < batches.size(); ++i) {
      if (batches[i].contains("jobs"))
        jobs.insert(jobs.end(), batches[i]["jobs"].begin(), batches[i]["jobs"].end());
    }
    EXPECT_GT(batches.size(), queued) << "every round queues this host's samples";
    queued = batches.size();
    return jobs;
  };
  const nlohmann::json first = round_jobs();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["state"], "RUNNING");
  EXPECT_TRUE(round_jobs().empty()) << "the same job again, 10 s later";
  EXPECT_TRUE(round_jobs().empty());

  std::string completing = kSqueue;
  completing.replace(completing.find(R"(["RUNNING"])"), 11, R"(["COMPLETING"])");
  Squeue(0, completing);
  const nlohmann::json changed = round_jobs();
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0]["state"], "COMPLETING");
  const int64_t changed_ms = host_.clock().NowMs();
  EXPECT_EQ(changed[0]["observed_ms"], changed_ms);

  nlohmann::json refreshed = nlohmann::json::array();
  while (refreshed.empty() && host_.clock().NowMs() - changed_ms < 2 * 5 * 60'000)
    refreshed = round_jobs();
  ASSERT_EQ(refreshed.size(), 1u) << "unchanged, but due for its refresh";
  EXPECT_EQ(refreshed[0]["state"], "COMPLETING");
  const int64_t waited_ms = host_.clock().NowMs() - changed_ms;
  EXPECT_GE(waited_ms, JobRecordFilter::kDefaultRefreshMs * 3 / 4);
  EXPECT_LE(waited_ms, JobRecordFilter::kDefaultRefreshMs + 10'000);
}

TEST_F(ControllerRoundTest, WorkerRecordsAreRenamedAndABadOneIsCountedWhileTheRestGoesOn) {
  WorkerFile("w1", {{"job_event", EventJson("130")}, {"gpu_series", "not json"}});
  std::unique_ptr<ControllerRound> round = MakeRound();
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());

  nlohmann::json events = nlohmann::json::array();
  for (const nlohmann::json& batch : Batches()) {
    if (batch.contains("job_events"))
      events.insert(events.end(), batch["job_events"].begin(), batch["job_events"].end());
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["job_id"], "123_4");  // SLURM_JOB_ID 130 is array task 123_4
  EXPECT_EQ(events[0]["host"], "w1");

  EXPECT_EQ(round->bad_worker_records(), 1u);
  EXPECT_EQ(report->diagnostics["bad_worker_records"], 1);
  EXPECT_EQ(report->diagnostics["bad_worker_records_by_host"]["w1"]["records"], 1);
  EXPECT_EQ(report->diagnostics["aggregator"]["files"], 1);
  EXPECT_EQ(report->diagnostics["aggregator"]["bad"], 0);
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("refused 1 record(s) from w1")));
}

// SLURM numbers start again after slurmctld's state is wiped: once squeue lists 130 as a plain
// job, a hook's records for 130 are that job's, not the array task 130 was before.
TEST_F(ControllerRoundTest, ANumberReusedByAPlainJobIsNoLongerRenamed) {
  std::unique_ptr<ControllerRound> round = MakeRound();
  ASSERT_TRUE(round->Run().has_value());
  std::string plain = kSqueue;
  plain.replace(plain.find(R"("array_job_id": {"set": true, "number": 123},)"),
                std::string_view(R"("array_job_id": {"set": true, "number": 123},)").size(), "");
  plain.replace(plain.find(R"("array_task_id": {"set": true, "number": 4},)"),
                std::string_view(R"("array_task_id": {"set": true, "number": 4},)").size(), "");
  Squeue(0, plain);
  ASSERT_TRUE(round->Run().has_value());
  WorkerFile("w1", {{"job_event", EventJson("130")}});
  ASSERT_TRUE(round->Run().has_value());
  nlohmann::json events = nlohmann::json::array();
  for (const nlohmann::json& batch : Batches()) {
    if (batch.contains("job_events"))
      events.insert(events.end(), batch["job_events"].begin(), batch["job_events"].end());
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["job_id"], "130");
}

TEST_F(ControllerRoundTest, AFileWithNoUsableRecordIsRefusedAndOtherHostsGoOn) {
  WorkerFile("w1", {{"gpu_series", "not json"}, {"job_event", "{}"}});
  WorkerFile("w2", {{"job_event", EventJson("77")}});
  std::unique_ptr<ControllerRound> round = MakeRound();
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());

  EXPECT_EQ(report->diagnostics["aggregator"]["files"], 1);  // w2's
  EXPECT_EQ(report->diagnostics["aggregator"]["bad"], 1);    // w1's, quarantined
  EXPECT_EQ(report->diagnostics["bad_worker_records_by_host"]["w1"]["records"], 2);
  bool w2_delivered = false;
  for (const nlohmann::json& batch : Batches()) {
    if (batch.contains("job_events") && batch["job_events"][0]["job_id"] == "77")
      w2_delivered = true;
  }
  EXPECT_TRUE(w2_delivered);
  // Nothing is left for the next round.
  report = round->Run();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->diagnostics["aggregator"]["files"], 0);
  EXPECT_EQ(report->diagnostics["aggregator"]["bad"], 0);
}

TEST_F(ControllerRoundTest, SlurmTroubleIsReportedOnceAndSacctAskedByTheClock) {
  Squeue(1, "");
  std::unique_ptr<ControllerRound> round = MakeRound();
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());
  EXPECT_THAT(report->diagnostics["slurm"].get<std::string>(),
              HasSubstr("Unable to contact slurm controller"));
  report = round->Run();
  ASSERT_TRUE(report.has_value());
  int squeue_lines = 0;
  for (const std::string& line : log_)
    squeue_lines += line.starts_with("squeue: ") ? 1 : 0;
  EXPECT_EQ(squeue_lines, 1);

  // Without accounting, sacct is asked again only after ten minutes.
  auto sacct_runs = [this] {
    int n = 0;
    for (const std::string& command : host_.commands())
      n += command.starts_with("sacct ") ? 1 : 0;
    return n;
  };
  EXPECT_EQ(sacct_runs(), 1);
  host_.clock().Advance(9 * 60 * 1000);
  ASSERT_TRUE(round->Run().has_value());
  EXPECT_EQ(sacct_runs(), 1);
  host_.clock().Advance(60 * 1000);
  ASSERT_TRUE(round->Run().has_value());
  EXPECT_EQ(sacct_runs(), 2);

  Squeue(0, kSqueue);
  report = round->Run();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->diagnostics["slurm"], "ok");
}

// After a restart sacct is asked from where its answers covered before (kept in a file), at
// most two days back: a job that ended while the daemon was down still gets its final record.
TEST_F(ControllerRoundTest, AfterARestartSacctIsAskedFromWhereItStopped) {
  std::vector<std::string> starts;
  auto answering = [&](const std::vector<std::string>& argv) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--starttime")
        starts.push_back(argv[i + 1]);
    }
    return MemoryHost::Exit(0, R"({"jobs": []})", "");
  };
  host_.OnRun("sacct", answering);
  options_.sacct_mark_file = "/state/sacct-covered-to";
  ASSERT_TRUE(host_.MakeDirectories("/state", 0755).ok());
  const int64_t now = host_.clock().NowMs();
  auto starttime = [](int64_t ms) { return slurm::FormatSlurmLocalTime(ms / 1000 - 300); };
  auto first_sacct_after_restart = [&]() {
    starts.clear();
    std::unique_ptr<ControllerRound> round = MakeRound();
    EXPECT_TRUE(round->Run().has_value());
    return starts.empty() ? std::string("none") : starts.front();
  };
  // No mark yet: the last five minutes, as before.
  EXPECT_EQ(first_sacct_after_restart(), starttime(now));
  Result<std::optional<std::string>> mark = host_.ReadFile("/state/sacct-covered-to", 64);
  ASSERT_TRUE(mark.ok() && mark->has_value());
  EXPECT_EQ(**mark, std::to_string(now) + "\n");
  // Down for three hours: asked from the mark.
  host_.clock().Advance(3 * 3600 * 1000);
  EXPECT_EQ(first_sacct_after_restart(), starttime(now));
  // Down for ten days: two days back at most.
  host_.clock().Advance(10LL * 24 * 3600 * 1000);
  EXPECT_EQ(first_sacct_after_restart(), starttime(host_.clock().NowMs() - kMaxSacctCatchUpMs));
  // slurmdbd away for three hours: the window is kept and asked whole once sacct answers.
  host_.clock().Advance(10LL * 24 * 3600 * 1000);
  std::vector<std::string> windows;
  bool timing_out = false;
  host_.OnRun("sacct", [&](const std::vector<std::string>& argv) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--starttime")
        windows.push_back(argv[i + 1]);
    }
    SubprocessResult failed = MemoryHost::Exit(1, "", "sacct: error: slurmdbd: no response");
    failed.timed_out = timing_out;
    return failed;
  });
  {
    std::unique_ptr<ControllerRound> round = MakeRound();
    const int64_t restart = host_.clock().NowMs();
    for (int i = 0; i < 180; ++i) {
      ASSERT_TRUE(round->Run().has_value());
      host_.clock().Advance(60'000);
    }
    ASSERT_GE(windows.size(), 100u);
    EXPECT_EQ(windows.back(), starttime(restart - kMaxSacctCatchUpMs));
    // A catch-up whose answer takes too long (or is too large) is halved at each such failure,
    // down to an hour, instead of failing every minute for good.
    windows.clear();
    timing_out = true;
    const int64_t first = host_.clock().NowMs();
    for (int i = 0; i < 30; ++i) {
      ASSERT_TRUE(round->Run().has_value());
      host_.clock().Advance(60'000);
    }
    ASSERT_GE(windows.size(), 3u);
    EXPECT_EQ(windows[0], starttime(restart - kMaxSacctCatchUpMs));
    EXPECT_EQ(windows[1],
              starttime(restart - kMaxSacctCatchUpMs +
                        (first - kSacctWindowFloorMs - (restart - kMaxSacctCatchUpMs)) / 2));
    EXPECT_GE(windows.back(), starttime(host_.clock().NowMs() - kSacctWindowFloorMs - 5 * 60'000));
  }
  host_.OnRun("sacct", answering);
  // A damaged mark is ignored, and said so.
  ASSERT_TRUE(host_.WriteFile("/state/sacct-covered-to", "soon", 0600, 0, 0).ok());
  host_.clock().Advance(60'000);
  EXPECT_EQ(first_sacct_after_restart(), starttime(host_.clock().NowMs()));
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("is not a past time in ms: ignored")));
}

// A catch-up may answer with more ended jobs than a batch may carry: they go out a share per
// round, every one of them.
TEST_F(ControllerRoundTest, SacctsEndedJobsGoOutAShareAPerRound) {
  const std::string answer = EndedJobs(7, 1700000000, 1700000600, 0);
  host_.OnRun("sacct",
              [&](const std::vector<std::string>&) { return MemoryHost::Exit(0, answer, ""); });
  Squeue(0, R"({"jobs": []})");
  options_.max_accounted_per_round = 3;
  std::unique_ptr<ControllerRound> round = MakeRound();
  std::vector<size_t> per_round;
  size_t seen = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(round->Run().has_value());
    size_t jobs = 0;
    const std::vector<nlohmann::json> batches = Batches();
    for (size_t b = seen; b < batches.size(); ++b)
      jobs += batches[b].value("jobs", nlohmann::json::array()).size();
    seen = batches.size();
    per_round.push_back(jobs);
    host_.clock().Advance(10'000);  // sacct is asked again only after a minute
  }
  EXPECT_EQ(per_round, (std::vector<size_t>{3, 3, 1}));
}

// sacct asked again while rows of its last answer still wait: those are not queued twice.
TEST_F(ControllerRoundTest, AJobWaitingInTheBacklogIsNotAddedAgain) {
  const std::string answer = EndedJobs(7, 1700000000, 1700000600, 0);
  host_.OnRun("sacct",
              [&](const std::vector<std::string>&) { return MemoryHost::Exit(0, answer, ""); });
  Squeue(0, R"({"jobs": []})");
  options_.max_accounted_per_round = 3;
  std::unique_ptr<ControllerRound> round = MakeRound();
  ASSERT_TRUE(round->Run().has_value());  // 500-502 queued, 503-506 wait
  host_.clock().Advance(60'000);          // asked again: 500-502 come back, 503-506 wait already
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(round->Run().has_value());
    host_.clock().Advance(1'000);
  }
  std::map<std::string, int> times_sent;
  for (const nlohmann::json& batch : Batches()) {
    for (const nlohmann::json& job : batch.value("jobs", nlohmann::json::array()))
      ++times_sent[job["job_id"].get<std::string>()];
  }
  EXPECT_EQ(
      times_sent,
      (std::map<std::string, int>{
          {"500", 2}, {"501", 2}, {"502", 2}, {"503", 1}, {"504", 1}, {"505", 1}, {"506", 1}}));
}

// A daemon stopped in the middle of such a catch-up: the saved mark never passes an ended job
// not yet queued, so the restarted daemon asks sacct from there and sends the rest.
TEST_F(ControllerRoundTest, AStoppedCatchUpIsAskedAgainFromItsFirstJobNotQueued) {
  const int64_t now_s = host_.clock().NowMs() / 1000;
  const std::string answer = EndedJobs(7, now_s - 7200, now_s - 3600, 60);
  std::vector<std::string> starts;
  host_.OnRun("sacct", [&](const std::vector<std::string>& argv) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--starttime")
        starts.push_back(argv[i + 1]);
    }
    return MemoryHost::Exit(0, answer, "");
  });
  Squeue(0, R"({"jobs": []})");
  options_.max_accounted_per_round = 3;
  options_.sacct_mark_file = "/state/sacct-covered-to";
  ASSERT_TRUE(host_.MakeDirectories("/state", 0755).ok());
  {
    std::unique_ptr<ControllerRound> round = MakeRound();
    ASSERT_TRUE(round->Run().has_value());  // jobs 500-502 queued, then the daemon stops
  }
  const int64_t first_not_queued_ms = (now_s - 3600 + 3 * 60) * 1000;  // job 503's end
  Result<std::optional<std::string>> mark = host_.ReadFile("/state/sacct-covered-to", 64);
  ASSERT_TRUE(mark.ok() && mark->has_value());
  EXPECT_EQ(**mark, std::to_string(first_not_queued_ms) + "\n");
  starts.clear();
  host_.clock().Advance(60'000);
  std::unique_ptr<ControllerRound> restarted = MakeRound();
  ASSERT_TRUE(restarted->Run().has_value());
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts.front(), slurm::FormatSlurmLocalTime(first_not_queued_ms / 1000 - 300));
  // Once everything is queued the mark is where sacct was last asked.
  for (int i = 0; i < 3; ++i) {
    host_.clock().Advance(10'000);
    ASSERT_TRUE(restarted->Run().has_value());
  }
  mark = host_.ReadFile("/state/sacct-covered-to", 64);
  ASSERT_TRUE(mark.ok() && mark->has_value());
  EXPECT_GT(std::stoll(**mark), (now_s - 3600 + 6 * 60) * 1000);
}

TEST_F(ControllerRoundTest, TheFinalRoundRunsNoSlurmCommandAndFlushesWhatWasSampled) {
  std::unique_ptr<ControllerRound> round = MakeRound();
  collector_->TickFast();
  ASSERT_TRUE(round->Run(/*final=*/true).has_value());
  EXPECT_TRUE(host_.commands().empty());
  const std::vector<nlohmann::json> batches = Batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_FALSE(batches[0]["series"].empty());
  EXPECT_FALSE(batches[0].contains("jobs"));
}

TEST_F(ControllerRoundTest, SlurmAllocationsMapGresIndicesThroughTheHostsGresConf) {
  auto allocated = [this] {
    std::vector<std::string> uuids;
    for (const nlohmann::json& batch : Batches()) {
      if (batch.contains("gpu_allocations")) {
        for (const nlohmann::json& a : batch["gpu_allocations"])
          uuids.push_back(a["gpu_uuid"].get<std::string>());
      }
    }
    return uuids;
  };
  // No gres.conf on the host: squeue's GRES index names no GPU; said once, nothing queued.
  options_.gres_conf_path = "/etc/slurm/gres.conf";
  std::unique_ptr<ControllerRound> round = MakeRound();
  collector_->TickFast();
  ASSERT_TRUE(round->Run().has_value());
  EXPECT_THAT(allocated(), ::testing::IsEmpty());
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("squeue's GPUs of job 123_4 on ctl")));

  // The host's gres.conf says index 0 is /dev/nvidia1: GPU-a (NVML's first, minor 1).
  host_.Put("/etc/slurm/gres.conf", "NodeName=ctl Name=gpu File=/dev/nvidia1\n");
  round = MakeRound();
  ASSERT_TRUE(round->Run().has_value());
  EXPECT_THAT(allocated(), ElementsAre("GPU-a"));
}

// Users choose job names and accounts, and a large job's node list can pass 4 KiB: each field
// is fitted to the server's limits, since one the server refuses would cost the round's batch
// (this host's samples with it).
TEST_F(ControllerRoundTest, SlurmTextIsFittedSoTheServerTakesTheBatch) {
  std::string nodes;
  for (int i = 0; nodes.size() < 5000; ++i)
    nodes += (nodes.empty() ? "" : ",") + std::string("rack") + std::to_string(i) + "-gpu[01-08]";
  nlohmann::json squeue = nlohmann::json::parse(kSqueue);
  squeue["jobs"][0]["name"] = "train\tsweep " + std::string(300, 'x');
  squeue["jobs"][0]["account"] =
      "lab\x01"
      "a";
  squeue["jobs"][0]["nodes"] = nodes;
  Squeue(0, squeue.dump());
  std::unique_ptr<ControllerRound> round = MakeRound();
  collector_->TickFast();
  ASSERT_TRUE(round->Run().has_value());

  const std::vector<nlohmann::json> batches = Batches();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0]["jobs"].size(), 1u);
  EXPECT_FALSE(batches[0]["series"].empty());
  const nlohmann::json& job = batches[0]["jobs"][0];
  Result<wire::JobRecord> taken = wire::DecodeJob(job, "job", "invalid_batch");
  ASSERT_TRUE(taken.ok()) << taken.status();  // as the server decodes it
  EXPECT_EQ(taken->name.size(), wire::kMaxJobNameBytes);
  EXPECT_TRUE(taken->name.starts_with("train?sweep xxx")) << taken->name;
  EXPECT_EQ(taken->account, "lab?a");
  // Cut at the last whole host-list entry that fits: a shorter list, not a broken one.
  ASSERT_LE(taken->nodes.size(), wire::kMaxJobNodesBytes);
  EXPECT_GT(taken->nodes.size(), wire::kMaxJobNodesBytes - 40);
  EXPECT_TRUE(nodes.starts_with(taken->nodes + ","))
      << taken->nodes.substr(taken->nodes.size() - 40);
  EXPECT_TRUE(taken->nodes.ends_with("-gpu[01-08]"));
}

// A worker's health report names its GPUs; one whose UUID the server would refuse costs that
// GPU's allocation, counted against the worker, not every allocation SLURM showed this round.
TEST_F(ControllerRoundTest, AWorkersUnstorableGpuUuidCostsOnlyItsOwnAllocation) {
  Squeue(0, R"json({"jobs": [
    {"job_id": 71, "name": "a", "user_name": "ana", "partition": "gpu", "job_state": ["RUNNING"],
     "nodes": "ctl", "start_time": {"set": true, "number": 1700000000},
     "gres_detail": ["gpu:1(IDX:0)"], "job_resources": {"allocated_nodes": [{"nodename": "ctl"}]}},
    {"job_id": 72, "name": "b", "user_name": "ana", "partition": "gpu", "job_state": ["RUNNING"],
     "nodes": "w1", "start_time": {"set": true, "number": 1700000000},
     "gres_detail": ["gpu:1(IDX:0)"], "job_resources": {"allocated_nodes": [{"nodename": "w1"}]}}]})json");
  spool::SpoolWriterOptions w;
  w.spool_root = tmp_ / "spool";
  w.hostname = "w1";
  w.boot_id = "boot-1";
  w.state_dir = tmp_ / "writer-w1";
  Result<std::unique_ptr<spool::SpoolWriter>> writer = spool::SpoolWriter::Open(w, host_.clock());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const nlohmann::json health = {
      {"inventory",
       {{"gpus", {{{"uuid", "GPU-" + std::string(200, 'f')}, {"index", 0}, {"minor", 0}}}}}}};
  ASSERT_TRUE((*writer)->WriteHealth(health.dump()).ok());
  options_.gres_conf_path = "/etc/slurm/gres.conf";
  host_.Put("/etc/slurm/gres.conf",
            "NodeName=ctl Name=gpu File=/dev/nvidia0\nNodeName=w1 Name=gpu File=/dev/nvidia0\n");

  std::unique_ptr<ControllerRound> round = MakeRound();
  collector_->TickFast();
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());
  std::vector<std::string> allocated;
  for (const nlohmann::json& batch : Batches()) {
    for (const nlohmann::json& a : batch.value("gpu_allocations", nlohmann::json::array())) {
      ASSERT_TRUE(wire::DecodeGpuAllocation(a, "allocation", "invalid_batch").ok()) << a;
      allocated.push_back(a["job_id"].get<std::string>() + "@" + a["host"].get<std::string>());
    }
  }
  EXPECT_THAT(allocated, ElementsAre("71@ctl")) << ::testing::PrintToString(log_);
  EXPECT_EQ(report->diagnostics["bad_worker_records"], 1);
  EXPECT_EQ(report->diagnostics["bad_worker_records_by_host"]["w1"]["records"], 1);
}

// Live detection: a 2-node job whose GPUs spin near idle power past the threshold gets one
// stack burst request per node, all with the same trigger time and nonce, once per episode,
// and a job.live_detected point per node in the upload.
TEST_F(ControllerRoundTest, AStuckJobGetsOneBurstRequestPerNodeOnce) {
  Squeue(0, R"json({"jobs": [{"job_id": 77, "name": "hang", "user_name": "ana",
      "partition": "gpu", "job_state": ["RUNNING"], "nodes": "w[1-2]",
      "start_time": {"set": true, "number": 1700000000}}]})json");
  options_.shared_prefix = "/shared";
  options_.settings.live_stuck_after_s = 30;
  std::unique_ptr<ControllerRound> round = MakeRound();
  const std::string root = "/shared/spool/control";
  auto requests = [&](const std::string& node) {
    Result<std::vector<std::string>> names = host_.ListDirectory(root + "/" + node);
    return names.ok() ? *names : std::vector<std::string>{};
  };
  // One worker flush of 10 one-second samples per node and round.
  auto flush = [&](int round_index, double power) {
    const int64_t t0 = 1'700'000'100'000 + int64_t{round_index} * 10'000;
    for (const std::string node : {"w1", "w2"}) {
      const std::string gpu = "GPU-" + node;
      nlohmann::json series = nlohmann::json::array();
      for (const auto& [device, metric, value] :
           std::vector<std::tuple<std::string, std::string, double>>{
               {gpu, "gpu.sm_util", 100},
               {gpu, "gpu.power_w", power},
               {gpu, "gpu.processes", 1},
               {"job/77", "job.gpu_processes", 1}}) {
        series.push_back({{"host", node},
                          {"device", device},
                          {"metric", metric},
                          {"t0", t0},
                          {"dt", {0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}},
                          {"v", std::vector<double>(10, value)}});
      }
      std::vector<std::pair<std::string, std::string>> records;
      if (round_index == 0) {
        records.emplace_back("gpu_allocation", nlohmann::json{{"job_id", "77"},
                                                              {"host", node},
                                                              {"gpu_uuid", gpu},
                                                              {"gpu_index", 0},
                                                              {"gpu_minor", 0},
                                                              {"from_ms", 1'700'000'000'000},
                                                              {"to_ms", 0},
                                                              {"slurm_job_id", 77}}
                                                   .dump());
      }
      records.emplace_back("gpu_series", series.dump());
      WorkerFile(node, records);
    }
    ASSERT_TRUE(round->Run().has_value());
  };
  flush(0, 450);  // training: the GPUs' own peak power
  for (int i = 1; i <= 3; ++i)
    flush(i, 70);  // 29 s of spinning: not yet
  EXPECT_TRUE(requests("w1").empty());
  flush(4, 70);  // 39 s
  const std::vector<std::string> w1 = requests("w1");
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(requests("w2"), w1);  // the same trigger time and nonce on both nodes
  Result<std::optional<std::string>> bytes = host_.ReadFile(root + "/w1/" + w1[0], 4096);
  ASSERT_TRUE(bytes.ok() && bytes->has_value());
  Result<StackBurstRequest> request = DecodeStackBurstRequest(w1[0], **bytes);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->job_id, "77");
  EXPECT_EQ(request->slurm_job_id, 77);
  EXPECT_EQ(request->reason, "stuck");
  EXPECT_EQ(request->since_ms, 1'700'000'110'000);
  EXPECT_NE(request->trigger_ms % 1000, 0);
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("live detection: job 77 stuck")));

  for (int i = 5; i <= 8; ++i)
    flush(i, 70);  // the same episode: nothing more
  EXPECT_EQ(requests("w1"), w1);
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->diagnostics["live_detection"]["triggers"], 1);
  EXPECT_EQ(report->diagnostics["live_detection"]["bursts_asked"], 2);
  EXPECT_EQ(report->diagnostics["live_detection"]["recent"][0]["hosts"],
            nlohmann::json({"w1", "w2"}));

  std::vector<std::string> marked;
  for (const nlohmann::json& batch : Batches()) {
    for (const nlohmann::json& s : batch.value("series", nlohmann::json::array())) {
      if (s["metric"] == "job.live_detected") {
        EXPECT_EQ(s["device"], "job/77");
        EXPECT_EQ(s["v"][0], 1.0);
        EXPECT_EQ(s["t0"], request->trigger_ms);
        marked.push_back(s["host"]);
      }
    }
  }
  EXPECT_THAT(marked, ElementsAre("w1", "w2"));  // on the job's own hosts, once
}

TEST_F(ControllerRoundTest, LiveDetectionCanBeTurnedOff) {
  options_.settings.live_detection = false;
  std::unique_ptr<ControllerRound> round = MakeRound();
  std::optional<RoundReport> report = round->Run();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->diagnostics["live_detection"], "off");
}

}  // namespace
}  // namespace controller_round_test
}  // namespace expanse::agent
