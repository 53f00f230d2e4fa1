#include "agent/node_collector.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/phase_b_triggers.h"

namespace expanse::agent {
namespace node_collector_test {
namespace {

class NodeCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-collector-XXXXXX";
    dir_ = mkdtemp(dir);
    // Two GPUs whose NVML order is the reverse of their minor numbers.
    std::ofstream(dir_ + "/scenario.json")
        << R"({"gpus": [{"uuid": "GPU-a", "minor": 1, "sm_util": 50},
                        {"uuid": "GPU-b", "minor": 0}]})";
    setenv("EXPANSE_FAKE_NVML_SCENARIO", (dir_ + "/scenario.json").c_str(), 1);
    std::ofstream(dir_ + "/gres.conf") << "NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\n";
    options_.hostname = "n1";
    options_.backend.kind = "nvml";
    options_.backend.nvml_library = std::string(EXPANSE_FAKES_DIR) + "/nvml/libnvidia-ml.so.1";
    options_.events_dir = dir_ + "/events";
    options_.gres_conf_path = dir_ + "/gres.conf";
    options_.allocations_file = dir_ + "/state/open-allocations.json";
    options_.cgroups.cgroup_root = dir_ + "/no-cgroups";
  }
  void TearDown() override {
    unsetenv("EXPANSE_FAKE_NVML_SCENARIO");
    std::filesystem::remove_all(dir_);
  }
  // A job's (7 unless named) Prolog/Epilog event, into `events_dir` ("" = the collector
  // options').
  void Event(const std::string& kind, int64_t at_ms, const std::string& gpus,
             const std::string& events_dir = "", const std::string& job = "7") {
    JobEvent e;
    e.kind = kind;
    e.job_id = job;
    e.slurm_job_id = static_cast<uint32_t>(std::stoul(job));
    e.host = "n1";
    e.at_ms = at_ms;
    e.gpus = gpus;
    ASSERT_TRUE(WriteJobEvent(events_dir.empty() ? options_.events_dir : events_dir, e).ok());
  }
  // Job 7 starts on GPU-a at 50 %, which then goes idle (the fake NVML's 0 %).
  void RunJobWhoseGpuGoesIdle(NodeCollector& collector, const std::string& events_dir,
                              const std::function<void()>& while_busy) {
    collector.TickFast();
    Event("start", clock_.NowMs(), "1", events_dir);  // GRES 1 = /dev/nvidia1 = GPU-a, at 50 %
    collector.Commit(collector.Collect());
    clock_.Advance(1000);
    collector.TickFast();  // busy
    while_busy();
    std::ofstream(dir_ + "/scenario.json.tmp")
        << R"({"gpus": [{"uuid": "GPU-a", "minor": 1, "sm_util": 0}, {"uuid": "GPU-b", "minor": 0}]})";
    std::filesystem::rename(dir_ + "/scenario.json.tmp", dir_ + "/scenario.json");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the fake re-reads its file
    clock_.Advance(1000);
    collector.TickFast();  // idle: escalate
  }
  std::string dir_;
  NodeCollectorOptions options_;
  ManualClock clock_{1'800'000'000'000};
};

TEST_F(NodeCollectorTest, GresIndexMapsThroughMinorNotNvmlIndex) {
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", 1'800'000'000'100, "0");  // GRES 0 = /dev/nvidia0 = GPU-b (NVML index 1)
  NodeCollection c = collector.Collect();
  ASSERT_EQ(c.events.size(), 1u);
  ASSERT_EQ(c.allocations.size(), 1u);
  EXPECT_EQ(c.allocations[0].gpu_uuid, "GPU-b");
  EXPECT_EQ(c.allocations[0].gpu_index, 1);
  EXPECT_EQ(c.allocations[0].gpu_minor, 0);
  EXPECT_FALSE(c.series.empty());
  // Not committed yet: a second collection does not carry the event again.
  EXPECT_TRUE(collector.Collect().events.empty());
  collector.Commit(c);
  EXPECT_TRUE(std::filesystem::is_empty(options_.events_dir));
}

