#include "slurm/squeue_parse.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slurm/sacct_parse.h"
#include "slurm/slurm_test_util.h"

namespace expanse::slurm {
namespace squeue_parse_test {
namespace {

using testing::ReadFixture;
using ::testing::StartsWith;

std::vector<JobInfo> ParseFixture(std::string_view name) {
  Result<std::vector<JobInfo>> jobs = ParseSqueueJson(ReadFixture(name));
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  return jobs.ok() ? *jobs : std::vector<JobInfo>{};
}

const JobInfo& Find(const std::vector<JobInfo>& jobs, std::string_view job_id) {
  for (const JobInfo& job : jobs) {
    if (job.job_id == job_id)
      return job;
  }
  ADD_FAILURE() << "no job " << job_id;
  static const JobInfo kNone;
  return kNone;
}

std::vector<std::string> Ids(const std::vector<JobInfo>& jobs) {
  std::vector<std::string> ids;
  ids.reserve(jobs.size());
  for (const JobInfo& job : jobs)
    ids.push_back(job.job_id);
  return ids;
}

// The running 2-node GPU job (sbatch -N2 -n2 -w worker1,worker2 --gres=gpu:2 --mem=100M -t 30).
TEST(SqueueParseTest, RunningMultiNodeGpuJob) {
  const std::vector<JobInfo> jobs = ParseFixture("squeue_running.json");
  JobInfo expected;
  expected.job_id = "1";
  expected.slurm_job_id = 1;
  expected.name = "train2n";
  expected.user = "root";
  expected.account = "";
  expected.partition = "main";
  expected.state = "RUNNING";
  expected.nodes = "worker[1-2]";
  expected.submit_ms = 1796000511000;
  expected.start_ms = 1796000513000;
  expected.end_ms = 0;  // squeue's end_time 1796002313 is the time limit's end
  expected.req_nodes = 2;
  expected.req_cpus = 2;
  expected.req_gpus = 4;       // tres_per_node gres:gpu:2 x 2 nodes
  expected.req_mem_mib = 200;  // memory_per_node 100 x 2 nodes
  expected.time_limit_s = 1800;
  expected.gpu_indices = {{"worker1", {0, 1}}, {"worker2", {0, 1}}};
  EXPECT_EQ(Find(jobs, "1"), expected);
}

TEST(SqueueParseTest, ArrayAndHetJobIds) {
  const std::vector<JobInfo> jobs = ParseFixture("squeue_running.json");
  EXPECT_EQ(Ids(jobs),
            (std::vector<std::string>{"1", "2+0", "2+1", "4_0", "5", "6", "7", "8", "4_[1-3]"}));

  const JobInfo& task = Find(jobs, "4_0");
  EXPECT_EQ(task.slurm_job_id, 9);
  EXPECT_EQ(task.state, "RUNNING");
  EXPECT_EQ(task.req_gpus, 1);        // tres_per_job gres:gpu:1
  EXPECT_EQ(task.req_mem_mib, 1000);  // no --mem: tres_req_str mem=1000M
  EXPECT_EQ(task.time_limit_s, 300);
  EXPECT_EQ(task.gpu_indices, (GpuIndicesByHost{{"vm", {1}}}));

  const JobInfo& rest = Find(jobs, "4_[1-3]");
  EXPECT_EQ(rest.slurm_job_id, 4);
  EXPECT_EQ(rest.state, "PENDING");
  EXPECT_EQ(rest.nodes, "");
  EXPECT_EQ(rest.start_ms, 0);  // an estimate while pending
  EXPECT_EQ(rest.end_ms, 0);

  const JobInfo& leader = Find(jobs, "2+0");
  EXPECT_EQ(leader.slurm_job_id, 2);
  EXPECT_EQ(leader.nodes, "vm");
  EXPECT_EQ(leader.req_gpus, 1);
  EXPECT_EQ(leader.req_mem_mib, 64);
  EXPECT_EQ(leader.time_limit_s, 1200);
  EXPECT_EQ(leader.gpu_indices, (GpuIndicesByHost{{"vm", {0}}}));
  const JobInfo& component = Find(jobs, "2+1");
  EXPECT_EQ(component.slurm_job_id, 3);
  EXPECT_EQ(component.nodes, "worker2");
  EXPECT_EQ(component.req_gpus, 0);
  EXPECT_EQ(component.req_mem_mib, 32);
  EXPECT_TRUE(component.gpu_indices.empty());
}

TEST(SqueueParseTest, RequestedResourcesFromEachForm) {
  const std::vector<JobInfo> jobs = ParseFixture("squeue_running.json");
  // -n1 --mem-per-cpu=10M -t 2, no GPUs.
  const JobInfo& cpu_only = Find(jobs, "5");
  EXPECT_EQ(cpu_only.req_cpus, 1);
  EXPECT_EQ(cpu_only.req_gpus, 0);
  EXPECT_EQ(cpu_only.req_mem_mib, 10);  // memory_per_cpu 10 x 1 CPU
  EXPECT_EQ(cpu_only.time_limit_s, 120);
  // -n2 --gpus=2 --mem-per-cpu=100M, no time limit in a partition without one: pending.
  const JobInfo& per_job = Find(jobs, "6");
  EXPECT_EQ(per_job.state, "PENDING");
  EXPECT_EQ(per_job.req_gpus, 2);       // tres_per_job gres:gpu:2
  EXPECT_EQ(per_job.req_mem_mib, 200);  // memory_per_cpu 100 x 2 CPUs
  EXPECT_EQ(per_job.time_limit_s, 0);   // time_limit null: UNLIMITED
  EXPECT_EQ(per_job.end_ms, 0);         // squeue's end_time is 6090969549 here
  // -N1 --gpus-per-node=1 --mem=200M -t 1-00:00:00.
  const JobInfo& per_node = Find(jobs, "7");
  EXPECT_EQ(per_node.req_nodes, 1);
  EXPECT_EQ(per_node.req_gpus, 1);  // tres_per_node gres:gpu:1 x 1 node
  EXPECT_EQ(per_node.req_mem_mib, 200);
  EXPECT_EQ(per_node.time_limit_s, 86400);
  // -n2 --gpus-per-task=1 -t 10.
  const JobInfo& per_task = Find(jobs, "8");
  EXPECT_EQ(per_task.req_cpus, 2);
  EXPECT_EQ(per_task.req_gpus, 2);  // tres_per_task gres:gpu:1 x 2 tasks
  EXPECT_EQ(per_task.time_limit_s, 600);
}

// With accounting, tres_req_str carries gres/gpu (AccountingStorageTRES=gres/gpu).
TEST(SqueueParseTest, GpusFromTresReqStr) {
  const std::vector<JobInfo> jobs = ParseFixture("squeue_accounting.json");
  const JobInfo& job = Find(jobs, "1");
  EXPECT_EQ(job.account, "root");
  EXPECT_EQ(job.state, "COMPLETED");
  EXPECT_EQ(job.req_gpus, 4);
  EXPECT_EQ(job.end_ms, 1796000759000);
  EXPECT_EQ(Find(jobs, "2+1").req_gpus, 0);
  EXPECT_EQ(Find(jobs, "4_2").req_gpus, 1);
}

TEST(SqueueParseTest, EndedJobsKeepTheirTimes) {
  const std::vector<JobInfo> jobs = ParseFixture("squeue_ended.json");
  const JobInfo& completing = Find(jobs, "1");
  EXPECT_EQ(completing.state, "COMPLETING");
  EXPECT_EQ(completing.nodes, "worker1");  // worker2 already released
  EXPECT_EQ(completing.end_ms, 1796000691000);
  const JobInfo& timeout = Find(jobs, "5");
  EXPECT_EQ(timeout.state, "TIMEOUT");
  EXPECT_EQ(timeout.start_ms, 1796000536000);
  EXPECT_EQ(timeout.end_ms, 1796000656000);
  EXPECT_EQ(Find(jobs, "11").state, "COMPLETED");
  EXPECT_EQ(Find(jobs, "12").state, "FAILED");
  EXPECT_EQ(Find(jobs, "4_[2-3]").state, "CANCELLED");
  EXPECT_EQ(Find(jobs, "4_1").state, "CANCELLED");
  EXPECT_EQ(Find(jobs, "2+1").end_ms, 1796000634000);
}

// The 23.02+ shape: numbers as {"set","infinite","number"} objects, job_state as a list.
TEST(SqueueParseTest, NumberObjectsOf2302AndLater) {
  const std::string text = R"({"jobs": [{
    "job_id": 1618871,
    "array_job_id": {"set": true, "infinite": false, "number": 1618860},
    "array_task_id": {"set": true, "infinite": false, "number": 11},
    "array_task_string": "",
    "het_job_id": {"set": true, "infinite": false, "number": 0},
    "het_job_offset": {"set": true, "infinite": false, "number": 0},
    "name": "pretrain", "user_name": "ana", "account": "ml", "partition": "gpu",
    "job_state": ["RUNNING"], "nodes": "gpu[07-08]",
    "submit_time": {"set": true, "infinite": false, "number": 1701982989},
    "start_time": {"set": true, "infinite": false, "number": 1701983394},
    "end_time": {"set": true, "infinite": false, "number": 1705313394},
    "node_count": {"set": true, "infinite": false, "number": 2},
    "cpus": {"set": true, "infinite": false, "number": 16},
    "tasks": {"set": true, "infinite": false, "number": 8},
    "memory_per_node": {"set": false, "infinite": false, "number": 0},
    "memory_per_cpu": {"set": true, "infinite": false, "number": 16000},
    "time_limit": {"set": true, "infinite": false, "number": 1440},
    "tres_per_node": "gres/gpu:4",
    "tres_req_str": "cpu=16,mem=256000M,node=2,billing=16"
  }]})";
  Result<std::vector<JobInfo>> jobs = ParseSqueueJson(text);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  const JobInfo& job = jobs->front();
  EXPECT_EQ(job.job_id, "1618860_11");
  EXPECT_EQ(job.slurm_job_id, 1618871);
  EXPECT_EQ(job.state, "RUNNING");
  EXPECT_EQ(job.submit_ms, 1701982989000);
  EXPECT_EQ(job.start_ms, 1701983394000);
  EXPECT_EQ(job.end_ms, 0);
  EXPECT_EQ(job.req_nodes, 2);
  EXPECT_EQ(job.req_cpus, 16);
  EXPECT_EQ(job.req_gpus, 8);
  EXPECT_EQ(job.req_mem_mib, 256000);
  EXPECT_EQ(job.time_limit_s, 86400);
}

