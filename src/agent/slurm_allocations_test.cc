#include "agent/slurm_allocations.h"

#include <gtest/gtest.h>

#include "agent/gpu_json.h"

namespace expanse::agent {
namespace slurm_allocations_test {
namespace {

constexpr int64_t kStart = 1'800'000'000'000;

// Two GPUs whose minors run opposite to their NVML indices, as on worker2 of the test cluster.
std::vector<gpu::GpuInfo> Reversed() {
  return {gpu::GpuInfo{0, 3, "GPU-minor3", "", "H200", 100},
          gpu::GpuInfo{1, 2, "GPU-minor2", "", "H200", 100}};
}

slurm::JobInfo Running(const std::string& id, int64_t slurm_id, const std::string& host,
                       std::vector<int> indices) {
  slurm::JobInfo job;
  job.job_id = id;
  job.slurm_job_id = slurm_id;
  job.state = "RUNNING";
  job.start_ms = kStart;
  job.gpu_indices[host] = std::move(indices);
  return job;
}

constexpr char kGres[] = "NodeName=w2 Name=gpu File=/dev/nvidia[2-3]\n";

TEST(SlurmAllocationFallbackTest, MapsGresIndicesThroughGresConfNotNvmlIndex) {
  SlurmAllocationFallback fallback(kGres, kStart - 1000);
  std::vector<std::string> problems;
  const auto out = fallback.Reconcile({Running("9", 9, "w2", {0})}, {{"w2", Reversed()}},
                                      kStart + SlurmAllocationFallback::kHookGraceMs, &problems);
  ASSERT_EQ(out.size(), 1u);
  // GRES index 0 is gres.conf's first file, /dev/nvidia2: NVML index 1.
  EXPECT_EQ(out[0].gpu_uuid, "GPU-minor2");
  EXPECT_EQ(out[0].gpu_index, 1);
  EXPECT_EQ(out[0].gpu_minor, 2);
  EXPECT_EQ(out[0].from_ms, kStart);
  EXPECT_EQ(out[0].to_ms, 0);
  EXPECT_TRUE(problems.empty());
}

// An array task's display id is not its number: the allocation carries the number, which the
// nodes' cgroups and burst inbox know the job by.
TEST(SlurmAllocationFallbackTest, AnArrayTaskKeepsItsOwnSlurmNumber) {
  SlurmAllocationFallback fallback(kGres, kStart + 1000);
  std::vector<std::string> problems;
  const auto out =
      fallback.Reconcile({Running("123_4", 130, "w2", {0, 1}), Running("200+1", 202, "w2", {})},
                         {{"w2", Reversed()}}, kStart + 2000, &problems);
  ASSERT_EQ(out.size(), 2u);
  for (const wire::GpuAllocationRecord& a : out) {
    EXPECT_EQ(a.job_id, "123_4");
    EXPECT_EQ(a.slurm_job_id, 130);
  }
  EXPECT_TRUE(problems.empty());
}

TEST(SlurmAllocationFallbackTest, HooksWinAndTheGraceWaitsForThem) {
  SlurmAllocationFallback fallback(kGres, kStart - 1000);
  std::vector<std::string> problems;
  const std::map<std::string, std::vector<gpu::GpuInfo>> inv = {{"w2", Reversed()}};
  // Within the grace: nothing yet, the Prolog's event may still be on its way.
  EXPECT_TRUE(
      fallback.Reconcile({Running("9", 9, "w2", {0})}, inv, kStart + 1000, &problems).empty());
  fallback.NoteHookAllocations({{.job_id = "9", .host = "w2", .gpu_uuid = "GPU-minor2"}});
  EXPECT_TRUE(
      fallback.Reconcile({Running("9", 9, "w2", {0})}, inv, kStart + 600'000, &problems).empty());
}

TEST(SlurmAllocationFallbackTest, OpensOnceAndClosesWhenTheJobEnds) {
  SlurmAllocationFallback fallback(kGres, kStart - 1000);
  std::vector<std::string> problems;
  const std::map<std::string, std::vector<gpu::GpuInfo>> inv = {{"w2", Reversed()}};
  const int64_t later = kStart + 120'000;
  EXPECT_EQ(fallback.Reconcile({Running("4_1", 12, "w2", {0, 1})}, inv, later, &problems).size(),
            2u);
  EXPECT_TRUE(
      fallback.Reconcile({Running("4_1", 12, "w2", {0, 1})}, inv, later + 2000, &problems).empty());
  slurm::JobInfo done = Running("4_1", 12, "w2", {0, 1});
  done.state = "COMPLETED";
  done.end_ms = later + 3000;
  const auto closed = fallback.Reconcile({done}, inv, later + 9000, &problems);
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[0].to_ms, later + 3000);  // SLURM's end, not when we noticed
  EXPECT_EQ(closed[0].job_id, "4_1");
  // Gone from squeue altogether: nothing left to close.
  EXPECT_TRUE(fallback.Reconcile({}, inv, later + 20'000, &problems).empty());
}

// The daemon started after the job: its hooks ran before anyone listened (or were not wired), so
// SLURM's record is used at once.
TEST(SlurmAllocationFallbackTest, AJobRunningBeforeTheDaemonStartedGetsNoGrace) {
  SlurmAllocationFallback fallback(kGres, kStart + 5000);
  std::vector<std::string> problems;
  EXPECT_EQ(
      fallback
          .Reconcile({Running("9", 9, "w2", {1})}, {{"w2", Reversed()}}, kStart + 6000, &problems)
          .size(),
      1u);
}

TEST(SlurmAllocationFallbackTest, InventoriesFromWorkerReportsSkipWhatTheyCannotTrust) {
  gpu::Inventory inventory;
  inventory.gpus = Reversed();
  nlohmann::json json = ToJson(inventory);
  json["gpus"].push_back({{"uuid", 7}, {"index", 2}});
  json["gpus"].push_back({{"uuid", "GPU-x"}, {"index", -1}});
  json["gpus"].push_back("garbage");
  // 2^32 + 1 would have been cut to index 1 (and minor 2^32 + 2 to minor 2): another GPU's.
  json["gpus"].push_back({{"uuid", "GPU-wrap"}, {"index", 4'294'967'297ull}});
  json["gpus"].push_back({{"uuid", "GPU-wrap-minor"}, {"index", 3u}, {"minor", 4'294'967'298ull}});
  const std::vector<gpu::GpuInfo> gpus = GpusFromJson(json);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[2].uuid, "GPU-wrap-minor");
  EXPECT_EQ(gpus[2].index, 3u);
  EXPECT_FALSE(gpus[2].minor.has_value()) << "a minor past uint32_t is not one";
  EXPECT_EQ(gpus[1].uuid, "GPU-minor2");
  EXPECT_EQ(gpus[1].index, 1u);
  EXPECT_EQ(gpus[1].minor, 2u);
  EXPECT_TRUE(GpusFromJson(nlohmann::json::array()).empty());
}

TEST(SlurmAllocationFallbackTest, UnknownHostWaitsAndBadIndexIsAProblem) {
  SlurmAllocationFallback fallback(kGres, kStart - 1000);
  std::vector<std::string> problems;
  const int64_t later = kStart + 120'000;
  EXPECT_TRUE(fallback.Reconcile({Running("9", 9, "w2", {0})}, {}, later, &problems).empty());
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(
      fallback.Reconcile({Running("9", 9, "w2", {5})}, {{"w2", Reversed()}}, later, &problems)
          .empty());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("job 9 on w2"), std::string::npos) << problems[0];
  // Tried again every round, reported once while it stays the same.
  fallback.Reconcile({Running("9", 9, "w2", {5})}, {{"w2", Reversed()}}, later + 10'000, &problems);
  EXPECT_EQ(problems.size(), 1u);
  // Once the job is gone and a new one has the same trouble, that one is reported.
  fallback.Reconcile({}, {{"w2", Reversed()}}, later + 20'000, &problems);
  fallback.Reconcile({Running("9", 9, "w2", {5})}, {{"w2", Reversed()}}, later + 30'000, &problems);
  EXPECT_EQ(problems.size(), 2u);
}

}  // namespace
}  // namespace slurm_allocations_test
}  // namespace expanse::agent