// NVML cannot list GPU-a's processes: the node's processes are unknown, so it sends the GPUs'
// sharing but no process counts (0 would say job 7 runs nothing) and no use view (which would
// call GPU-a allocated_idle). Once they can be listed, both come back.
TEST_F(NodeCollectorTest, ProcessesNvmlCannotListAreSentAsUnknownNotNone) {
  auto scenario = [&](const std::string& gpu_a_extra) {
    std::ofstream(dir_ + "/scenario.json.tmp")
        << R"({"gpus": [{"uuid": "GPU-a", "minor": 1, "sm_util": 50)" + gpu_a_extra +
               R"(}, {"uuid": "GPU-b", "minor": 0}]})";
    std::filesystem::rename(dir_ + "/scenario.json.tmp", dir_ + "/scenario.json");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the fake re-reads its file
  };
  scenario(R"(, "unsupported": ["processes"])");
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", clock_.NowMs(), "1");  // GRES 1 = GPU-a
  auto metrics_of = [](const NodeCollection& c) {
    std::map<std::string, double> latest;  // "<device> <metric>" -> newest value
    for (const wire::SeriesRecord& s : c.series) {
      if (!s.v.empty())
        latest[s.device + " " + s.metric] = s.v.back();
    }
    return latest;
  };
  NodeCollection c = collector.Collect();
  collector.Commit(c);
  std::map<std::string, double> m = metrics_of(c);
  EXPECT_EQ(m["GPU-a gpu.allocated_jobs"], 1);
  EXPECT_FALSE(m.contains("GPU-a gpu.processes"));
  EXPECT_FALSE(m.contains("job/7 job.gpu_processes"));
  EXPECT_TRUE(collector.GpuUse().empty());

  scenario("");
  clock_.Advance(1000);
  collector.TickFast();
  c = collector.Collect();
  m = metrics_of(c);
  EXPECT_EQ(m["GPU-a gpu.processes"], 0);
  EXPECT_EQ(m["job/7 job.gpu_processes"], 0);
  ASSERT_EQ(collector.GpuUse().size(), 2u);
  EXPECT_EQ(collector.GpuUse()[0]["state"], "allocated_idle");
}

// Phase B: a job's GPU going idle asks the job's capture agents on this node for a trace
// window, through the node-local control directory (no counter helper needed).
TEST_F(NodeCollectorTest, AJobsGpuGoingIdleWritesItsPhaseBTrigger) {
  const std::string control = dir_ + "/control";
  ASSERT_TRUE(PrepareCaptureDirectories(control).ok());
  options_.phase_b_control_dir = control;
  std::vector<std::string> logged;
  options_.phase_b_log = [&](const std::string& line) { logged.push_back(line); };
  NodeCollector collector(options_, clock_);
  RunJobWhoseGpuGoesIdle(collector, options_.events_dir,
                         [&] { EXPECT_FALSE(std::filesystem::exists(control + "/phase-b/7")); });
  std::ifstream in(control + "/phase-b/7");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::HasSubstr(R"("reason":"gpu_idle")"));
  EXPECT_THAT(text, ::testing::HasSubstr(R"("gpus":["GPU-a"])"));
  EXPECT_THAT(text,
              ::testing::HasSubstr(R"("until_ms":)" + std::to_string(clock_.NowMs() + 60000)));
  EXPECT_EQ(collector.PhaseBTriggers(), 1u);
  EXPECT_TRUE(logged.empty());
}