TEST(SqueueParseTest, UnlimitedTimeLimitInEveryShape) {
  for (const std::string limit :
       {"null", R"({"set": false, "infinite": true, "number": 0})",
        R"({"set": true, "infinite": true, "number": 0})", "4294967295", "4294967294"}) {
    Result<std::vector<JobInfo>> jobs =
        ParseSqueueJson(R"({"jobs": [{"job_id": 7, "time_limit": )" + limit + "}]}");
    ASSERT_TRUE(jobs.ok()) << limit << ": " << jobs.status();
    EXPECT_EQ(jobs->front().time_limit_s, 0) << limit;
  }
}

TEST(SqueueParseTest, StateListReportsTheBaseStateOrCompleting) {
  const auto state_of = [](std::string_view states) {
    Result<std::vector<JobInfo>> jobs =
        ParseSqueueJson(R"({"jobs": [{"job_id": 7, "job_state": )" + std::string(states) + "}]}");
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? jobs->front().state : "";
  };
  EXPECT_EQ(state_of(R"(["PENDING", "REQUEUED"])"), "PENDING");
  EXPECT_EQ(state_of(R"(["COMPLETED", "COMPLETING"])"), "COMPLETING");
  EXPECT_EQ(state_of(R"(["CONFIGURING"])"), "CONFIGURING");
  EXPECT_EQ(state_of(R"("RUNNING")"), "RUNNING");
  EXPECT_EQ(state_of("[]"), "");
}

