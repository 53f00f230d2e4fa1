#include "slurm/job_fields.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::slurm::job_fields {
namespace job_fields_test {
namespace {

JobIdParts Plain(int64_t job_id) {
  JobIdParts parts;
  parts.job_id = job_id;
  return parts;
}

JobIdParts ArrayTask(int64_t job_id, int64_t array_job_id, int64_t task_id) {
  JobIdParts parts = Plain(job_id);
  parts.array_job_id = array_job_id;
  parts.array_task_id = task_id;
  return parts;
}

JobIdParts ArrayRest(int64_t array_job_id, std::string tasks) {
  JobIdParts parts = Plain(array_job_id);
  parts.array_job_id = array_job_id;
  parts.array_task_string = std::move(tasks);
  return parts;
}

JobIdParts HetComponent(int64_t job_id, int64_t het_job_id, int64_t offset) {
  JobIdParts parts = Plain(job_id);
  parts.het_job_id = het_job_id;
  parts.het_job_offset = offset;
  return parts;
}

TEST(FormatJobIdTest, PlainArrayAndHetIds) {
  EXPECT_EQ(FormatJobId(Plain(123)), "123");
  EXPECT_EQ(FormatJobId(ArrayTask(130, 123, 4)), "123_4");
  EXPECT_EQ(FormatJobId(ArrayTask(123, 123, 0)), "123_0");
  EXPECT_EQ(FormatJobId(ArrayRest(123, "5-9")), "123_[5-9]");
  EXPECT_EQ(FormatJobId(ArrayRest(123, "0x3E0")), "123_[5-9]");
  EXPECT_EQ(FormatJobId(HetComponent(124, 123, 1)), "123+1");
  EXPECT_EQ(FormatJobId(HetComponent(123, 123, 0)), "123+0");
  // An array record without task information falls back to the plain number.
  EXPECT_EQ(FormatJobId(ArrayRest(123, "")), "123");
}

TEST(TaskRangesFromBitmapTest, DecodesSacctBitmaps) {
  EXPECT_EQ(TaskRangesFromBitmap("0xE"), "1-3");  // sacct 22.05.8 for 4_[1-3]
  EXPECT_EQ(TaskRangesFromBitmap("0x1"), "0");
  EXPECT_EQ(TaskRangesFromBitmap("0x2A"), "1,3,5");
  EXPECT_EQ(TaskRangesFromBitmap("0xF0F"), "0-3,8-11");
  EXPECT_EQ(TaskRangesFromBitmap("0x8000"), "15");
  EXPECT_EQ(TaskRangesFromBitmap("0x0"), "");
  EXPECT_EQ(TaskRangesFromBitmap("1-3"), "1-3");
  EXPECT_EQ(TaskRangesFromBitmap("0xZ"), "0xZ");
  EXPECT_EQ(TaskRangesFromBitmap("0x"), "0x");
}

TEST(ReportedStateTest, OneStateFromAList) {
  const auto state = [](std::vector<std::string> states) { return ReportedState(states); };
  EXPECT_EQ(state({"RUNNING"}), "RUNNING");
  EXPECT_EQ(state({"PENDING", "REQUEUED"}), "PENDING");
  EXPECT_EQ(state({"REQUEUED", "PENDING"}), "PENDING");
  EXPECT_EQ(state({"COMPLETED", "COMPLETING"}), "COMPLETING");
  EXPECT_EQ(state({"STAGE_OUT"}), "STAGE_OUT");
  EXPECT_EQ(state({}), "");
}

TEST(StateClassesTest, WaitingAndEnded) {
  EXPECT_TRUE(IsWaitingState("PENDING"));
  EXPECT_TRUE(IsWaitingState("REQUEUE_HOLD"));
  EXPECT_FALSE(IsWaitingState("RUNNING"));
  EXPECT_TRUE(HasEnded("COMPLETING"));
  EXPECT_TRUE(HasEnded("OUT_OF_MEMORY"));
  EXPECT_FALSE(HasEnded("RUNNING"));
  EXPECT_FALSE(HasEnded("SUSPENDED"));
  EXPECT_FALSE(HasEnded("PENDING"));
}

}  // namespace
}  // namespace job_fields_test
}  // namespace expanse::slurm::job_fields