// A trigger that cannot be written (here its name is taken by a directory; a full file system
// does the same) is logged once, however often the GPU goes idle again.
TEST_F(NodeCollectorTest, APhaseBTriggerThatCannotBeWrittenIsLoggedOnce) {
  const std::string control = dir_ + "/control";
  ASSERT_TRUE(PrepareCaptureDirectories(control).ok());
  options_.phase_b_control_dir = control;
  std::filesystem::create_directories(control + "/phase-b/7/in-the-way");
  std::vector<std::string> logged;
  options_.phase_b_log = [&](const std::string& line) { logged.push_back(line); };
  const std::string busy = dir_ + "/busy.json";
  std::filesystem::copy_file(dir_ + "/scenario.json", busy);
  NodeCollector collector(options_, clock_);
  RunJobWhoseGpuGoesIdle(collector, options_.events_dir, [] {});
  for (int again = 0; again < 2; ++again) {
    std::filesystem::copy_file(busy, dir_ + "/scenario.json.tmp",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(dir_ + "/scenario.json.tmp", dir_ + "/scenario.json");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    clock_.Advance(61'000);  // past the escalation's window
    collector.TickFast();    // busy again
    std::ofstream(dir_ + "/scenario.json.tmp")
        << R"({"gpus": [{"uuid": "GPU-a", "minor": 1, "sm_util": 0}, {"uuid": "GPU-b", "minor": 0}]})";
    std::filesystem::rename(dir_ + "/scenario.json.tmp", dir_ + "/scenario.json");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    clock_.Advance(1000);
    collector.TickFast();  // idle: escalate again
  }
  EXPECT_EQ(collector.PhaseBTriggers(), 0u);
  ASSERT_EQ(logged.size(), 1u) << ::testing::PrintToString(logged);
  EXPECT_THAT(logged[0], ::testing::HasSubstr("phase B trigger for job 7 not written"));
}

// The directories as the daemon sets them from its settings: the same idle GPU asks the job's
// agents for a trace with escalation on, and none with EXPANSE_PROFILING_ENABLE=0.
TEST_F(NodeCollectorTest, WithEscalationOffAnIdleGpuWritesNoPhaseBTrigger) {
  const std::string busy_scenario = dir_ + "/busy.json";
  std::filesystem::copy_file(dir_ + "/scenario.json", busy_scenario);
  for (const bool escalation : {true, false}) {
    SCOPED_TRACE(escalation ? "escalation on" : "escalation off");
    std::filesystem::copy_file(busy_scenario, dir_ + "/scenario.json",
                               std::filesystem::copy_options::overwrite_existing);
    const std::string control = dir_ + (escalation ? "/control-on" : "/control-off");
    Result<CaptureDirectories> dirs =
        CaptureDirectoriesFor(/*agent_enabled=*/true, escalation, control);
    ASSERT_TRUE(dirs.ok()) << dirs.status();
    NodeCollectorOptions options = options_;
    options.capture_control_dir = dirs->capture_control_dir;
    options.phase_b_control_dir = dirs->phase_b_control_dir;
    options.events_dir = dir_ + (escalation ? "/events-on" : "/events-off");
    options.allocations_file = dir_ + (escalation ? "/state-on" : "/state-off") + "/open.json";
    NodeCollector collector(options, clock_);
    RunJobWhoseGpuGoesIdle(collector, options.events_dir, [] {});
    EXPECT_EQ(collector.PhaseBTriggers(), escalation ? 1u : 0u);
    EXPECT_EQ(std::filesystem::exists(control + "/phase-b/7"), escalation);
  }
}

// The capture agents' spool is read at each collection: a window of a job this node runs, by
// that job's user, is collected and deleted on commit; one of a job the node never started is
// refused.
TEST_F(NodeCollectorTest, CaptureAgentWindowsAreCollectedForTheJobsUser) {
  const std::string control = dir_ + "/control";
  ASSERT_TRUE(PrepareCaptureDirectories(control).ok());
  options_.capture_control_dir = control;
  struct passwd* me = getpwuid(getuid());
  ASSERT_NE(me, nullptr);
  auto aggregate = [&](const std::string& job) {
    const std::string name = "agg-" + job + "-n1-77-1800000010000.json";
    std::ofstream(control + "/capture/" + name)
        << R"({"format":"expanse-capture-aggregate/1","job_id":")" << job
        << R"(","host":"n1","pid":77,"uid":)" << getuid()
        << R"(,"window_start_ms":1800000000000,"window_end_ms":1800000010000,)"
        << R"("kernels":{"count":1,"gpu_ns":9,"top":[{"name":"gemm","count":1,"gpu_ns":9}]}})";
    return control + "/capture/" + name;
  };
  NodeCollector collector(options_, clock_);
  JobEvent start;
  start.kind = "start";
  start.job_id = "7";
  start.slurm_job_id = 7;
  start.host = "n1";
  start.at_ms = clock_.NowMs();
  start.user = me->pw_name;
  ASSERT_TRUE(WriteJobEvent(options_.events_dir, start).ok());
  collector.Commit(collector.Collect());  // the start event: job 7 is this user's
  const std::string mine = aggregate("7");
  const std::string stranger = aggregate("9");
  NodeCollection c = collector.Collect();
  ASSERT_EQ(c.captures.size(), 1u);
  EXPECT_EQ(c.captures[0].job_id, "7");
  EXPECT_EQ(c.captures[0].top_kernels[0].name, "gemm");
  EXPECT_FALSE(c.empty());
  EXPECT_TRUE(std::filesystem::exists(mine));  // until committed
  // Not sent twice while its collection's fate is unknown (a spool write failing); offered
  // again once that collection is restored.
  EXPECT_TRUE(collector.Collect().captures.empty());
  collector.Restore(c);
  c = collector.Collect();
  ASSERT_EQ(c.captures.size(), 1u);
  EXPECT_EQ(c.capture_files, std::vector<std::string>{mine});
  collector.Commit(c);
  EXPECT_FALSE(std::filesystem::exists(mine));
  EXPECT_FALSE(std::filesystem::exists(stranger));  // quarantined
  EXPECT_EQ(collector.CaptureStats()["refused"]["not_the_jobs_user"], 1);
}

