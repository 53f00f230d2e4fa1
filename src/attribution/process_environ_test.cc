#include "attribution/process_environ.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::attribution {
namespace {

using testing::Environ;

TEST(ProcessEnvironTest, PlainJob) {
  const SlurmEnviron env =
      ParseProcessEnviron(Environ({"PATH=/usr/bin", "SLURM_JOB_ID=123", "CUDA_VISIBLE_DEVICES=0,1",
                                   "SLURM_JOB_GPUS=2,3", "SLURM_STEP_GPUS=3"}),
                          false)
          .value();
  EXPECT_EQ(env.job, (SlurmJob{123, "123"}));
  EXPECT_EQ(env.cuda_visible_devices, "0,1");
  EXPECT_EQ(env.slurm_job_gpus, "2,3");
  EXPECT_EQ(env.slurm_step_gpus, "3");
}

TEST(ProcessEnvironTest, AnotherCudaToolIsNamedButExpansesOwnAgentIsNot) {
  const auto tool = ParseProcessEnviron(
      Environ({"SLURM_JOB_ID=7",
               "CUDA_INJECTION64_PATH=/opt/nvidia/nsight-compute/target/libToolsInjection64.so"}),
      false);
  ASSERT_TRUE(tool.ok());
  EXPECT_EQ(tool->cuda_tool, "/opt/nvidia/nsight-compute/target/libToolsInjection64.so");
  for (const char* own : {"CUDA_INJECTION64_PATH=/srv/expanse/lib/cupti-nodes/n1/lib/"
                          "libexpanse-agent.so",
                          "CUDA_INJECTION64_PATH="}) {
    const auto env = ParseProcessEnviron(Environ({"SLURM_JOB_ID=7", own}), false);
    ASSERT_TRUE(env.ok());
    EXPECT_FALSE(env->cuda_tool) << own;
  }
  const auto opt_out = ParseProcessEnviron(Environ({"EXPANSE_YIELD_COUNTERS=1"}), false);
  ASSERT_TRUE(opt_out.ok());
  EXPECT_EQ(opt_out->cuda_tool, "EXPANSE_YIELD_COUNTERS=1");
  EXPECT_FALSE(ParseProcessEnviron(Environ({"EXPANSE_YIELD_COUNTERS=0"}), false)->cuda_tool);
}

TEST(ProcessEnvironTest, ArrayTask) {
  const SlurmEnviron env =
      ParseProcessEnviron(
          Environ({"SLURM_JOB_ID=130", "SLURM_ARRAY_JOB_ID=123", "SLURM_ARRAY_TASK_ID=4"}), false)
          .value();
  EXPECT_EQ(env.job, (SlurmJob{130, "123_4"}));
}

TEST(ProcessEnvironTest, HetComponent) {
  EXPECT_EQ(
      ParseProcessEnviron(
          Environ({"SLURM_JOB_ID=124", "SLURM_HET_JOB_ID=123", "SLURM_HET_JOB_OFFSET=1"}), false)
          .value()
          .job,
      (SlurmJob{124, "123+1"}));
  EXPECT_EQ(
      ParseProcessEnviron(
          Environ({"SLURM_JOBID=124", "SLURM_PACK_JOB_ID=123", "SLURM_PACK_JOB_OFFSET=1"}), false)
          .value()
          .job,
      (SlurmJob{124, "123+1"}));
}

TEST(ProcessEnvironTest, HalfPairsFallBackToTheNumber) {
  EXPECT_EQ(ParseProcessEnviron(Environ({"SLURM_JOB_ID=130", "SLURM_ARRAY_JOB_ID=123"}), false)
                .value()
                .job,
            (SlurmJob{130, "130"}));
  EXPECT_EQ(
      ParseProcessEnviron(
          Environ({"SLURM_JOB_ID=130", "SLURM_HET_JOB_ID=1", "SLURM_HET_JOB_OFFSET=x"}), false)
          .value()
          .job,
      (SlurmJob{130, "130"}));
}

TEST(ProcessEnvironTest, NoJobAndOddEntries) {
  const SlurmEnviron env =
      ParseProcessEnviron(Environ({"HOME=/root", "not-a-variable", "", "=x"}), false).value();
  EXPECT_EQ(env.job, std::nullopt);
  EXPECT_EQ(env.cuda_visible_devices, std::nullopt);
  EXPECT_EQ(ParseProcessEnviron("", false).value().job, std::nullopt);
}

TEST(ProcessEnvironTest, FirstDuplicateWins) {
  EXPECT_EQ(ParseProcessEnviron(Environ({"SLURM_JOB_ID=5", "SLURM_JOB_ID=6"}), false).value().job,
            (SlurmJob{5, "5"}));
}

TEST(ProcessEnvironTest, TruncatedDropsTheCutEntry) {
  // "SLURM_JOB_ID=12" may be the first bytes of "SLURM_JOB_ID=123".
  const std::string bytes = Environ({"A=1"}) + "SLURM_JOB_ID=12";
  EXPECT_EQ(ParseProcessEnviron(bytes, true).value().job, std::nullopt);
  EXPECT_EQ(ParseProcessEnviron(bytes, false).value().job, (SlurmJob{12, "12"}));
}

TEST(ProcessEnvironTest, MalformedJobId) {
  const Status status = ParseProcessEnviron(Environ({"SLURM_JOB_ID=12a"}), false).status();
  EXPECT_EQ(status.message(), "SLURM_JOB_ID=\"12a\" is not a job id");
  EXPECT_EQ(status.reason(), "environ_malformed");
  EXPECT_FALSE(ParseProcessEnviron(Environ({"SLURM_JOB_ID=0"}), false).ok());
}

}  // namespace
}  // namespace expanse::attribution
