#include "agent/heartbeat_builder.h"

#include <gtest/gtest.h>

namespace expanse::agent {
namespace {

// The use view a worker put in its health report lands on that worker's GPU in nodes[], and the
// controller's own view on its GPU; a GPU the view does not name gets no "use".
TEST(HeartbeatBuilderTest, CarriesEachNodesGpuUseView) {
  HeartbeatInputs in;
  in.daemon_version = "1.0.0";
  in.controller_host = "ctl";
  in.controller_inventory.gpus.push_back(gpu::GpuInfo{0, 0, "GPU-c", "", "H200", 100});
  in.controller_gpu_use = nlohmann::json::parse(
      R"([{"uuid": "GPU-c", "state": "allocated_idle", "jobs": ["9"], "processes": []}])");
  spool::WorkerHealthReport report;
  report.host = "w1";
  report.fresh = true;
  report.payload = R"({"last_sample_ms": 5,
      "inventory": {"gpus": [{"uuid": "GPU-a", "index": 0}, {"uuid": "GPU-b", "index": 1}]},
      "gpu_use": [{"uuid": "GPU-b", "state": "unallocated_in_use", "jobs": [],
                   "processes": [{"pid": 7, "job_id": "3", "of_allocated_job": false,
                                  "outside_cgroup": true}]}]})";
  in.workers.reports.push_back(report);
  in.workers.fresh = 1;
  in.workers.hosts = 1;

  const nlohmann::json hb = BuildHeartbeat(in);
  ASSERT_EQ(hb["nodes"].size(), 2u);
  EXPECT_EQ(hb["nodes"][0]["gpus"][0]["use"]["state"], "allocated_idle");
  EXPECT_EQ(hb["nodes"][0]["gpus"][0]["use"]["jobs"][0], "9");
  EXPECT_FALSE(hb["nodes"][0]["gpus"][0]["use"].contains("uuid"));
  const nlohmann::json& w1 = hb["nodes"][1];
  EXPECT_EQ(w1["name"], "w1");
  EXPECT_FALSE(w1["gpus"][0].contains("use"));
  EXPECT_EQ(w1["gpus"][1]["use"]["state"], "unallocated_in_use");
  EXPECT_EQ(w1["gpus"][1]["use"]["processes"][0]["outside_cgroup"], true);
}

TEST(HeartbeatBuilderTest, ExpiredWorkerReportsAreNotRelayed) {
  HeartbeatInputs in;
  in.controller_host = "ctl";
  spool::WorkerHealthReport report;
  report.host = "w1";
  report.fresh = false;
  report.payload = R"({"inventory": {"gpus": [{"uuid": "GPU-a"}]}})";
  in.workers.reports.push_back(report);
  const nlohmann::json hb = BuildHeartbeat(in);
  EXPECT_EQ(hb["nodes"].size(), 1u);
  EXPECT_TRUE(hb["workers"]["reports"].empty());
}

}  // namespace
}  // namespace expanse::agent