// A daemon restarted while a job runs never sees that job's start event (committed before):
// its capture windows are still taken, the job's user read from its cgroup's processes.
TEST_F(NodeCollectorTest, AfterARestartARunningJobsCaptureWindowsAreStillTaken) {
  const std::string control = dir_ + "/control";
  ASSERT_TRUE(PrepareCaptureDirectories(control).ok());
  options_.capture_control_dir = control;
  const std::string job = dir_ + "/cgroup/system.slice/slurmstepd.scope/job_7";
  std::filesystem::create_directories(job + "/step_0/user/task_0");
  std::ofstream(job + "/cpu.stat") << "usage_usec 1\n";
  std::ofstream(job + "/memory.current") << "1\n";
  std::ofstream(job + "/cgroup.procs") << "";
  std::ofstream(job + "/step_0/user/task_0/cgroup.procs") << getpid() << "\n";
  for (const bool cgroup : {false, true}) {
    SCOPED_TRACE(cgroup ? "the job's cgroup is there" : "no cgroup");
    options_.cgroups.cgroup_root = dir_ + (cgroup ? "/cgroup" : "/no-cgroups");
    const std::string name = "agg-7-n1-77-1800000010000.json";
    std::ofstream(control + "/capture/" + name)
        << R"({"format":"expanse-capture-aggregate/1","job_id":"7","host":"n1","pid":77,"uid":)"
        << getuid() << R"(,"window_start_ms":1800000000000,"window_end_ms":1800000010000,)"
        << R"("kernels":{"count":1,"gpu_ns":9,"top":[{"name":"gemm","count":1,"gpu_ns":9}]}})";
    NodeCollector collector(options_, clock_);
    collector.TickFast();
    const NodeCollection c = collector.Collect();
    EXPECT_EQ(c.captures.size(), cgroup ? 1u : 0u) << collector.CaptureStats().dump();
    EXPECT_EQ(collector.CaptureStats()["refused"].value("not_the_jobs_user", 0), cgroup ? 0 : 1);
  }
  // "07" is not job 7's number, though it reads as 7: the job's user may not spool under it
  // (the server keeps job ids as text, and would make a job of it).
  std::ofstream(control + "/capture/agg-07-n1-77-1800000010000.json")
      << R"({"format":"expanse-capture-aggregate/1","job_id":"07","host":"n1","pid":77,"uid":)"
      << getuid() << R"(,"window_start_ms":1800000000000,"window_end_ms":1800000010000,)"
      << R"("kernels":{"count":1,"gpu_ns":9,"top":[{"name":"gemm","count":1,"gpu_ns":9}]}})";
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  for (const wire::CaptureAggregateRecord& taken : collector.Collect().captures)
    EXPECT_EQ(taken.job_id, "7");  // the file above, not committed: taken again
  EXPECT_EQ(collector.CaptureStats()["refused"].value("not_the_jobs_user", 0), 1);
}

TEST_F(NodeCollectorTest, RestoredCollectionIsCollectedAgain) {
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", 1'800'000'000'100, "1");
  NodeCollection c = collector.Collect();
  ASSERT_EQ(c.events.size(), 1u);
  const size_t samples = c.samples;
  collector.Restore(c);
  NodeCollection again = collector.Collect();
  EXPECT_EQ(again.events.size(), 1u);
  EXPECT_EQ(again.samples, samples);
}

// An Epilog's close is derived from the open allocation, which it ends: when its collection
// cannot be handed on, the record itself is sent again (its event read again derives nothing).
TEST_F(NodeCollectorTest, AnEpilogsCloseSurvivesARestoredCollection) {
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", 1'800'000'000'100, "1");
  collector.Commit(collector.Collect());
  Event("end", 1'800'000'005'000, "");
  NodeCollection c = collector.Collect();
  ASSERT_EQ(c.allocations.size(), 1u);
  // However many hand-offs fail, the close is sent once per collection.
  for (int i = 0; i < 5; ++i) {
    collector.Restore(c);
    c = collector.Collect();
    ASSERT_EQ(c.allocations.size(), 1u) << i;
    EXPECT_EQ(c.allocations[0].to_ms, 1'800'000'005'000);
    EXPECT_EQ(c.events.size(), 1u);
  }
  // A start event's opening is derived again from its event, so it is not kept as well.
  collector.Restore(c);
  Event("start", 1'800'000'006'000, "1", "", "8");
  NodeCollection both = collector.Collect();
  ASSERT_EQ(both.allocations.size(), 2u);
  for (int i = 0; i < 3; ++i) {
    collector.Restore(both);
    both = collector.Collect();
    ASSERT_EQ(both.allocations.size(), 2u) << i;
  }
  NodeCollection again = both;
  collector.Commit(again);
  EXPECT_TRUE(collector.Collect().allocations.empty());
}

// The daemon stops (or is killed) after a collection took a close and before it was handed
// on: the Epilog's event is read again after the restart but derives nothing (it names no GPU,
// and its open allocation is gone), so the close comes from unsent-closes.json, once.
TEST_F(NodeCollectorTest, ACloseNotHandedOnWhenTheDaemonStopsIsSentAfterTheRestart) {
  {
    NodeCollector collector(options_, clock_);
    collector.TickFast();
    Event("start", 1'800'000'000'100, "1");
    collector.Commit(collector.Collect());
    Event("end", 1'800'000'060'000, "");  // an Epilog whose environment names no GPU
    const NodeCollection taken = collector.Collect();
    ASSERT_EQ(taken.allocations.size(), 1u);
    EXPECT_EQ(taken.allocations[0].to_ms, 1'800'000'060'000);
  }  // stopped before the hand-off: neither Commit nor Restore
  NodeCollector restarted(options_, clock_);
  restarted.TickFast();
  NodeCollection c = restarted.Collect();
  ASSERT_EQ(c.allocations.size(), 1u);
  EXPECT_EQ(c.allocations[0].gpu_uuid, "GPU-a");
  EXPECT_EQ(c.allocations[0].from_ms, 1'800'000'000'100);
  EXPECT_EQ(c.allocations[0].to_ms, 1'800'000'060'000);
  restarted.Commit(c);
  NodeCollector again(options_, clock_);
  again.TickFast();
  EXPECT_TRUE(again.Collect().allocations.empty());  // handed on: not kept any more
}

