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

namespace expanse::agent {
namespace {

// A worker's health report is outside input: members of the wrong type, or nested past what
// a heartbeat may carry, are left out; nothing throws (a throw here ended the controller's
// heartbeat thread, and with it the daemon).
TEST(HeartbeatBuilderTest, HostileWorkerReportsNeverThrow) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const std::string payloads[] = {
      R"({"inventory": 5})",
      R"({"inventory": {"gpus": 5, "driver_version": 580}})",
      R"({"inventory": {"gpus": [5, {"uuid": 7}, {"uuid": "GPU-ok", "name": 3}],
          "driver_version": 580}, "gpu_use": "x"})",
      R"({"last_sample_ms": "yesterday", "capabilities": 5})",
      R"({"last_sample_ms": 18446744073709551615})",
      R"([1, 2])",
      "not json",
      R"({"capabilities": {"nested": )" + deep + "}}",
  };
  for (const std::string& payload : payloads) {
    HeartbeatInputs in;
    in.controller_host = "ctl";
    spool::WorkerHealthReport report;
    report.host = "w1";
    report.fresh = true;
    report.payload = payload;
    in.workers.reports.push_back(report);
    nlohmann::json hb;
    ASSERT_NO_THROW(hb = BuildHeartbeat(in)) << payload;
    ASSERT_NO_THROW((void)hb.dump()) << payload;
    for (const auto& node : hb["nodes"]) {
      for (const auto& gpu : node["gpus"]) {
        EXPECT_TRUE(gpu["uuid"].is_string()) << payload;
        EXPECT_TRUE(!gpu.contains("model") || gpu["model"].is_string()) << payload;
        EXPECT_TRUE(!gpu.contains("driver") || gpu["driver"].is_string()) << payload;
      }
    }
    for (const auto& r : hb["workers"]["reports"])
      EXPECT_TRUE(r["last_sample_ms"].is_number_integer()) << payload;
  }
}

}  // namespace
}  // namespace expanse::agent

namespace expanse::agent {
namespace {

// The server refuses a whole heartbeat for one bad member; what a worker reported is relayed
// only as far as it meets the heartbeat's rules (docs/formats/heartbeat.md).
TEST(HeartbeatBuilderTest, RelaysOnlyWhatTheHeartbeatRulesAllow) {
  nlohmann::json processes = nlohmann::json::array();
  for (int pid = 1; pid <= 100; ++pid)
    processes.push_back({{"pid", pid}, {"job_id", "7"}, {"of_allocated_job", "yes"}});
  processes.push_back({{"job_id", "no pid"}});
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < 70; ++i)
    gpus.push_back({{"uuid", "GPU-" + std::to_string(i)}, {"index", i}});
  const nlohmann::json health = {
      {"inventory", {{"gpus", gpus}, {"driver_version", std::string(65, '5')}}},
      {"gpu_use",
       {{{"uuid", "GPU-0"},
         {"state", "busy"},
         {"jobs", {"7", 8, "", std::string(65, 'j')}},
         {"processes", processes}},
        {{"uuid", "GPU-1"}, {"state", "melting"}}}},
      {"capabilities",
       {{"nvml", {{"state", "ok"}, {"detail", "extra"}}},
        {"warp_drive", {{"state", "ok"}}},
        {"cupti", {{"state", "broken"}}},
        {"py_stacks", {{"state", "degraded"}, {"reason", std::string(2000, 'r')}}}}}};
  HeartbeatInputs in;
  in.controller_host = "ctl";
  spool::WorkerHealthReport report;
  report.host = "w1";
  report.fresh = true;
  report.payload = health.dump();
  in.workers.reports.push_back(report);

  const nlohmann::json hb = BuildHeartbeat(in);
  const nlohmann::json& w1 = hb["nodes"][1];
  ASSERT_EQ(w1["gpus"].size(), 64u);
  EXPECT_FALSE(w1["gpus"][0].contains("driver"));  // longer than 64 bytes
  const nlohmann::json& use = w1["gpus"][0]["use"];
  EXPECT_EQ(use["jobs"], nlohmann::json::array({"7"}));
  ASSERT_EQ(use["processes"].size(), 64u);
  EXPECT_FALSE(use["processes"][0].contains("of_allocated_job"));  // not a boolean
  EXPECT_EQ(use["processes"][0]["job_id"], "7");
  EXPECT_FALSE(w1["gpus"][1].contains("use"));  // an unknown state
  const nlohmann::json& caps = hb["workers"]["reports"][0]["capabilities"];
  EXPECT_EQ(caps,
            nlohmann::json({{"nvml", {{"state", "ok"}}}, {"py_stacks", {{"state", "degraded"}}}}));
}

}  // namespace
}  // namespace expanse::agent