TEST(SqueueParseTest, HetComponentFromNumberObjects) {
  Result<std::vector<JobInfo>> jobs = ParseSqueueJson(R"({"jobs": [{"job_id": 124,
      "het_job_id": {"set": true, "number": 123}, "het_job_offset": {"set": true, "number": 1},
      "array_job_id": {"set": true, "number": 0}, "array_task_id": {"set": false, "number": 0}}]})");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->front().job_id, "123+1");
}

TEST(SqueueParseTest, NoJobs) {
  Result<std::vector<JobInfo>> jobs = ParseSqueueJson(R"({"meta": {}, "errors": [], "jobs": []})");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->empty());
}

Status ParseError(std::string_view text) { return ParseSqueueJson(text).status(); }

TEST(SqueueParseTest, MalformedOutputNamesTheField) {
  const Status wrong_type =
      ParseError(R"({"jobs": [{"job_id": 1}, {"job_id": 2}, {"job_id": "3"}]})");
  EXPECT_EQ(wrong_type.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong_type.reason(), "slurm_output");
  EXPECT_EQ(wrong_type.message(), "squeue --json: jobs[2].job_id must be a number");

  EXPECT_EQ(ParseError(R"({"jobs": [{"name": "x"}]})").message(),
            "squeue --json: jobs[0].job_id is required");
  EXPECT_EQ(ParseError(R"({"jobs": [{"job_id": 1, "name": 5}]})").message(),
            "squeue --json: jobs[0].name must be a string");
  EXPECT_EQ(ParseError(R"({"jobs": [{"job_id": -1}]})").message(),
            "squeue --json: jobs[0].job_id must be a whole number from 0 to 9223372036854775807");
  EXPECT_EQ(ParseError(R"({"jobs": [{"job_id": 1.5}]})").message(),
            "squeue --json: jobs[0].job_id must be a whole number from 0 to 9223372036854775807");
  EXPECT_EQ(ParseError(R"({"jobs": [{"job_id": 1, "time_limit": {"set": true}}]})").message(),
            "squeue --json: jobs[0].time_limit.number is required");
  EXPECT_EQ(
      ParseError(R"({"jobs": [{"job_id": 1, "time_limit": {"set": 1, "number": 1}}]})").message(),
      "squeue --json: jobs[0].time_limit.set must be true or false");
  EXPECT_EQ(ParseError(R"({"jobs": [{"job_id": 1, "job_state": [1]}]})").message(),
            "squeue --json: jobs[0].job_state[0] must be a string");
  EXPECT_EQ(
      ParseError(R"({"jobs": [{"job_id": 1, "gres_detail": [], "job_resources": []}]})").message(),
      "squeue --json: jobs[0].job_resources must be an object");
  const std::string bad_nodes =
      R"json({"jobs": [{"job_id": 1, "gres_detail": ["gpu:1(IDX:0)"],)json"
      R"json( "job_resources": {"allocated_nodes": 3}}]})json";
  EXPECT_EQ(ParseError(bad_nodes).message(),
            "squeue --json: jobs[0].job_resources.allocated_nodes must be an array");
  EXPECT_EQ(ParseError(R"({"jobs": [7]})").message(), "squeue --json: jobs[0] must be an object");
  EXPECT_EQ(ParseError(R"({"jobs": {}})").message(), "squeue --json: jobs must be an array");
  EXPECT_EQ(ParseError(R"({"meta": {}})").message(), "squeue --json: jobs is required");
  EXPECT_EQ(ParseError("[]").message(), "squeue --json: the document must be an object");
  EXPECT_THAT(ParseError(R"({"jobs": [)").message(),
              StartsWith("squeue --json: not valid JSON at byte 11: "));
  EXPECT_THAT(ParseError("").message(), StartsWith("squeue --json: not valid JSON at byte 1: "));
}