// The Epilog names fewer GPUs than the Prolog opened (here GRES 0 is gone from its list, as when
// NVML no longer lists a GPU that fell off the bus): every allocation of the job is closed.
TEST_F(NodeCollectorTest, AnEpilogNamingFewerGpusClosesEveryAllocationOfTheJob) {
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", 1'800'000'000'100, "0,1");
  NodeCollection opened = collector.Collect();
  ASSERT_EQ(opened.allocations.size(), 2u);
  collector.Commit(opened);
  Event("end", 1'800'000'060'000, "1");
  NodeCollection closed = collector.Collect();
  std::map<std::string, std::pair<int64_t, int64_t>> by_gpu;
  for (const wire::GpuAllocationRecord& a : closed.allocations)
    by_gpu[a.gpu_uuid] = {a.from_ms, a.to_ms};
  EXPECT_EQ(by_gpu["GPU-a"].second, 1'800'000'060'000);
  EXPECT_EQ(by_gpu["GPU-b"].first, 1'800'000'000'100);
  EXPECT_EQ(by_gpu["GPU-b"].second, 1'800'000'060'000);
}

TEST_F(NodeCollectorTest, EpilogAfterRestartClosesTheSavedAllocation) {
  {
    NodeCollector collector(options_, clock_);
    collector.TickFast();
    Event("start", 1'800'000'000'100, "1");  // GRES 1 = /dev/nvidia1 = GPU-a
    NodeCollection c = collector.Collect();
    collector.Commit(c);
  }
  NodeCollector restarted(options_, clock_);
  restarted.TickFast();
  Event("end", 1'800'000'005'000, "");  // this Epilog's environment names no GPU
  NodeCollection c = restarted.Collect();
  ASSERT_EQ(c.allocations.size(), 1u);
  EXPECT_EQ(c.allocations[0].gpu_uuid, "GPU-a");
  EXPECT_EQ(c.allocations[0].to_ms, 1'800'000'005'000);
  EXPECT_EQ(c.allocations[0].from_ms, 1'800'000'000'100);
}

// The saved allocations are read like any outside JSON: a damaged entry (a hand edit, a file
// from another version) is dropped and reported, and the good ones still close at the Epilog.
TEST_F(NodeCollectorTest, DamagedSavedAllocationsAreDroppedAndReported) {
  std::filesystem::create_directories(dir_ + "/state");
  std::ofstream(options_.allocations_file) << R"({
      "n1/7": [{"job_id": "7", "host": "n1", "gpu_uuid": "GPU-a", "from_ms": 100},
               {"job_id": 7, "host": "n1", "gpu_uuid": "GPU-b", "from_ms": 100}],
      "n1/8": "not a list"})";
  NodeCollector collector(options_, clock_);
  const std::vector<std::string> problems = collector.TakeProblems();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("n1/7[1].job_id must be a string"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("n1/8 must be an array"), std::string::npos) << problems[1];
  collector.TickFast();
  Event("end", 1'800'000'005'000, "");
  NodeCollection c = collector.Collect();
  ASSERT_EQ(c.allocations.size(), 1u);
  EXPECT_EQ(c.allocations[0].gpu_uuid, "GPU-a");
  EXPECT_EQ(c.allocations[0].to_ms, 1'800'000'005'000);
}

// A job whose Epilog never ran (the node crashed in it) is still open in the saved allocations
// after the restart. It started before this boot, so when its GPU goes to a new job it is
// closed, cgroups or not; a job whose GPU was given to no one stays open.
TEST_F(NodeCollectorTest, AJobLeftOpenByACrashIsClosedWhenItsGpuIsGivenAgain) {
  std::ofstream(dir_ + "/stat") << "cpu 1 0 1 10 0 0 0 0\nbtime 1700000000\n";
  options_.cgroups.proc_stat = dir_ + "/stat";
  const std::string other = dir_ + "/cgroup/system.slice/slurmstepd.scope/job_99";
  std::filesystem::create_directories(other);
  std::ofstream(other + "/cpu.stat") << "usage_usec 1\n";
  std::ofstream(other + "/memory.current") << "1\n";
  for (const bool cgroups : {false, true}) {
    SCOPED_TRACE(cgroups ? "job cgroups here" : "no job cgroups here");
    options_.cgroups.cgroup_root = dir_ + (cgroups ? "/cgroup" : "/no-cgroups");
    std::filesystem::remove_all(options_.events_dir);
    std::filesystem::create_directories(dir_ + "/state");
    std::ofstream(options_.allocations_file) << R"({
        "n1/5": [{"job_id": "5", "host": "n1", "gpu_uuid": "GPU-a", "from_ms": 100,
                  "slurm_job_id": 5}],
        "n1/6": [{"job_id": "6", "host": "n1", "gpu_uuid": "GPU-b", "from_ms": 100,
                  "slurm_job_id": 6}]})";
    NodeCollector collector(options_, clock_);
    collector.TickFast();
    Event("start", 1'800'000'000'100, "1");  // job 7 gets GRES 1 = GPU-a
    const NodeCollection c = collector.Collect();
    std::map<std::string, int64_t> closed;
    for (const wire::GpuAllocationRecord& a : c.allocations) {
      if (a.job_id != "7")
        closed[a.job_id] = a.to_ms;
    }
    EXPECT_EQ(closed, (std::map<std::string, int64_t>{{"5", 1'800'000'000'100}}));
  }
}

