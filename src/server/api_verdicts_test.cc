// Verdicts end to end: a job ingested from the compute's daemon (series, allocations) and its
// verdicts read back through the console API.
#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"

namespace expanse::server {
namespace api_verdicts_test {
namespace {

using api_testing::kStart;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kEnd = kStart + 600'000;

json Minutes10(const std::string& device, const std::string& metric, double value) {
  return api_testing::TenMinuteSeries(device, metric, value);
}

// Job 77 on two GPUs of worker2 for ten minutes, one sample a second: GPU-busy at 95 % with
// its process, GPU-idle at 0 with nothing on it.
std::string JobBatch() {
  json series = json::array();
  const auto add = [&](const std::string& device, const std::string& metric, double value) {
    series.push_back(Minutes10(device, metric, value));
  };
  add("GPU-busy", "gpu.sm_util", 95);
  add("GPU-busy", "gpu.processes", 1);
  add("GPU-idle", "gpu.sm_util", 0);
  add("GPU-idle", "gpu.processes", 0);
  json allocations = json::array();
  int index = 0;
  for (const char* gpu : {"GPU-busy", "GPU-idle"}) {
    allocations.push_back({{"job_id", "77"},
                           {"host", "worker2"},
                           {"gpu_uuid", gpu},
                           {"gpu_index", index++},
                           {"from_ms", kStart},
                           {"to_ms", kEnd}});
  }
  return json{{"version", 1},
              {"stream", "telemetry"},
              {"sequence", 1},
              {"series", series},
              {"jobs",
               {{{"job_id", "77"},
                 {"state", "COMPLETED"},
                 {"user", "ana"},
                 {"account", "ml"},
                 {"partition", "gpu"},
                 {"req_gpus", 2},
                 {"start_ms", kStart},
                 {"end_ms", kEnd},
                 {"observed_ms", kStart}}}},
              {"gpu_allocations", allocations}}
      .dump();
}

class ApiVerdictsTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
    Reply ingested = Call("POST", "/dp/v1/ingest", JobBatch(), Bearer(credential_));
    ASSERT_EQ(ingested.status, 200) << ingested.body;
    clock_.Set(kStart + 3'600'000);
  }
  std::string compute_;
  std::string credential_;
};

TEST_F(ApiVerdictsTest, AJobsVerdictsComeWithTheirEvidence) {
  Reply r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/verdicts", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["job_id"], "77");
  EXPECT_EQ(r.body["running"], false);
  EXPECT_EQ(r.body["cell_ms"], 10'000);
  EXPECT_EQ(r.body["from_ms"], kStart);
  EXPECT_EQ(r.body["to_ms"], kEnd);
  EXPECT_EQ(r.body["thresholds"], (json{{"stuck_after_s", 600}, {"min_interval_s", 60}}));
  const json& verdicts = r.body["verdicts"];
  ASSERT_EQ(verdicts.size(), 2u) << verdicts.dump();
  EXPECT_EQ(verdicts[0]["code"], "no_process");
  EXPECT_EQ(verdicts[0]["gpus"], json::array({"GPU-idle"}));
  EXPECT_EQ(verdicts[0]["hosts"], json::array({"worker2"}));
  EXPECT_EQ(verdicts[0]["from_ms"], kStart);
  EXPECT_EQ(verdicts[0]["to_ms"], kEnd);
  EXPECT_EQ(verdicts[0]["evidence"]["gpus"][0]["gpu_processes_max"], 0);
  EXPECT_EQ(verdicts[1]["code"], "over_allocated");
  EXPECT_EQ(verdicts[1]["suggestion"], "ask for 1 GPU, not 2 (--gres=gpu:1)");
  EXPECT_GT(verdicts[1]["confidence"].get<double>(), 0.5);
}

// Job 78 on one GPU of worker2: the GPU at 10 % while the job's tasks were stalled on I/O 60 %
// of the time (cgroup v2 pressure), its CPUs nearly idle, no stacks.
TEST_F(ApiVerdictsTest, AJobStalledOnIoIsIoWaitWithThePressureAsEvidence) {
  const json series =
      json::array({Minutes10("GPU-io", "gpu.sm_util", 10), Minutes10("GPU-io", "gpu.processes", 1),
                   Minutes10("job/78", "job.cpu_used_cores", 0.4),
                   Minutes10("job/78", "job.io_pressure_some", 0.6)});
  const json batch = {{"version", 1},
                      {"stream", "telemetry"},
                      {"sequence", 2},
                      {"series", series},
                      {"jobs",
                       {{{"job_id", "78"},
                         {"state", "COMPLETED"},
                         {"user", "ana"},
                         {"req_gpus", 1},
                         {"req_cpus", 8},
                         {"start_ms", kStart},
                         {"end_ms", kEnd},
                         {"observed_ms", kStart}}}},
                      {"gpu_allocations",
                       {{{"job_id", "78"},
                         {"host", "worker2"},
                         {"gpu_uuid", "GPU-io"},
                         {"gpu_index", 0},
                         {"from_ms", kStart},
                         {"to_ms", kEnd}}}}};
  Reply ingested = Call("POST", "/dp/v1/ingest", batch.dump(), Bearer(credential_));
  ASSERT_EQ(ingested.status, 200) << ingested.body;
  Reply r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/78/verdicts", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  const json& verdicts = r.body["verdicts"];
  ASSERT_EQ(verdicts.size(), 1u) << verdicts.dump();
  EXPECT_EQ(verdicts[0]["code"], "io_wait");
  EXPECT_EQ(verdicts[0]["from_ms"], kStart);
  EXPECT_EQ(verdicts[0]["to_ms"], kEnd);
  EXPECT_EQ(verdicts[0]["evidence"]["io"]["host"], "worker2");
  EXPECT_NEAR(verdicts[0]["evidence"]["io"]["pressure_some_mean"].get<double>(), 0.6, 1e-9);
  EXPECT_NEAR(verdicts[0]["evidence"]["cpu"]["cores_used_mean"].get<double>(), 0.4, 1e-9);
  EXPECT_THAT(verdicts[0]["suggestion"].get<std::string>(), HasSubstr("stalled on I/O 60 %"));
}

// Job 79, the same on a cgroup v1 node: no pressure series, but a thread of the job was found
// in uninterruptible sleep at 80 % of the samples.
TEST_F(ApiVerdictsTest, OnCgroupV1SampledUninterruptibleSleepIsTheIoEvidence) {
  const json series = json::array({Minutes10("GPU-io1", "gpu.sm_util", 10),
                                   Minutes10("GPU-io1", "gpu.processes", 1),
                                   Minutes10("job/79", "job.cpu_used_cores", 0.2),
                                   Minutes10("job/79", "job.uninterruptible_some", 0.8)});
  const json batch = {{"version", 1},
                      {"stream", "telemetry"},
                      {"sequence", 3},
                      {"series", series},
                      {"jobs",
                       {{{"job_id", "79"},
                         {"state", "COMPLETED"},
                         {"user", "ana"},
                         {"req_gpus", 1},
                         {"req_cpus", 4},
                         {"start_ms", kStart},
                         {"end_ms", kEnd},
                         {"observed_ms", kStart}}}},
                      {"gpu_allocations",
                       {{{"job_id", "79"},
                         {"host", "worker2"},
                         {"gpu_uuid", "GPU-io1"},
                         {"gpu_index", 1},
                         {"from_ms", kStart},
                         {"to_ms", kEnd}}}}};
  Reply ingested = Call("POST", "/dp/v1/ingest", batch.dump(), Bearer(credential_));
  ASSERT_EQ(ingested.status, 200) << ingested.body;
  Reply r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/79/verdicts", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  const json& verdicts = r.body["verdicts"];
  ASSERT_EQ(verdicts.size(), 1u) << verdicts.dump();
  EXPECT_EQ(verdicts[0]["code"], "io_wait");
  EXPECT_NEAR(verdicts[0]["evidence"]["io"]["uninterruptible_some_mean"].get<double>(), 0.8, 1e-9);
  EXPECT_THAT(verdicts[0]["suggestion"].get<std::string>(),
              HasSubstr("uninterruptible sleep (most often waiting on I/O) in 80 % of samples"));
}

TEST_F(ApiVerdictsTest, BadThresholdsAndUnknownJobsAreRefused) {
  Reply r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/verdicts?stuck_after_s=5", "",
                 Bearer(token_));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body.dump(), HasSubstr("stuck_after_s"));
  r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/78/verdicts", "", Bearer(token_));
  EXPECT_EQ(r.status, 404);
  // A shorter stuck threshold is taken (and echoed).
  r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/verdicts?stuck_after_s=60", "",
           Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["thresholds"]["stuck_after_s"], 60);
}

}  // namespace
}  // namespace api_verdicts_test
}  // namespace expanse::server