TEST(SqueueParseTest, WronglyTypedNestedMemberNamedByFullPath) {
  const std::string text =
      R"json({"jobs": [{"job_id": 1}, {"job_id": 2,)json"
      R"json( "gres_detail": ["gpu:1(IDX:0)", "gpu:1(IDX:1)"],)json"
      R"json( "job_resources": {"allocated_nodes": [{"nodename": "w1"}, {"nodename": 7}]}}]})json";
  const Status status = ParseError(text);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.reason(), "slurm_output");
  EXPECT_EQ(status.message(),
            "squeue --json: jobs[1].job_resources.allocated_nodes[1].nodename must be a string");
  EXPECT_EQ(
      ParseError(R"({"jobs": [{"job_id": {"set": true, "number": {"number": 1}}}]})").message(),
      "squeue --json: jobs[0].job_id.number must be a number");
  // A null element of a list of objects is refused like any other non-object.
  EXPECT_EQ(ParseError(R"({"jobs": [null]})").message(),
            "squeue --json: jobs[0] must be an object");
}

// A nesting bomb is refused while it is read, before anything is built, with the command named;
// nlohmann's own parser would build every level.
TEST(SqueueParseTest, NestingBombIsRefusedNamingTheCommand) {
  const std::vector<std::string> bombs = {
      std::string(100'000, '['),
      R"({"jobs": [{"job_id": 1, "name": )" + std::string(100'000, '['),
      std::string(100'000, '[') + std::string(100'000, ']'),
  };
  for (const std::string& bomb : bombs) {
    const Status status = ParseError(bomb);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.reason(), "slurm_output");
    EXPECT_EQ(status.message(),
              "squeue --json: the document nests arrays and objects deeper than 64 levels");
  }
  // Nesting up to the limit is still read: the top level, "jobs", the job and 61 arrays.
  const std::string deep = R"({"jobs": [{"job_id": 1, "comment": )" + std::string(61, '[') +
                           std::string(61, ']') + "}]}";
  Result<std::vector<JobInfo>> jobs = ParseSqueueJson(deep);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->front().job_id, "1");
}

// SLURM prints users' own text (job names): a control character in one job must neither be
// dropped nor fail the listing of every other job.
TEST(SqueueParseTest, TextIsKeptAsPrinted) {
  Result<std::vector<JobInfo>> jobs =
      ParseSqueueJson(R"({"jobs": [{"job_id": 1, "name": "a\tb\u0001"}, {"job_id": 2}]})");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ(jobs->front().name, "a\tb\x01");
}

// Whatever SLURM (or a broken wrapper in its place) prints, both JSON parsers answer with a
// status and never throw.
TEST(SqueueParseTest, HostileOutputNeverThrows) {
  const std::vector<std::string> inputs = {
      "",
      "{",
      "nul",
      "\xff\xfe{}",
      "{\"jobs\": [\"\xff\"]}",
      R"({"jobs": [{"job_id": 1e400}]})",
      R"({"jobs": [{"job_id": -0.0}]})",
      R"({"jobs": [{"job_id": 18446744073709551616}]})",
      R"({"jobs": [{"job_id": 1, "time_limit": {"set": true, "number": [1]}}]})",
      R"({"jobs": [{"job_id": 1, "job_state": {"current": 1}, "state": []}]})",
      R"({"jobs": [{"job_id": 1, "array": 5, "het": [], "tres": {"requested": {}}}]})",
      R"({"jobs": [{"job_id": 1, "name": "\u0000"}], "errors": "x"})",
      R"({"errors": [5], "jobs": 5})",
      R"({"errors": [{"error": 5}]})",
      std::string(100'000, '{'),
      [] {
        std::string members;
        for (int i = 0; i < 100'000; ++i)
          members += R"({"a":)";
        return members;
      }(),
  };
  for (const std::string& input : inputs) {
    for (const auto parse : {&ParseSqueueJson, &ParseSacctJson}) {
      Result<std::vector<JobInfo>> jobs = Status();
      EXPECT_NO_THROW(jobs = parse(input)) << input.substr(0, 80);
      if (jobs.ok())
        continue;
      const std::string& reason = jobs.status().reason();
      EXPECT_TRUE(reason == "slurm_output" || reason == "slurm_error")
          << input.substr(0, 80) << ": " << jobs.status();
    }
  }
}

TEST(SqueueParseTest, ReportedErrorsAreUnavailable) {
  const std::string text =
      R"json({"errors": [{"error": "Unable to contact slurm controller (connect failure)",)json"
      R"json( "errno": 1007}], "jobs": []})json";
  const Status status = ParseError(text);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.reason(), "slurm_error");
  EXPECT_EQ(status.message(),
            "squeue --json reported an error: \"Unable to contact slurm controller (connect "
            "failure)\"");
  EXPECT_EQ(ParseError(R"({"errors": [{"description": "no", "error": "x"}]})").message(),
            "squeue --json reported an error: \"no\"");
}

TEST(SqueueParseTest, OutOfRangeNumbersFail) {
  EXPECT_EQ(ParseError(R"({"jobs": [{"job_id": 18446744073709551000}]})").message(),
            "squeue --json: jobs[0].job_id must be a whole number from 0 to 9223372036854775807");
  // Products that would overflow leave the field at 0 rather than wrapping.
  const std::string huge =
      R"({"jobs": [{"job_id": 1, "node_count": 4611686018427387904, "memory_per_node": 4,)"
      R"( "time_limit": 9223372036854775807}]})";
  Result<std::vector<JobInfo>> jobs = ParseSqueueJson(huge);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->front().req_mem_mib, 0);
  EXPECT_EQ(jobs->front().time_limit_s, 0);
}

}  // namespace
}  // namespace squeue_parse_test
}  // namespace expanse::slurm