// Jobs of this boot without a cgroup are not known to have ended: a job's cgroup appears only
// with its first step, and jobs share GPUs (gres/shard). A job that had a cgroup and lost it
// has ended; one whose cgroup is still there is running.
TEST_F(NodeCollectorTest, OnlyAJobWhoseCgroupIsGoneIsClosedWhenItsGpuIsGivenAgain) {
  std::ofstream(dir_ + "/stat") << "cpu 1 0 1 10 0 0 0 0\nbtime 1700000000\n";
  options_.cgroups.proc_stat = dir_ + "/stat";
  options_.cgroups.cgroup_root = dir_ + "/cgroup";
  options_.cgroups.rescan_every = 1;
  auto job_cgroup = [&](int job) {
    const std::string path =
        dir_ + "/cgroup/system.slice/slurmstepd.scope/job_" + std::to_string(job);
    std::filesystem::create_directories(path);
    std::ofstream(path + "/cpu.stat") << "usage_usec 1\n";
    std::ofstream(path + "/memory.current") << "1\n";
    return path;
  };
  job_cgroup(99);  // another job: cgroups are seen here
  NodeCollector collector(options_, clock_);
  double gpu_a_jobs = -1;  // the newest gpu.allocated_jobs of GPU-a
  auto note_jobs = [&](const NodeCollection& c) {
    for (const wire::SeriesRecord& s : c.series) {
      if (s.device == "GPU-a" && s.metric == "gpu.allocated_jobs" && !s.v.empty())
        gpu_a_jobs = s.v.back();
    }
  };
  auto start = [&](const std::string& job, const std::string& gpus) {
    Event("start", clock_.NowMs(), gpus, "", job);
    collector.TickFast();
    NodeCollection c = collector.Collect();
    note_jobs(c);
    collector.Commit(c);
    std::set<std::string> closed;
    for (const wire::GpuAllocationRecord& a : c.allocations) {
      if (a.job_id != job && a.to_ms != 0)
        closed.insert(a.job_id);
    }
    clock_.Advance(1000);
    return closed;
  };
  EXPECT_TRUE(start("10", "1").empty());
  EXPECT_EQ(gpu_a_jobs, 1);
  // Job 11 shares GPU-a (GRES 1) while job 10 has not got its cgroup yet: both stay open.
  EXPECT_TRUE(start("11", "1").empty());
  EXPECT_EQ(gpu_a_jobs, 2);
  // Job 10's cgroup comes; job 12 shares the GPU while it runs: still open.
  const std::string ten = job_cgroup(10);
  collector.TickFast();
  collector.Collect();
  EXPECT_TRUE(start("12", "1").empty());
  EXPECT_EQ(gpu_a_jobs, 3);
  // Job 10's cgroup goes without an Epilog. It still counts as sharing the GPU (an salloc's
  // cgroup may go between two steps), but the next job given its GPU closes it. Job 11 never
  // had a cgroup and is left.
  std::filesystem::remove_all(ten);
  collector.TickFast();
  NodeCollection after = collector.Collect();
  note_jobs(after);
  collector.Commit(after);
  EXPECT_EQ(gpu_a_jobs, 3);
  EXPECT_EQ(start("13", "1"), (std::set<std::string>{"10"}));
  EXPECT_EQ(gpu_a_jobs, 3);  // 11, 12, 13
}

