// Test-only: a real expanse-server in process (server/api_test_util.h: ServerApp on loopback over
// SQLite, a manual clock) holding three finished jobs ingested as a compute's daemon sends them,
// so the report's client and renderer meet the real API's answers:
//
//   77    ana, 2 GPUs of worker2 for 10 min: GPU-busy at 95 % with 16 GiB, GPU-idle at 0 with
//         no process (no_process, over_allocated, memory_oversized on an H200)
//   80_3  ana, an array task on 1 GPU of worker3 at 20 %, its stacks in PyTorch's DataLoader
//         (input_bound)
//   90    bob, 1 GPU of worker3, busy
#ifndef EXPANSE_REPORT_REPORT_TEST_SERVER_H_
#define EXPANSE_REPORT_REPORT_TEST_SERVER_H_

#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/report_settings.h"
#include "server/api_test_util.h"

namespace expanse::report::testing {

using nlohmann::json;

inline constexpr int64_t kStart = server::api_testing::kStart;
inline constexpr int64_t kMinute = 60'000;

class ReportServerTest : public server::api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    if (HasFatalFailure())
      return;
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
    Reply hb = Call("POST", "/cp/v1/heartbeat", Heartbeat(), Bearer(credential_));
    ASSERT_EQ(hb.status, 200) << hb.body;
    Reply ingested = Call("POST", "/dp/v1/ingest", Batch(), Bearer(credential_));
    ASSERT_EQ(ingested.status, 200) << ingested.body;
    clock_.Set(kStart + 3 * 3'600'000);
  }

  Connection ConnectionToServer() const {
    return {.server_url = "http://127.0.0.1:" + std::to_string(app_->control_port()),
            .ca_file = "",
            .org = "acme",
            .compute = compute_};
  }

  static std::string Heartbeat() {
    json gpus2 = json::array(), gpus3 = json::array();
    gpus2.push_back(Gpu("GPU-busy", 0));
    gpus2.push_back(Gpu("GPU-idle", 1));
    gpus3.push_back(Gpu("GPU-slow", 0));
    gpus3.push_back(Gpu("GPU-bob", 1));
    return json{
        {"version", 1},
        {"daemon_version", "0.1.0"},
        {"controller_host", "ctl"},
        {"nodes", {{{"name", "worker2"}, {"gpus", gpus2}}, {{"name", "worker3"}, {"gpus", gpus3}}}}}
        .dump();
  }

  static json Gpu(const std::string& uuid, int index) {
    return {{"uuid", uuid},
            {"index", index},
            {"minor", index},
            {"model", "NVIDIA H200"},
            {"memory_total_mib", 143771}};
  }

  // `value` once a second for ten minutes from `from_ms`.
  static void Add(json& series, const std::string& host, const std::string& device,
                  const std::string& metric, int64_t from_ms, double value) {
    json dt = json::array(), v = json::array();
    for (int i = 0; i < 600; ++i) {
      dt.push_back(i == 0 ? 0 : 1000);
      v.push_back(value);
    }
    series.push_back({{"host", host},
                      {"device", device},
                      {"metric", metric},
                      {"t0", from_ms},
                      {"dt", dt},
                      {"v", v}});
  }

  static json Job(const std::string& id, const std::string& name, const std::string& user,
                  const std::string& nodes, int64_t gpus, int64_t start_ms) {
    return {{"job_id", id},
            {"name", name},
            {"state", "COMPLETED"},
            {"user", user},
            {"account", "ml"},
            {"partition", "gpu"},
            {"nodes", nodes},
            {"req_nodes", 1},
            {"req_cpus", 8},
            {"req_gpus", gpus},
            {"req_mem_mib", 65536},
            {"time_limit_s", 14400},
            {"submit_ms", start_ms - 5'000},
            {"start_ms", start_ms},
            {"end_ms", start_ms + 10 * kMinute},
            {"observed_ms", start_ms}};
  }

  static json Allocation(const std::string& job, const std::string& host, const std::string& gpu,
                         int index, int64_t start_ms) {
    return {{"job_id", job},
            {"host", host},
            {"gpu_uuid", gpu},
            {"gpu_index", index},
            {"gpu_minor", index},
            {"from_ms", start_ms},
            {"to_ms", start_ms + 10 * kMinute}};
  }

  static std::string Batch() {
    const int64_t t77 = kStart;
    const int64_t t80 = kStart + 20 * kMinute;
    const int64_t t90 = kStart + 40 * kMinute;
    json series = json::array();
    Add(series, "worker2", "GPU-busy", "gpu.sm_util", t77, 95);
    Add(series, "worker2", "GPU-busy", "gpu.processes", t77, 1);
    Add(series, "worker2", "GPU-busy", "gpu.mem_used_mib", t77, 16384);
    Add(series, "worker2", "GPU-busy", "gpu.power_w", t77, 420);
    Add(series, "worker2", "GPU-idle", "gpu.sm_util", t77, 0);
    Add(series, "worker2", "GPU-idle", "gpu.processes", t77, 0);
    Add(series, "worker2", "GPU-idle", "gpu.mem_used_mib", t77, 0);
    Add(series, "worker2", "GPU-idle", "gpu.power_w", t77, 75);
    Add(series, "worker2", "job/77", "job.cpu_used_cores", t77, 1.5);
    Add(series, "worker2", "job/77", "job.mem_used_mib", t77, 6144);
    Add(series, "worker2", "job/77", "job.gpu_processes", t77, 1);
    Add(series, "worker3", "GPU-slow", "gpu.sm_util", t80, 20);
    Add(series, "worker3", "GPU-slow", "gpu.processes", t80, 1);
    Add(series, "worker3", "GPU-slow", "gpu.mem_used_mib", t80, 70000);
    Add(series, "worker3", "GPU-slow", "gpu.power_w", t80, 300);
    Add(series, "worker3", "job/80_3", "job.cpu_used_cores", t80, 7.8);
    Add(series, "worker3", "job/80_3", "job.mem_used_mib", t80, 30000);
    Add(series, "worker3", "job/80_3", "job.gpu_processes", t80, 1);
    Add(series, "worker3", "GPU-bob", "gpu.sm_util", t90, 80);
    Add(series, "worker3", "GPU-bob", "gpu.processes", t90, 1);
    json stacks = json::array();
    for (int minute = 0; minute < 10; ++minute) {
      stacks.push_back(
          {{"job_id", "80_3"},
           {"host", "worker3"},
           {"window_start_ms", t80 + minute * kMinute},
           {"window_end_ms", t80 + (minute + 1) * kMinute},
           {"folded",
            "train.py:<module>:1;train.py:main:40;torch/utils/data/dataloader.py:__next__:631;"
            "torch/utils/data/dataloader.py:_next_data:675"},
           {"thread_state", "idle"},
           {"count", 40},
           {"gpu_idle", true}});
      stacks.push_back({{"job_id", "80_3"},
                        {"host", "worker3"},
                        {"window_start_ms", t80 + minute * kMinute},
                        {"window_end_ms", t80 + (minute + 1) * kMinute},
                        {"folded", "train.py:<module>:1;train.py:main:44;model.py:forward:88"},
                        {"thread_state", "gil"},
                        {"count", 10},
                        {"gpu_idle", true}});
    }
    return json{{"version", 1},
                {"stream", "telemetry"},
                {"sequence", 1},
                {"series", series},
                {"jobs",
                 {Job("77", "train", "ana", "worker2", 2, t77),
                  Job("80_3", "loader", "ana", "worker3", 1, t80),
                  Job("90", "bobs", "bob", "worker3", 1, t90)}},
                {"gpu_allocations",
                 {Allocation("77", "worker2", "GPU-busy", 0, t77),
                  Allocation("77", "worker2", "GPU-idle", 1, t77),
                  Allocation("80_3", "worker3", "GPU-slow", 0, t80),
                  Allocation("90", "worker3", "GPU-bob", 1, t90)}},
                {"stacks", stacks}}
        .dump();
  }

  std::string compute_;
  std::string credential_;
};

}  // namespace expanse::report::testing

#endif  // EXPANSE_REPORT_REPORT_TEST_SERVER_H_
