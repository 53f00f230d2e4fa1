#include "agent/gpu_use.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::agent {
namespace gpu_use_test {
namespace {

using attribution::testing::Environ;
using attribution::testing::FakeProc;
using attribution::testing::kUuid0;
using attribution::testing::kUuid1;
using attribution::testing::kUuid2;

constexpr std::string_view kJob7Cgroup = "0::/system.slice/slurmstepd.scope/job_7/step_0/task_0\n";
constexpr std::string_view kNoJobCgroup = "0::/system.slice/mydaemon.service\n";

wire::GpuAllocationRecord Allocation(std::string job_id, std::string gpu_uuid,
                                     int64_t slurm_job_id = 0) {
  wire::GpuAllocationRecord a;
  a.job_id = std::move(job_id);
  a.host = "w1";
  a.gpu_uuid = std::move(gpu_uuid);
  a.from_ms = 1;
  a.slurm_job_id = slurm_job_id;
  return a;
}

std::map<std::string, std::vector<wire::GpuAllocationRecord>> OpenJob7OnGpu0() {
  return {{"w1/7", {Allocation("7", std::string(kUuid0))}}};
}

// The test cluster's case: job 7 holds GPU 0 and runs there; a process that left job 7's
// cgroup (it daemonised) still holds GPU 1; GPU 2 is allocated to job 8, which has no process.
TEST(GpuUseTest, ViewFlagsTheProcessOutsideItsCgroupAndTheIdleAllocation) {
  FakeProc proc;
  proc.AddProcess(100, kJob7Cgroup, Environ({"SLURM_JOB_ID=7"}));
  proc.AddProcess(200, kNoJobCgroup, Environ({"SLURM_JOB_ID=7"}));
  attribution::AttributionOptions options;
  options.proc_root = proc.root();
  auto open = OpenJob7OnGpu0();
  open["w1/8"] = {Allocation("8", std::string(kUuid2))};
  const auto inventory = attribution::testing::ReversedMinorInventory();
  const GpuUseResult use =
      ComputeGpuUse(inventory, {{100, std::string(kUuid0), 1000}, {200, std::string(kUuid1), 500}},
                    AllocationsFromOpen(open), options);
  const nlohmann::json json = GpuUseToJson(use.view);
  ASSERT_EQ(json.size(), 4u);
  EXPECT_EQ(json[0]["uuid"], kUuid0);
  EXPECT_EQ(json[0]["state"], "busy");
  EXPECT_EQ(json[0]["jobs"], nlohmann::json::array({"7"}));
  EXPECT_EQ(json[0]["processes"][0]["pid"], 100);
  EXPECT_EQ(json[0]["processes"][0]["of_allocated_job"], true);
  EXPECT_EQ(json[0]["processes"][0]["outside_cgroup"], false);

  EXPECT_EQ(json[1]["state"], "unallocated_in_use");
  EXPECT_EQ(json[1]["processes"][0]["job_id"], "7");
  EXPECT_EQ(json[1]["processes"][0]["outside_cgroup"], true);
  EXPECT_EQ(json[1]["processes"][0]["of_allocated_job"], false);
  EXPECT_EQ(json[1]["processes"][0]["used_memory_mib"], 500);

  EXPECT_EQ(json[2]["state"], "allocated_idle");
  EXPECT_EQ(json[2]["jobs"], nlohmann::json::array({"8"}));
  EXPECT_EQ(json[3]["state"], "free");

  telemetry::SeriesBuffer buffer;
  AddGpuUseSeries(use.view, "w1", 5000, buffer);
  const std::vector<wire::SeriesRecord> series = buffer.Take();
  auto value = [&](const std::string& device, const std::string& metric) {
    for (const auto& s : series) {
      if (s.device == device && s.metric == metric)
        return s.v[0];
    }
    ADD_FAILURE() << "no series " << device << " " << metric;
    return -1.0;
  };
  EXPECT_EQ(value(std::string(kUuid0), "gpu.foreign_processes"), 0);
  EXPECT_EQ(value(std::string(kUuid1), "gpu.foreign_processes"), 1);
  EXPECT_EQ(value(std::string(kUuid1), "gpu.processes"), 1);
  EXPECT_EQ(value("job/7", "job.gpu_memory_mib"), 1500);  // both processes carry job 7
  EXPECT_EQ(value("job/7", "job.gpu_processes"), 2);
  EXPECT_EQ(value("job/8", "job.gpu_processes"), 0);  // allocated, nothing running
}

// gres/shard: SLURM gave GPU 0 to jobs 7 and 9; only job 7 runs there. The GPU says two jobs
// hold it, so the verdicts do not charge job 9 with job 7's kernels.
TEST(GpuUseTest, AGpuSharedByTwoJobsSaysSoInItsSeries) {
  FakeProc proc;
  proc.AddProcess(100, kJob7Cgroup, Environ({"SLURM_JOB_ID=7"}));
  attribution::AttributionOptions options;
  options.proc_root = proc.root();
  auto open = OpenJob7OnGpu0();
  open["w1/9"] = {Allocation("9", std::string(kUuid0))};
  const GpuUseResult use =
      ComputeGpuUse(attribution::testing::ReversedMinorInventory(),
                    {{100, std::string(kUuid0), 1000}}, AllocationsFromOpen(open), options);
  telemetry::SeriesBuffer buffer;
  AddGpuUseSeries(use.view, "w1", 5000, buffer);
  std::map<std::pair<std::string, std::string>, double> values;
  for (const auto& s : buffer.Take())
    values[{s.device, s.metric}] = s.v.at(0);
  EXPECT_EQ(values.at({std::string(kUuid0), "gpu.allocated_jobs"}), 2);
  EXPECT_EQ(values.at({std::string(kUuid1), "gpu.allocated_jobs"}), 0);
  EXPECT_EQ(values.at({"job/7", "job.gpu_processes"}), 1);
  EXPECT_EQ(values.at({"job/9", "job.gpu_processes"}), 0);

  // NVML could not list the processes: the sharing is still said, no process count is.
  AddGpuUseSeries(use.view, "w1", 6000, buffer, /*processes_known=*/false);
  std::set<std::string> metrics;
  for (const auto& s : buffer.Take())
    metrics.insert(s.metric);
  EXPECT_EQ(metrics, std::set<std::string>{"gpu.allocated_jobs"});
}

// Damaged saved entries never get this far (NodeCollector::LoadOpenAllocations drops them);
// what is left to skip here is an entry without a job number SLURM could have.
TEST(GpuUseTest, AllocationsWithoutAJobNumberAreSkipped) {
  std::map<std::string, std::vector<wire::GpuAllocationRecord>> open = {
      {"a", {}},
      {"c", {Allocation("notanumber", "x")}},
      {"d", {Allocation("9", "GPU-9")}},
      // A het component: display id 17+1, SLURM job 18 (what its processes' cgroup names).
      {"e", {Allocation("17+1", "GPU-18", 18)}}};
  const auto allocations = AllocationsFromOpen(open);
  ASSERT_EQ(allocations.size(), 2u);
  EXPECT_EQ(allocations[0].job.job_id, 9u);
  EXPECT_EQ(allocations[0].gpu_uuids, std::vector<std::string>{"GPU-9"});
  EXPECT_EQ(allocations[1].job.job_id, 18u);
  EXPECT_EQ(allocations[1].job.display_id, "17+1");
}

TEST(GpuUseTest, ProcessListsAreCapped) {
  attribution::NodeGpuUse view;
  attribution::GpuUse g;
  g.uuid = "GPU-x";
  g.state = attribution::GpuUseState::kUnallocatedInUse;
  for (uint32_t pid = 1; pid <= 100; ++pid) {
    attribution::GpuProcessUse p;
    p.process.process = {pid, "GPU-x", 1};
    g.processes.push_back(p);
  }
  view.gpus.push_back(g);
  const nlohmann::json json = GpuUseToJson(view);
  EXPECT_EQ(json[0]["processes"].size(), kMaxUseProcessesPerGpu);
}

}  // namespace
}  // namespace gpu_use_test
}  // namespace expanse::agent