// A job requeued after a crash starts here again with its first run still open: the first run
// is closed at the new start, before the new run opens (in that order: the server replaces an
// ended run on a GPU held again).
TEST_F(NodeCollectorTest, ARequeuedJobsFirstRunIsClosedBeforeTheNewRunOpens) {
  std::filesystem::create_directories(dir_ + "/state");
  std::ofstream(options_.allocations_file) << R"({
      "n1/7": [{"job_id": "7", "host": "n1", "gpu_uuid": "GPU-a", "from_ms": 100,
                "slurm_job_id": 7},
               {"job_id": "7", "host": "n1", "gpu_uuid": "GPU-b", "from_ms": 100,
                "slurm_job_id": 7}]})";
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", 1'800'000'000'100, "1");  // this run holds GRES 1 = GPU-a only
  const NodeCollection c = collector.Collect();
  auto describe = [](const NodeCollection& collection) {
    std::vector<std::string> records;
    for (const wire::GpuAllocationRecord& a : collection.allocations)
      records.push_back(a.gpu_uuid + "[" + std::to_string(a.from_ms) + "," +
                        std::to_string(a.to_ms) + ")");
    return records;
  };
  EXPECT_EQ(describe(c),
            (std::vector<std::string>{"GPU-a[100,1800000000100)", "GPU-b[100,1800000000100)",
                                      "GPU-a[1800000000100,0)"}));
  EXPECT_THAT(collector.TakeProblems(),
              ::testing::Contains(::testing::HasSubstr("job 7 started here again")));
  // The collection could not be handed on: its closes are sent again, first, and its start
  // event read again is no new run (it only opens the run again).
  collector.Restore(c);
  const NodeCollection again = collector.Collect();
  EXPECT_EQ(describe(again),
            (std::vector<std::string>{"GPU-a[100,1800000000100)", "GPU-b[100,1800000000100)",
                                      "GPU-a[1800000000100,0)"}));
  collector.Commit(again);
  // Its Epilog closes what this run holds, never before it opened.
  Event("end", 50, "");
  const NodeCollection end = collector.Collect();
  ASSERT_EQ(end.allocations.size(), 1u);
  EXPECT_EQ(end.allocations[0].gpu_uuid, "GPU-a");
  EXPECT_EQ(end.allocations[0].to_ms, 1'800'000'000'100);
}

// A requeued run's start and its end in a hand-off that failed: sent again, the first run's
// close, the new run's opening and its end's close go in that order (the kept closes no longer
// come first), which is what makes the server start a new run rather than widen the first.
TEST_F(NodeCollectorTest, ARequeuedRunsRecordsSentAgainKeepTheirOrder) {
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", 100, "1");
  collector.Commit(collector.Collect());
  Event("start", 1'800'000'000'100, "1");  // requeued: no Epilog closed the first run
  Event("end", 1'800'000'060'000, "1");
  collector.Restore(collector.Collect());
  std::vector<std::pair<int64_t, int64_t>> sent;
  for (const wire::GpuAllocationRecord& a : collector.Collect().allocations)
    sent.emplace_back(a.from_ms, a.to_ms);
  ASSERT_GE(sent.size(), 3u);
  EXPECT_EQ(sent[0], (std::pair<int64_t, int64_t>(100, 1'800'000'000'100)));
  EXPECT_EQ(sent[1], (std::pair<int64_t, int64_t>(1'800'000'000'100, 0)));
  for (size_t i = 2; i < sent.size(); ++i)
    EXPECT_EQ(sent[i], (std::pair<int64_t, int64_t>(1'800'000'060'000, 1'800'000'060'000)));
}

TEST_F(NodeCollectorTest, RestoredSeriesAreRebuiltSampleForSample) {
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  clock_.Advance(1000);
  collector.TickFast();
  NodeCollection c = collector.Collect();
  ASSERT_FALSE(c.series.empty());
  collector.Restore(c);
  NodeCollection again = collector.Collect();
  ASSERT_EQ(again.series.size(), c.series.size());
  for (size_t i = 0; i < c.series.size(); ++i) {
    EXPECT_EQ(again.series[i].host, c.series[i].host);
    EXPECT_EQ(again.series[i].device, c.series[i].device);
    EXPECT_EQ(again.series[i].metric, c.series[i].metric);
    EXPECT_EQ(again.series[i].t0, c.series[i].t0);
    EXPECT_EQ(again.series[i].dt, c.series[i].dt);
    EXPECT_EQ(again.series[i].v, c.series[i].v);
  }
}

TEST_F(NodeCollectorTest, BadGresConfIsReported) {
  std::ofstream(dir_ + "/gres.conf") << "NodeName=n1 Name=gpu File=/dev/sda\n";
  NodeCollector collector(options_, clock_);
  const std::vector<std::string> problems = collector.TakeProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], ::testing::HasSubstr("gres.conf"));
}

