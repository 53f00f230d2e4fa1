#include "agent/hook.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/job_events.h"

namespace expanse::agent {
namespace hook_test {
namespace {

using ::testing::HasSubstr;

class HookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-hook-XXXXXX";
    dir_ = mkdtemp(dir);
    options_.events_dir = dir_ + "/events";
    options_.control_dir = dir_ + "/control";
    options_.hostname = "fallback";
    options_.log = [this](const std::string& line) { logs_ += line + "\n"; };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  HookOptions options_;
  std::string logs_;
  ManualClock clock_{1'800'000'000'000};
};

TEST_F(HookTest, PrologAndEpilogRecordEvents) {
  int bootstraps = 0;
  options_.bootstrap_sampler = [&] { ++bootstraps; };
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "42"},    {"SLURMD_NODENAME", "worker1"},
      {"SLURM_JOB_USER", "ana"}, {"SLURM_JOB_PARTITION", "gpu"},
      {"SLURM_JOB_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  options_.kind = "prolog";
  EXPECT_EQ(RunHook(options_, env, clock_), "");
  clock_.Advance(300);  // a job shorter than one sampling interval
  options_.kind = "epilog";
  EXPECT_EQ(RunHook(options_, env, clock_), "");
  EXPECT_EQ(bootstraps, 1);

  PendingEvents pending = ReadJobEvents(options_.events_dir, 100);
  ASSERT_EQ(pending.events.size(), 2u);
  const JobEvent& start = pending.events[0].second;
  EXPECT_EQ(start.kind, "start");
  EXPECT_EQ(start.job_id, "42");
  EXPECT_EQ(start.host, "worker1");
  EXPECT_EQ(start.user, "ana");
  EXPECT_EQ(start.gpus, "0,1");
  EXPECT_EQ(start.at_ms, 1'800'000'000'000);
  EXPECT_EQ(pending.events[1].second.kind, "end");
  EXPECT_EQ(pending.events[1].second.at_ms, 1'800'000'000'300);
  EXPECT_TRUE(logs_.empty()) << logs_;
}

TEST_F(HookTest, ArrayAndHeterogeneousJobIds) {
  options_.kind = "prolog";
  RunHook(options_,
          {{"SLURM_JOB_ID", "101"}, {"SLURM_ARRAY_JOB_ID", "100"}, {"SLURM_ARRAY_TASK_ID", "3"}},
          clock_);
  clock_.Advance(1);
  RunHook(options_,
          {{"SLURM_JOB_ID", "201"}, {"SLURM_HET_JOB_ID", "200"}, {"SLURM_HET_JOB_OFFSET", "1"}},
          clock_);
  PendingEvents pending = ReadJobEvents(options_.events_dir, 100);
  ASSERT_EQ(pending.events.size(), 2u);
  EXPECT_EQ(pending.events[0].second.job_id, "100_3");
  EXPECT_EQ(pending.events[0].second.host, "fallback");
  EXPECT_EQ(pending.events[1].second.job_id, "200+1");
}

TEST_F(HookTest, NoJobIdIsLoggedNotFatal) {
  options_.kind = "prolog";
  EXPECT_EQ(RunHook(options_, {}, clock_), "");
  EXPECT_THAT(logs_, HasSubstr("no SLURM_JOB_ID"));
}

// slurmd's ids are 32-bit: a longer number is refused, never cut (std::stoul used to throw
// out_of_range on 20 digits, ending the hook, and to truncate anything past 2^32).
TEST_F(HookTest, AJobIdPastSlurmsRangeIsRefusedNotCut) {
  Result<JobEvent> largest =
      JobEventFromEnvironment("start", {{"SLURM_JOB_ID", "4294967295"}}, "h", 1);
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ(largest->slurm_job_id, 4'294'967'295u);
  for (const char* id :
       {"4294967296", "99999999999999999999", "18446744073709551617", "-1", "+5", " 5", "5 "}) {
    Result<JobEvent> refused = JobEventFromEnvironment("start", {{"SLURM_JOB_ID", id}}, "h", 1);
    EXPECT_FALSE(refused.ok()) << id;
  }
  Result<JobEvent> array = JobEventFromEnvironment(
      "start",
      {{"SLURM_JOB_ID", "7"}, {"SLURM_ARRAY_JOB_ID", "6"}, {"SLURM_ARRAY_TASK_ID", "4294967296"}},
      "h", 1);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->job_id, "7") << "an array task id past the range is not used";
  options_.kind = "prolog";
  EXPECT_EQ(RunHook(options_, {{"SLURM_JOB_ID", "99999999999999999999"}}, clock_), "");
  EXPECT_THAT(logs_, HasSubstr("SLURM_JOB_ID \"99999999999999999999\" is not a SLURM job id"));
}

TEST_F(HookTest, UnwritableEventsDirIsLoggedNotFatal) {
  std::ofstream(dir_ + "/file") << "x";
  options_.events_dir = dir_ + "/file/events";
  options_.kind = "epilog";
  EXPECT_EQ(RunHook(options_, {{"SLURM_JOB_ID", "7"}}, clock_), "");
  EXPECT_THAT(logs_, HasSubstr("job 7 end not recorded"));
}

TEST_F(HookTest, TaskPrologExportsOnlyWhenEnabledAndPresent) {
  options_.kind = "taskprolog";
  EXPECT_EQ(RunHook(options_, {}, clock_), "");  // injection off
  options_.agent_library = dir_ + "/libexpanse-agent.so";
  EXPECT_EQ(RunHook(options_, {}, clock_), "");  // library missing
  std::ofstream(options_.agent_library) << "elf";
  EXPECT_EQ(RunHook(options_, {}, clock_),
            "export CUDA_INJECTION64_PATH=" + options_.agent_library +
                "\nexport EXPANSE_CONTROL_DIR=" + options_.control_dir + "\n");
  std::filesystem::create_directories(options_.control_dir);
  std::ofstream(options_.control_dir + "/disabled") << "";
  EXPECT_EQ(RunHook(options_, {}, clock_), "");  // node-local opt-out
}

// srun passes the batch step's environment on to tasks on other nodes: an agent path exported
// on the first node is replaced by this node's, or withdrawn where this node injects none; a
// job's own injection tool is never touched.
TEST_F(HookTest, TaskPrologReplacesAnInheritedAgentAndLeavesAJobsOwnToolAlone) {
  options_.kind = "taskprolog";
  options_.agent_library = dir_ + "/cupti-nodes/n2/lib/libexpanse-agent.so";
  std::filesystem::create_directories(dir_ + "/cupti-nodes/n2/lib");
  std::ofstream(options_.agent_library) << "elf";
  const std::map<std::string, std::string> from_n1 = {
      {"CUDA_INJECTION64_PATH", "/srv/expanse/lib/cupti-nodes/n1/lib/libexpanse-agent.so"},
      {"NVTX_INJECTION64_PATH", "/srv/expanse/lib/cupti-nodes/n1/lib/libcupti.so.13"}};
  EXPECT_EQ(RunHook(options_, from_n1, clock_),
            "unset NVTX_INJECTION64_PATH\nexport CUDA_INJECTION64_PATH=" + options_.agent_library +
                "\nexport EXPANSE_CONTROL_DIR=" + options_.control_dir + "\n");
  std::filesystem::create_directories(options_.control_dir);
  std::ofstream(options_.control_dir + "/disabled") << "";
  EXPECT_EQ(RunHook(options_, from_n1, clock_),
            "unset CUDA_INJECTION64_PATH\nunset NVTX_INJECTION64_PATH\n");
  std::filesystem::remove(options_.control_dir + "/disabled");
  const std::map<std::string, std::string> nsight = {
      {"CUDA_INJECTION64_PATH", "/opt/nvidia/nsight-systems/target/libToolsInjection64.so"}};
  EXPECT_EQ(RunHook(options_, nsight, clock_), "");
}

TEST_F(HookTest, ReadJobEventsSkipsAndReportsBadFiles) {
  std::filesystem::create_directories(options_.events_dir);
  std::ofstream(options_.events_dir + "/1-garbage-start.json") << "{not json";
  std::ofstream(options_.events_dir + "/.tmp.partial") << "ignored";
  options_.kind = "prolog";
  RunHook(options_, {{"SLURM_JOB_ID", "9"}}, clock_);
  PendingEvents pending = ReadJobEvents(options_.events_dir, 100);
  ASSERT_EQ(pending.events.size(), 1u);
  EXPECT_EQ(pending.events[0].second.job_id, "9");
  ASSERT_EQ(pending.bad.size(), 1u);
  EXPECT_EQ(pending.bad[0], "1-garbage-start.json");
}

// Only a file that is wrong itself is bad (and deleted at the next commit): one whose read
// fails otherwise (EMFILE or EIO in life; EISDIR here) is left for the next collection.
TEST_F(HookTest, ReadJobEventsLeavesAFileItCouldNotReadForNow) {
  std::filesystem::create_directories(options_.events_dir + "/2-unreadable-end.json");
  std::ofstream(options_.events_dir + "/3-huge-end.json") << std::string(20'000, ' ');
  PendingEvents pending = ReadJobEvents(options_.events_dir, 100);
  EXPECT_TRUE(pending.events.empty());
  EXPECT_EQ(pending.bad, std::vector<std::string>{"3-huge-end.json"});
}

}  // namespace
}  // namespace hook_test
}  // namespace expanse::agent
