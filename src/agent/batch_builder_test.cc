#include "agent/batch_builder.h"

#include <gtest/gtest.h>

namespace expanse::agent {
namespace {

TEST(BatchBuilderTest, RendersSectionsAndRenamesArrayTasks) {
  BatchBuilder batch;
  EXPECT_TRUE(batch.empty());
  ASSERT_TRUE(batch
                  .AddSpoolRecord("job_event", R"({"version":1,"kind":"start","job_id":"8",
                                  "host":"w1","at_ms":1000,"slurm_job_id":8})")
                  .ok());
  ASSERT_TRUE(batch
                  .AddSpoolRecord("gpu_allocation", R"({"job_id":"8","host":"w1",
                                  "gpu_uuid":"GPU-a","from_ms":1000,"to_ms":0})")
                  .ok());
  ASSERT_TRUE(batch
                  .AddSpoolRecord("gpu_series", R"([{"host":"w1","device":"job/8",
                                  "metric":"job.mem_used_mib","t0":1000,"dt":[0],"v":[5]}])")
                  .ok());
  ASSERT_TRUE(batch
                  .AddSpoolRecord("py_stacks", R"([{"job_id":"8","host":"w1",
                                  "window_start_ms":0,"window_end_ms":60000,
                                  "folded":"a.py:main:1","thread_state":"gil","count":3,
                                  "gpu_idle":false}])")
                  .ok());
  EXPECT_FALSE(batch.AddSpoolRecord("py_stacks", R"({"not":"an array"})").ok());
  EXPECT_TRUE(batch.AddSpoolRecord("future_kind", "{}").ok());  // from a newer sampler: ignored
  EXPECT_FALSE(batch.AddSpoolRecord("gpu_series", "{not json").ok());
  EXPECT_EQ(batch.samples(), 1u);

  // SLURM 22.05 gives the Prolog only SLURM_JOB_ID; squeue knows job 8 as array task 7_1.
  batch.RenameJobs([](const std::string& id) -> std::optional<std::string> {
    if (id == "8")
      return "7_1";
    return std::nullopt;
  });
  const nlohmann::json doc = batch.Render(42, "telemetry");
  EXPECT_EQ(doc["sequence"], 42);
  EXPECT_EQ(doc["stream"], "telemetry");
  EXPECT_EQ(doc["job_events"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["gpu_allocations"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["series"][0]["device"], "job/7_1");
  EXPECT_EQ(doc["stacks"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["stacks"][0]["count"], 3);
  EXPECT_FALSE(doc.contains("jobs"));
}

}  // namespace
}  // namespace expanse::agent
