// The verdicts of a job from real stores: series in the telemetry store, allocations and stacks
// in the SQLite job store, gathered onto the grid and judged.
#include "server/verdict_evidence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/ledger_test_util.h"

namespace expanse::server {
namespace verdict_evidence_test {
namespace {

using ::testing::HasSubstr;
using namespace ledger_testing;

class VerdictEvidenceTest : public LedgerTest {
 protected:
  // `metric` of `device` on w1 once a second over [from_ms, to_ms), all `value`.
  void Series(const std::string& device, const std::string& metric, int64_t from_ms, int64_t to_ms,
              double value) {
    std::vector<tsdb::Sample> samples;
    for (int64_t t = from_ms; t < to_ms; t += kSecond)
      samples.push_back({t, value});
    const tsdb::Batch batch{{{kCompute, "w1", device, metric}, samples}};
    auto appended = tsdb_->Append("s" + std::to_string(++series_batches_), batch);
    ASSERT_TRUE(appended.ok()) << appended.status();
  }
  int series_batches_ = 0;
};

TEST_F(VerdictEvidenceTest, AJobsSeriesAndStacksGiveItsVerdicts) {
  const int64_t start = kM, end = kM + 10 * kMinute;
  store::JobRecord job = Job("42", start, end, 2);
  job.req_cpus = 8;
  Allocate("42", "GPU-a", 0, start, end);
  Allocate("42", "GPU-b", 1, start, end);
  // GPU-a: busy for five minutes, then waiting on its input at 10 %; GPU-b: nothing on it.
  Series("GPU-a", "gpu.sm_util", start, start + 5 * kMinute, 95);
  Series("GPU-a", "gpu.sm_util", start + 5 * kMinute, end, 10);
  Series("GPU-a", "gpu.processes", start, end, 1);
  Series("GPU-b", "gpu.sm_util", start, end, 0);
  Series("GPU-b", "gpu.processes", start, end, 0);
  Series("GPU-a", "gpu.mem_used_mib", start, end, 60'000);
  Series("job/42", "job.cpu_used_cores", start, end, 2);
  Series("job/42", "job.gpu_processes", start, end, 1);
  store::StackSample loader{kCompute, "42",
                            "w1",     start + 5 * kMinute,
                            end,      "train.py:main:9;torch/utils/data/dataloader.py:__next__:631",
                            "idle",   240,
                            true};
  store::StackSample early{
      kCompute, "42", "w1", start, start + 5 * kMinute, "train.py:main:9;train.py:step:20",
      "gil",    300,  false};
  ASSERT_TRUE(jobs().PutStacks({loader, early}).ok());

  const std::map<std::string, GpuModel> models = {{"GPU-a", {"NVIDIA H200", 143'771}},
                                                  {"GPU-b", {"NVIDIA H200", 143'771}}};
  auto cells = GatherJobCells(*tsdb_, job, AllocationsOf("42"), {"w1"}, models, end);
  ASSERT_TRUE(cells.ok()) << cells.status();
  EXPECT_EQ(cells->cell_ms, 10 * kSecond);
  EXPECT_EQ(cells->cells, 60u);
  ASSERT_EQ(cells->gpus.size(), 2u);
  EXPECT_EQ(cells->gpus[0].cells[0].samples, 10u);
  EXPECT_DOUBLE_EQ(cells->gpus[0].cells[0].util_mean, 95);
  EXPECT_DOUBLE_EQ(cells->hosts[0].cores_allocated, 8);

  auto verdicts = JobVerdicts(jobs(), job, *cells, {});
  ASSERT_TRUE(verdicts.ok()) << verdicts.status();
  std::vector<std::string> codes;
  for (const Verdict& v : *verdicts)
    codes.push_back(v.code + " " + std::to_string((v.from_ms - start) / kSecond) + "-" +
                    std::to_string((v.to_ms - start) / kSecond));
  EXPECT_EQ(codes, (std::vector<std::string>{"no_process 0-600", "over_allocated 0-600",
                                             "input_bound 300-600"}));
  const Verdict& input = verdicts->back();
  EXPECT_EQ(input.gpus, std::vector<std::string>{"GPU-a"});
  EXPECT_EQ(input.evidence["stacks"]["samples"], 240);  // the GPU-idle samples only
  EXPECT_THAT(input.suggestion, HasSubstr("torch/utils/data/dataloader.py:__next__:631"));
}

// A job requeued after its node failed runs again elsewhere: its record is the new run's, and
// the first run's GPUs (ended before it) are neither tracked nor counted. Judged with them, the
// 2-GPU job held "4 GPUs, 2 of them never used" (over_allocated) and a grid from the first run.
TEST_F(VerdictEvidenceTest, ARequeuedJobIsJudgedOnItsCurrentRunOnly) {
  const int64_t first = kM, requeued = kM + 30 * kMinute, end = requeued + 10 * kMinute;
  Allocate("45", "GPU-a", 0, first, first + 5 * kMinute, "w1");
  Allocate("45", "GPU-b", 1, first, 0, "w1");  // w1 failed: no Epilog closed it
  Allocate("45", "GPU-c", 0, requeued, end, "w2");
  Allocate("45", "GPU-d", 1, requeued, end, "w2");
  const store::JobRecord job = Job("45", requeued, end, 2);
  auto cells = GatherJobCells(*tsdb_, job, AllocationsOf("45"), {"w1", "w2"}, {}, end);
  ASSERT_TRUE(cells.ok()) << cells.status();
  EXPECT_EQ(cells->start_ms, requeued);
  ASSERT_EQ(cells->gpus.size(), 2u);
  EXPECT_EQ(cells->gpus[0].uuid, "GPU-c");
  EXPECT_EQ(cells->gpus[1].uuid, "GPU-d");
}

TEST_F(VerdictEvidenceTest, ProcessCountsReadOncePerFlushHoldUntilTheNext) {
  // Counts come at each flush, here every 15 s, so some 10 s cells hold none: each holds until
  // the next, and the idle GPU is no_process throughout, not "processes unknown" (underused).
  const int64_t start = kM, end = kM + 2 * kMinute;
  store::JobRecord job = Job("43", start, end, 1);
  Allocate("43", "GPU-a", 0, start, end);
  Series("GPU-a", "gpu.sm_util", start, end, 0);
  std::vector<tsdb::Sample> counts;
  for (int64_t t = start + 5 * kSecond; t < end; t += 15 * kSecond)
    counts.push_back({t, 0});
  ASSERT_TRUE(
      tsdb_->Append("flushes", {{{kCompute, "w1", "GPU-a", "gpu.processes"}, counts}}).ok());
  auto cells = GatherJobCells(*tsdb_, job, AllocationsOf("43"), {"w1"}, {}, end);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->cell_ms, 10 * kSecond);
  for (size_t i = 0; i < cells->cells; ++i)
    EXPECT_EQ(cells->gpus[0].cells[i].processes, 0) << "cell " << i;
  auto verdicts = JobVerdicts(jobs(), job, *cells, {});
  ASSERT_TRUE(verdicts.ok()) << verdicts.status();
  ASSERT_EQ(verdicts->size(), 1u);
  EXPECT_EQ(verdicts->front().code, "no_process");
  EXPECT_EQ(verdicts->front().to_ms - verdicts->front().from_ms, 2 * kMinute);

  // A count holds a minute at most: after a longer silence the cells are unknown again.
  store::JobRecord longer = Job("44", start, start + 5 * kMinute, 1);
  Allocate("44", "GPU-b", 1, start, start + 5 * kMinute);
  Series("GPU-b", "gpu.sm_util", start, start + 5 * kMinute, 0);
  ASSERT_TRUE(
      tsdb_->Append("once", {{{kCompute, "w1", "GPU-b", "gpu.processes"}, {{start, 0}}}}).ok());
  cells = GatherJobCells(*tsdb_, longer, AllocationsOf("44"), {"w1"}, {}, start + 5 * kMinute);
  ASSERT_TRUE(cells.ok()) << cells.status();
  EXPECT_EQ(cells->gpus[0].cells[6].processes, 0);
  EXPECT_EQ(cells->gpus[0].cells[7].processes, -1);
}

TEST_F(VerdictEvidenceTest, ModelsComeFromTheHeartbeatAndAJobNotStartedHasNoCells) {
  const auto models = GpuModelsFromHeartbeat(
      R"({"nodes":[{"name":"w1","gpus":[{"uuid":"GPU-a","model":"NVIDIA H200",)"
      R"("memory_total_mib":143771},{"uuid":"GPU-b"}]}]})");
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models.at("GPU-a").model, "NVIDIA H200");
  EXPECT_EQ(models.at("GPU-a").memory_total_mib, 143771);
  EXPECT_EQ(models.at("GPU-b").memory_total_mib, -1);
  EXPECT_TRUE(GpuModelsFromHeartbeat("not json").empty());

  store::JobRecord pending = Job("43", 0, 0, 1);
  auto cells = GatherJobCells(*tsdb_, pending, {}, {}, {}, kM);
  ASSERT_TRUE(cells.ok());
  EXPECT_EQ(cells->cells, 0u);
  auto verdicts = JobVerdicts(jobs(), pending, *cells, {});
  ASSERT_TRUE(verdicts.ok());
  EXPECT_TRUE(verdicts->empty());
}

// Hosts come from node events, up to store::JobStore::kMaxRowsPerJob of them, and each holds five
// series of the grid's cells: they share the budget with the GPUs, so a job of few GPUs and
// many hosts gets a short grid too, not 720 cells on each of 16,384 hosts.
TEST_F(VerdictEvidenceTest, ManyHostsShareTheGridsCellBudget) {
  const int64_t start = kM, end = kM + 24 * 60 * kMinute;
  const store::JobRecord job = Job("46", start, end, 1);
  Allocate("46", "GPU-a", 0, start, end);
  std::vector<std::string> hosts;
  for (int64_t i = 0; i < store::JobStore::kMaxRowsPerJob; ++i)
    hosts.push_back("node" + std::to_string(i));
  auto cells = GatherJobCells(*tsdb_, job, AllocationsOf("46"), hosts, {}, end);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->hosts.size(), hosts.size());
  ASSERT_EQ(cells->gpus.size(), 1u);
  EXPECT_GE(cells->cells, 1u);
  EXPECT_LE(cells->cells * (cells->gpus.size() + cells->hosts.size()), kMaxVerdictGpuCells);
  EXPECT_EQ(cells->hosts[0].cpu_cores.size(), cells->cells);
  EXPECT_EQ(cells->gpus[0].cells.size(), cells->cells);
  // The grid still covers the whole job, ending at its end.
  EXPECT_EQ(cells->start_ms, start);
  EXPECT_GE(cells->start_ms + static_cast<int64_t>(cells->cells) * cells->cell_ms, end);

  // The GPUs' share is unchanged for a job of few hosts: 4096 GPUs on 512 hosts.
  std::vector<store::GpuAllocation> many;
  for (int i = 0; i < 4096; ++i) {
    store::GpuAllocation a;
    a.compute_id = kCompute;
    a.job_id = "46";
    a.host = "node" + std::to_string(i / 8);
    a.gpu_uuid = "GPU-" + std::to_string(i);
    a.from_ms = start;
    a.to_ms = end;
    many.push_back(a);
  }
  hosts.resize(512);
  cells = GatherJobCells(*tsdb_, job, many, hosts, {}, end);
  ASSERT_TRUE(cells.ok()) << cells.status();
  EXPECT_LE(cells->cells * (4096 + 512), kMaxVerdictGpuCells);
  EXPECT_GE(cells->cells, kMaxVerdictGpuCells / (4096 + 512) - 1);
}

}  // namespace
}  // namespace verdict_evidence_test
}  // namespace expanse::server
