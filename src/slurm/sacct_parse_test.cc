#include "slurm/sacct_parse.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "slurm/slurm_test_util.h"

namespace expanse::slurm {
namespace sacct_parse_test {
namespace {

using testing::ReadFixture;

const JobInfo& Find(const std::vector<JobInfo>& jobs, std::string_view job_id) {
  for (const JobInfo& job : jobs) {
    if (job.job_id == job_id)
      return job;
  }
  ADD_FAILURE() << "no job " << job_id;
  static const JobInfo kNone;
  return kNone;
}

class SacctFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::vector<JobInfo>> parsed = ParseSacctJson(ReadFixture("sacct.json"));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    jobs_ = *parsed;
  }
  std::vector<JobInfo> jobs_;
};

TEST_F(SacctFixtureTest, FinishedMultiNodeGpuJob) {
  JobInfo expected;
  expected.job_id = "1";
  expected.slurm_job_id = 1;
  expected.name = "train2n";
  expected.user = "root";
  expected.account = "root";
  expected.partition = "main";
  expected.state = "COMPLETED";
  expected.nodes = "worker[1-2]";
  expected.submit_ms = 1796000718000;
  expected.start_ms = 1796000719000;
  expected.end_ms = 1796000759000;
  expected.req_nodes = 2;
  expected.req_cpus = 2;
  expected.req_gpus = 4;
  expected.req_mem_mib = 200;
  expected.time_limit_s = 1800;
  EXPECT_EQ(Find(jobs_, "1"), expected);
}

TEST_F(SacctFixtureTest, ArrayAndHetIds) {
  std::vector<std::string> ids;
  for (const JobInfo& job : jobs_)
    ids.push_back(job.job_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "2+0", "2+1", "4_2", "5", "6", "7", "4_0", "4_1",
                                           "10", "11"}));
  EXPECT_EQ(Find(jobs_, "4_2").slurm_job_id, 4);
  EXPECT_EQ(Find(jobs_, "4_0").slurm_job_id, 8);
  EXPECT_EQ(Find(jobs_, "4_0").req_gpus, 1);
  EXPECT_EQ(Find(jobs_, "2+0").req_gpus, 1);
  EXPECT_EQ(Find(jobs_, "2+1").slurm_job_id, 3);
  EXPECT_EQ(Find(jobs_, "2+1").req_gpus, 0);
  EXPECT_EQ(Find(jobs_, "2+1").req_mem_mib, 32);
}

TEST_F(SacctFixtureTest, StatesTimesAndLimits) {
  const JobInfo& unlimited = Find(jobs_, "6");
  EXPECT_EQ(unlimited.time_limit_s, 0);  // time.limit null
  EXPECT_EQ(unlimited.req_nodes, 1);     // requested 1, was given 2
  EXPECT_EQ(unlimited.req_gpus, 2);
  EXPECT_EQ(unlimited.req_mem_mib, 200);
  EXPECT_EQ(Find(jobs_, "5").req_mem_mib, 10);  // --mem-per-cpu=10M x 1
  EXPECT_EQ(Find(jobs_, "7").state, "FAILED");

  const JobInfo& running = Find(jobs_, "10");
  EXPECT_EQ(running.state, "RUNNING");
  EXPECT_EQ(running.start_ms, 1796000842000);
  EXPECT_EQ(running.end_ms, 0);
  EXPECT_EQ(running.req_gpus, 2);

  const JobInfo& never_ran = Find(jobs_, "11");
  EXPECT_EQ(never_ran.state, "CANCELLED");
  EXPECT_EQ(never_ran.nodes, "");  // "None assigned"
  EXPECT_EQ(never_ran.req_nodes, 3);
  EXPECT_EQ(never_ran.req_gpus, 6);
  EXPECT_EQ(never_ran.end_ms, 1796000844000);
}

