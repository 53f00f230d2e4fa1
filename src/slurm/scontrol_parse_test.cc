#include "slurm/scontrol_parse.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "slurm/slurm_test_util.h"

namespace expanse::slurm {
namespace scontrol_parse_test {
namespace {

using testing::ReadFixture;

TEST(ScontrolParseTest, OneMultiNodeJob) {
  Result<std::vector<JobGres>> records =
      ParseScontrolShowJob(ReadFixture("scontrol_show_job_d_1.txt"));
  ASSERT_TRUE(records.ok()) << records.status();
  // "Nodes=worker[1-2] CPU_IDs=1 Mem=0 GRES=gpu:2(IDX:0-1)": one line for both hosts.
  JobGres expected;
  expected.job_id = "1";
  expected.slurm_job_id = 1;
  expected.state = "RUNNING";
  expected.gpu_indices = {{"worker1", {0, 1}}, {"worker2", {0, 1}}};
  EXPECT_EQ(*records, std::vector<JobGres>{expected});
}

TEST(ScontrolParseTest, AllJobs) {
  Result<std::vector<JobGres>> records =
      ParseScontrolShowJob(ReadFixture("scontrol_show_job_d.txt"));
  ASSERT_TRUE(records.ok()) << records.status();
  std::vector<std::string> ids;
  for (const JobGres& record : *records)
    ids.push_back(record.job_id + " " + record.state);
  EXPECT_EQ(ids, (std::vector<std::string>{"1 RUNNING", "2+0 RUNNING", "2+1 RUNNING", "4_0 RUNNING",
                                           "5 RUNNING", "6 PENDING", "7 PENDING", "8 PENDING",
                                           "4_[1-3] PENDING"}));
  const auto find = [&](std::string_view id) -> const JobGres& {
    for (const JobGres& record : *records) {
      if (record.job_id == id)
        return record;
    }
    static const JobGres kNone;
    ADD_FAILURE() << "no record " << id;
    return kNone;
  };
  EXPECT_EQ(find("2+0").gpu_indices, (GpuIndicesByHost{{"vm", {0}}}));
  EXPECT_EQ(find("2+0").slurm_job_id, 2);
  EXPECT_TRUE(find("2+1").gpu_indices.empty());  // "GRES=" empty
  EXPECT_EQ(find("4_0").gpu_indices, (GpuIndicesByHost{{"vm", {1}}}));
  EXPECT_EQ(find("4_0").slurm_job_id, 9);
  EXPECT_TRUE(find("4_[1-3]").gpu_indices.empty());  // pending: no allocation
  EXPECT_TRUE(find("5").gpu_indices.empty());
}

TEST(ScontrolParseTest, HostsWithDifferentLayouts) {
  const std::string text =
      "JobId=77 JobName=two words\n"
      "   JobState=RUNNING Reason=None Dependency=(null)\n"
      "   JOB_GRES=gpu:a100:5\n"
      "     Nodes=gpu[01-02] CPU_IDs=0-3 Mem=1024 GRES=gpu:a100:2(IDX:0-1)\n"
      "     Nodes=gpu03 CPU_IDs=0 Mem=1024 GRES=gpu:a100:1(IDX:3),mps:50(0/100)\n"
      "   MinCPUsNode=1 MinMemoryNode=1G MinTmpDiskNode=0\n"
      "\n";
  Result<std::vector<JobGres>> records = ParseScontrolShowJob(text);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ(records->front().gpu_indices,
            (GpuIndicesByHost{{"gpu01", {0, 1}}, {"gpu02", {0, 1}}, {"gpu03", {3}}}));
}

TEST(ScontrolParseTest, NoJobs) {
  Result<std::vector<JobGres>> records = ParseScontrolShowJob("No jobs in the system\n");
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_TRUE(records->empty());
}

TEST(ScontrolParseTest, ErrorsNameTheLine) {
  const Status bad_id = ParseScontrolShowJob("JobId=abc JobName=x\n").status();
  EXPECT_EQ(bad_id.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_id.reason(), "slurm_output");
  EXPECT_EQ(bad_id.message(), "scontrol show job: line 1: JobId: expected a number");
  EXPECT_EQ(ParseScontrolShowJob("JobId=1 JobName=x\n   Nodes=a GRES=gpu:2(IDX:0-x)\n")
                .status()
                .message(),
            "scontrol show job: line 2: GPU index list \"0-x\": bad range \"0-x\"");
  EXPECT_EQ(ParseScontrolShowJob("JobId=1 JobName=x\n   Nodes=a[1-2 GRES=gpu:1(IDX:0)\n")
                .status()
                .message(),
            "scontrol show job: line 2: hostlist \"a[1-2\": '[' without ']'");
  EXPECT_EQ(ParseScontrolShowJob("JobId=1 HetJobId=x JobName=x\n").status().message(),
            "scontrol show job: line 1: HetJobId: expected a number");
}

TEST(ScontrolParseTest, RecognisesUnknownJob) {
  EXPECT_TRUE(SaysInvalidJobId("slurm_load_jobs error: Invalid job id specified\n"));
  EXPECT_FALSE(SaysInvalidJobId("slurm_load_jobs error: Unable to contact slurm controller"));
}

}  // namespace
}  // namespace scontrol_parse_test
}  // namespace expanse::slurm