// A job's process starts Nsight Compute: the counter helper is told to let the job's GPU go at
// the next fast tick, from the process's environment in the job's cgroup, before NVML lists the
// process (it has no CUDA context yet); the GPU is taken back once the process is gone.
TEST_F(NodeCollectorTest, AJobStartingAnotherCudaToolHasItsGpusCountersLetGo) {
  const std::string uuid = "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10";
  std::ofstream(dir_ + "/scenario.json")
      << R"({"gpus": [{"uuid": ")" << uuid << R"(", "minor": 1, "sm_util": 50},
                      {"uuid": "GPU-b", "minor": 0}]})";
  const std::string job_dir = dir_ + "/cgroup/system.slice/slurmstepd.scope/job_7";
  std::filesystem::create_directories(job_dir);
  std::ofstream(job_dir + "/cpu.stat") << "usage_usec 1\n";
  std::ofstream(job_dir + "/memory.current") << "1\n";
  std::ofstream(job_dir + "/cgroup.procs") << "";
  options_.cgroups.cgroup_root = dir_ + "/cgroup";
  options_.attribution.proc_root = dir_ + "/proc";
  std::filesystem::create_directories(dir_ + "/proc/4242");
  std::ofstream(dir_ + "/proc/4242/environ", std::ios::binary)
      << "SLURM_JOB_ID=7" << '\0'
      << "CUDA_INJECTION64_PATH=/opt/nvidia/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/"
         "libTargetInjection64.so"
      << '\0';
  CounterHelperOptions counters;
  counters.helper = dir_ + "/no-helper";  // what is held does not need the helper running
  counters.hostname = "n1";
  options_.counters = counters;
  NodeCollector collector(options_, clock_);
  collector.TickFast();
  Event("start", clock_.NowMs(), "1");  // GRES 1 = /dev/nvidia1 = the GPU above
  collector.Commit(collector.Collect());
  clock_.Advance(1000);
  collector.TickFast();
  EXPECT_EQ(collector.CuptiStats()["held"], nlohmann::json::array());  // no process yet

  std::ofstream(job_dir + "/cgroup.procs") << "4242\n";  // `srun ncu python train.py`
  clock_.Advance(1000);
  collector.TickFast();
  EXPECT_EQ(collector.CuptiStats()["held"], nlohmann::json::array({uuid}));
  collector.Commit(collector.Collect());  // NVML lists no tool: the hold stays
  EXPECT_EQ(collector.CuptiStats()["held"], nlohmann::json::array({uuid}));

  std::ofstream(job_dir + "/cgroup.procs") << "";  // the profiled process ended
  clock_.Advance(1000);
  collector.TickFast();
  EXPECT_EQ(collector.CuptiStats()["held"], nlohmann::json::array());
}

#ifdef EXPANSE_CUPTI_HELPER
// The node's collector with the real counter helper, both GPU libraries faked: NVML series and
// CUPTI counters land in one collection, keyed by the same GPU UUID, and a job's GPU going idle
// escalates that GPU to the Rich set.
TEST_F(NodeCollectorTest, CountersFromTheHelperJoinTheNvmlSeries) {
  const std::string uuid = "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10";
  auto nvml = [&](int sm_util) {
    std::ofstream(dir_ + "/scenario.json.tmp")
        << R"({"gpus": [{"uuid": ")" << uuid << R"(", "minor": 0, "sm_util": )" << sm_util << "}]}";
    std::filesystem::rename(dir_ + "/scenario.json.tmp", dir_ + "/scenario.json");
  };
  nvml(90);
  std::ofstream(dir_ + "/cupti.json") << R"({"devices": [{"uuid": ")" << uuid << R"(",
      "metrics": {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed": 40.0,
                  "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed": 3.0}}]})";
  setenv("EXPANSE_FAKE_CUPTI_SCENARIO", (dir_ + "/cupti.json").c_str(), 1);
  const std::string fakes = std::string(EXPANSE_FAKES_DIR) + "/cupti";
  CounterHelperOptions counters;
  counters.helper = EXPANSE_CUPTI_HELPER;
  counters.hostname = "n1";
  counters.period = std::chrono::milliseconds(100);
  counters.extra_args = {"--libcuda=" + fakes + "/libcuda.so.1",
                         "--libcupti=" + fakes + "/libcupti.so.13"};
  options_.counters = counters;
  // The helper stamps records with the real time.
  ManualClock clock(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count());
  NodeCollector collector(options_, clock);
  auto collect_until = [&](const std::string& metric) {
    for (int i = 0; i < 500; ++i) {
      clock.Set(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count());
      collector.TickFast();
      for (const auto& series : collector.Collect().series) {
        if (series.metric == metric && series.device == uuid)
          return series.v.back();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(collect_until("gpu.sm_active"), 0.4);
  EXPECT_EQ(collector.CuptiCapability()->state, "ok");
  EXPECT_EQ(collector.CuptiStats()["gpus"][uuid]["pm_sampling"], "ok");

  // A job holds the GPU and it goes idle: the helper samples the Rich set for a while.
  clock.Advance(1000);
  Event("start", clock.NowMs(), "0");
  collector.TickFast();
  collector.Collect();
  collector.TickFast();  // the allocated GPU seen busy
  nvml(0);
  EXPECT_DOUBLE_EQ(collect_until("gpu.fma_pipe_utilization"), 0.03);
  EXPECT_EQ(collector.CuptiStats()["escalations"], 1);
  unsetenv("EXPANSE_FAKE_CUPTI_SCENARIO");
}
#endif

}  // namespace
}  // namespace node_collector_test
}  // namespace expanse::agent