// Captured while jobs ran: the pending rest of an array arrives as a task bitmap ("0xE").
TEST(SacctParseTest, PendingArrayTasksFromTheBitmap) {
  Result<std::vector<JobInfo>> jobs = ParseSacctJson(ReadFixture("sacct_pending_array.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::vector<std::string> ids;
  for (const JobInfo& job : *jobs)
    ids.push_back(job.job_id + " " + job.state);
  EXPECT_EQ(ids, (std::vector<std::string>{"1 RUNNING", "2+0 RUNNING", "2+1 RUNNING",
                                           "4_[1-3] PENDING", "5 COMPLETED", "4_0 RUNNING"}));
  const JobInfo& pending = Find(*jobs, "4_[1-3]");
  EXPECT_EQ(pending.slurm_job_id, 4);
  EXPECT_EQ(pending.start_ms, 0);
  EXPECT_EQ(pending.end_ms, 0);
  EXPECT_EQ(pending.req_gpus, 1);
  EXPECT_EQ(Find(*jobs, "1").end_ms, 0);  // running
  EXPECT_EQ(Find(*jobs, "1").req_gpus, 4);
}

TEST(SacctParseTest, NumberObjectsAndStateListsOf2302AndLater) {
  Result<std::vector<JobInfo>> jobs = ParseSacctJson(R"({"jobs": [{
    "job_id": 130, "name": "train", "user": "ana", "account": "ml", "partition": "gpu",
    "nodes": "gpu07",
    "array": {"job_id": 123, "task_id": {"set": true, "infinite": false, "number": 4},
              "task": ""},
    "het": {"job_id": 0, "job_offset": {"set": false, "infinite": false, "number": 0}},
    "state": {"current": ["TIMEOUT"], "reason": "None"},
    "time": {"submission": 1700000000, "start": 1700000010, "end": 1700003610,
             "limit": {"set": true, "infinite": false, "number": 60}},
    "required": {"CPUs": 8, "memory_per_node": {"set": true, "infinite": false, "number": 4096},
                 "memory_per_cpu": {"set": false, "infinite": false, "number": 0}},
    "allocation_nodes": 1,
    "tres": {"requested": [{"type": "cpu", "name": "", "id": 1, "count": 8},
                           {"type": "gres", "name": "gpu:h100", "id": 1002, "count": 2}]}
  }]})");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const JobInfo& job = jobs->front();
  EXPECT_EQ(job.job_id, "123_4");
  EXPECT_EQ(job.state, "TIMEOUT");
  EXPECT_EQ(job.end_ms, 1700003610000);
  EXPECT_EQ(job.time_limit_s, 3600);
  EXPECT_EQ(job.req_nodes, 1);  // allocation_nodes
  EXPECT_EQ(job.req_cpus, 8);
  EXPECT_EQ(job.req_gpus, 2);        // typed gres/gpu:h100
  EXPECT_EQ(job.req_mem_mib, 4096);  // memory_per_node x 1
}

TEST(SacctParseTest, MalformedOutputNamesTheField) {
  EXPECT_EQ(
      ParseSacctJson(R"({"jobs": [{"job_id": 1}, {"job_id": 2, "time": 5}]})").status().message(),
      "sacct --json: jobs[1].time must be an object");
  EXPECT_EQ(
      ParseSacctJson(R"({"jobs": [{"job_id": 1, "state": {"current": 3}}]})").status().message(),
      "sacct --json: jobs[0].state.current must be a string or an array of strings");
  EXPECT_EQ(ParseSacctJson(R"({"jobs": [{"job_id": 1, "tres": {"requested": [{"count": "2"}]}}]})")
                .status()
                .message(),
            "sacct --json: jobs[0].tres.requested[0].count must be a number");
  const Status status = ParseSacctJson("Slurm accounting storage is disabled\n").status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.reason(), "slurm_output");
}

TEST(SacctParseTest, WronglyTypedNestedMemberNamedByFullPath) {
  const std::string requested =
      R"json({"jobs": [{"job_id": 1, "tres": {"requested": [{"type": "cpu", "count": 1},)json"
      R"json( {"type": "gres", "name": "gpu", "count": {"set": true, "number": "2"}}]}}]})json";
  const Status status = ParseSacctJson(requested).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.reason(), "slurm_output");
  EXPECT_EQ(status.message(),
            "sacct --json: jobs[0].tres.requested[1].count.number must be a number");
  EXPECT_EQ(ParseSacctJson(R"({"jobs": [{"job_id": 1, "time": {"limit": {"infinite": "no"}}}]})")
                .status()
                .message(),
            "sacct --json: jobs[0].time.limit.infinite must be true or false");
  EXPECT_EQ(
      ParseSacctJson(R"({"jobs": [{"job_id": 1, "required": {"CPUs": -8}}]})").status().message(),
      "sacct --json: jobs[0].required.CPUs must be a whole number from 0 to "
      "9223372036854775807");
}

TEST(SacctParseTest, NestingBombIsRefusedNamingTheCommand) {
  std::string bomb;
  for (int i = 0; i < 100'000; ++i)
    bomb += R"({"jobs":)";
  const Status status = ParseSacctJson(bomb).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.reason(), "slurm_output");
  EXPECT_EQ(status.message(),
            "sacct --json: the document nests arrays and objects deeper than 64 levels");
}

TEST(SacctParseTest, RecognisesDisabledAccounting) {
  EXPECT_TRUE(SaysAccountingDisabled(ReadFixture("sacct_disabled.txt")));
  EXPECT_FALSE(
      SaysAccountingDisabled("sacct: error: Problem talking to the database: Connection refused"));
}

}  // namespace
}  // namespace sacct_parse_test
}  // namespace expanse::slurm
