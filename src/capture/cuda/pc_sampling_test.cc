// The agent's PC sampling against the fake libcupti.so.13 and libcuda.so.1 (tests/fakes/cupti),
// loaded into this process: which contexts it samples, how it reads CUPTI's buffers and what it
// leaves behind (every context disabled and released).
#include "capture/cuda/pc_sampling.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "capture/cuda/cupti_activity.h"
#include "core/test_temp_dir.h"

namespace expanse::capture {
namespace pc_sampling_test {
namespace {

const std::string kFakes = std::string(EXPANSE_FAKES_DIR) + "/cupti";

TEST(PcSamplingRefusal, OnlyAnAdminOnlyDriverWithoutTheRightsRefuses) {
  const std::string admin_only = "RmLogonRC: 1\nRmProfilingAdminOnly: 1\n";
  const std::string no_caps = "Name:\tpython\nCapEff:\t0000000000000000\n";
  const std::string perfmon = "CapEff:\t0000004000000000\n";    // bit 38
  const std::string sys_admin = "CapEff:\t0000000000200000\n";  // bit 21
  const std::string root = "CapEff:\t000001ffffffffff\n";
  EXPECT_NE(PcSamplingRefusal(admin_only, no_caps).find("RmProfilingAdminOnly=1"),
            std::string::npos);
  EXPECT_EQ(PcSamplingRefusal(admin_only, perfmon), "");
  EXPECT_EQ(PcSamplingRefusal(admin_only, sys_admin), "");
  EXPECT_EQ(PcSamplingRefusal(admin_only, root), "");
  EXPECT_EQ(PcSamplingRefusal("RmProfilingAdminOnly: 0\n", no_caps), "");
  EXPECT_EQ(PcSamplingRefusal("", no_caps), "");  // no driver file: CUPTI decides
  EXPECT_NE(PcSamplingRefusal(admin_only, ""), "");
}

TEST(PcSamplingRefusal, PrivilegeAndDeviceErrorsAreRestrictions) {
  EXPECT_TRUE(IsRestriction(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES));
  EXPECT_TRUE(IsRestriction(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED));
  EXPECT_TRUE(IsRestriction(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES));
  EXPECT_FALSE(IsRestriction(CUPTI_ERROR_NOT_SUPPORTED));
  EXPECT_FALSE(IsRestriction(CUPTI_ERROR_INVALID_OPERATION));
}

// Two GPUs, the job's runtime active on the first only; three stall reasons; four PC records of
// which two are the same instruction (CUPTI splits a PC over buffers) and one is held until
// Disable.
nlohmann::json Scenario() {
  return {
      {"devices", {{{"name", "NVIDIA H200"}}, {{"primary_context_active", false}}}},
      {"pc_sampling",
       {{"stall_reasons",
         {{"2", "smsp__pcsamp_warps_issue_stalled_long_scoreboard"},
          {"5", "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"},
          {"9", "smsp__pcsamp_warps_issue_stalled_selected"}}},
        {"pcs",
         {{{"function", "_Z9sgemm_128PfS_"},
           {"pc_offset", 256},
           {"cubin_crc", 77},
           {"stalls", {{"2", 30}, {"9", 10}}}},
          {{"function", "relu"}, {"pc_offset", 16}, {"cubin_crc", 78}, {"stalls", {{"5", 4}}}},
          {{"function", "_Z9sgemm_128PfS_"},
           {"pc_offset", 256},
           {"cubin_crc", 77},
           {"stalls", {{"2", 5}}}},
          {{"function", "relu"}, {"pc_offset", 32}, {"cubin_crc", 78}, {"stalls", {{"9", 1}}}}}},
        {"pcs_per_get_data", 1},
        {"held_for_disable", 1},
        {"dropped_samples", 3}}}};
}

class PcSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Write(Scenario());
    setenv("EXPANSE_FAKE_CUPTI_SCENARIO", (dir_ / "scenario.json").c_str(), 1);
    setenv("EXPANSE_FAKE_CUPTI_TRACE", (dir_ / "trace.txt").c_str(), 1);
    unsetenv("CUDA_INJECTION64_PATH");
    std::string error;
    activity_ = LoadCuptiActivityApi({kFakes + "/libcupti.so.13"}, &error);
    ASSERT_TRUE(activity_) << error;
    cuda_ = dlopen((kFakes + "/libcuda.so.1").c_str(), RTLD_NOW | RTLD_GLOBAL);
    ASSERT_NE(cuda_, nullptr) << dlerror();
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(cuda_, "cuInit"));
    ASSERT_EQ(init(0), CUDA_SUCCESS);
    auto cupti = LoadPcSamplingApi(activity_->path, &error);
    ASSERT_TRUE(cupti) << error;
    auto cuda = LoadCudaContextApi(&error);
    ASSERT_TRUE(cuda) << error;
    sampler_.emplace(*cupti, *cuda, PcSamplerOptions{.period = 12, .pcs_per_buffer = 8});
  }
  void TearDown() override {
    unsetenv("EXPANSE_FAKE_CUPTI_SCENARIO");
    unsetenv("EXPANSE_FAKE_CUPTI_TRACE");
  }

  void Write(const nlohmann::json& scenario) {
    std::ofstream(dir_ / "scenario.tmp") << scenario.dump();
    std::filesystem::rename(dir_ / "scenario.tmp", dir_ / "scenario.json");
    // The fake re-reads a changed file at most every 20 ms (and at cuInit).
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  std::string Trace() const {
    std::ifstream in(dir_ / "trace.txt");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  PcSampler::StartResult Start() {
    return sampler_->Start([this](CUptiResult r) { return activity_->ResultName(r); });
  }

  ::expanse::testing::TempDir dir_;
  std::optional<CuptiActivityApi> activity_;
  void* cuda_ = nullptr;
  std::optional<PcSampler> sampler_;
};

TEST_F(PcSamplerTest, SamplesTheActiveContextAndLeavesItAsItFoundIt) {
  const PcSampler::StartResult started = Start();
  EXPECT_EQ(started.contexts, 1);
  EXPECT_EQ(started.error, "");
  ASSERT_TRUE(sampler_->active());
  PcProfile profile;
  profile.SetState(PcSamplingState::kSampled);
  sampler_->Drain(profile);
  EXPECT_EQ(profile.kept_samples(), 49u);  // all but the record held until Disable
  sampler_->Stop(profile);
  EXPECT_FALSE(sampler_->active());
  EXPECT_EQ(profile.kept_samples(), 50u);

  const nlohmann::json doc = profile.ToJson();
  EXPECT_EQ(doc.at("total_samples"), 53u) << doc.dump();  // 50 kept + 3 dropped
  EXPECT_EQ(doc.at("dropped_samples"), 3u);
  EXPECT_EQ(doc.at("stall_reasons").at("smsp__pcsamp_warps_issue_stalled_long_scoreboard"), 35u);
  const auto& gemm = doc.at("functions").at(0);
  EXPECT_EQ(gemm.at("name"), "_Z9sgemm_128PfS_");
  EXPECT_EQ(gemm.at("samples"), 45u);
  ASSERT_EQ(gemm.at("pcs").size(), 1u) << "one instruction, split over two buffers";
  EXPECT_EQ(gemm.at("pcs").at(0).at("pc_offset"), 256u);
  EXPECT_EQ(gemm.at("pcs").at(0).at("cubin_crc"), 77u);
  EXPECT_EQ(doc.at("functions").at(1).at("name"), "relu");
  EXPECT_EQ(doc.at("functions").at(1).at("pcs").size(), 2u);

  const std::string trace = Trace();
  // The inactive device's context was neither retained nor created.
  EXPECT_EQ(trace.find("cuDevicePrimaryCtxRetain dev=1"), std::string::npos) << trace;
  EXPECT_EQ(trace.find("created"), std::string::npos) << trace;
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=0 retained=0"), std::string::npos)
      << trace;
  EXPECT_NE(trace.find("period=12"), std::string::npos) << trace;
  EXPECT_NE(trace.find("mode=continuous"), std::string::npos) << trace;
  EXPECT_NE(trace.find("cuptiPCSamplingDisable dev=- current=yes leftovers=1 lost=0"),
            std::string::npos)
      << trace;
  // Every call with the job's context current on the calling thread.
  EXPECT_EQ(trace.find("current=no"), std::string::npos) << trace;
}

TEST_F(PcSamplerTest, ARestrictedNodeGivesNoContextAndReleasesIt) {
  nlohmann::json scenario = Scenario();
  scenario["pc_sampling"]["enable_error"] = 35;
  Write(scenario);
  const PcSampler::StartResult started = Start();
  EXPECT_EQ(started.contexts, 0);
  EXPECT_EQ(started.first_error, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  EXPECT_EQ(started.error, "cuptiPCSamplingEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  EXPECT_FALSE(sampler_->active());
  const std::string trace = Trace();
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=0 retained=0"), std::string::npos)
      << trace;
  EXPECT_EQ(trace.find("cuptiPCSamplingSetConfigurationAttribute"), std::string::npos) << trace;
}

// A job that holds nearly all its GPU's memory (vLLM takes 90 %, some take everything): the
// sampler's device buffer would be what fails its next allocation, so the context is left
// alone, released, and never enabled.
TEST_F(PcSamplerTest, AGpuWithoutRoomForTheBufferIsLeftToTheJob) {
  nlohmann::json scenario = Scenario();
  scenario["devices"][0]["memory_free_mib"] = 300;  // the buffer (32) plus the margin (512) is 544
  Write(scenario);
  const PcSampler::StartResult started = Start();
  EXPECT_EQ(started.contexts, 0);
  EXPECT_EQ(started.first_error, CUPTI_ERROR_OUT_OF_MEMORY);
  EXPECT_FALSE(IsRestriction(started.first_error));
  EXPECT_EQ(started.error,
            "300 MiB of GPU memory free, below the 544 MiB PC sampling's buffer needs with a "
            "margin: left to the job");
  EXPECT_FALSE(sampler_->active());
  const std::string trace = Trace();
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=0 retained=0"), std::string::npos)
      << trace;
  EXPECT_EQ(trace.find("cuptiPCSamplingEnable"), std::string::npos) << trace;

  // With room, the same context is sampled.
  scenario["devices"][0]["memory_free_mib"] = 2000;
  Write(scenario);
  EXPECT_EQ(Start().contexts, 1);
  PcProfile profile;
  sampler_->Stop(profile);
  EXPECT_FALSE(sampler_->active());
}

TEST_F(PcSamplerTest, AConfigurationCuptiRefusesIsDisabledAgain) {
  nlohmann::json scenario = Scenario();
  scenario["pc_sampling"]["set_config_error"] = 27;
  Write(scenario);
  const PcSampler::StartResult started = Start();
  EXPECT_EQ(started.contexts, 0);
  EXPECT_EQ(started.error, "cuptiPCSamplingSetConfigurationAttribute: CUPTI_ERROR_NOT_SUPPORTED");
  EXPECT_FALSE(IsRestriction(started.first_error));
  const std::string trace = Trace();
  EXPECT_NE(trace.find("cuptiPCSamplingDisable"), std::string::npos) << trace;
  EXPECT_NE(trace.find("retained=0"), std::string::npos) << trace;
}

TEST_F(PcSamplerTest, AFullHardwareBufferIsCountedOnceADrainAndStopStillTearsDown) {
  nlohmann::json scenario = Scenario();
  scenario["pc_sampling"]["get_data_error"] = 8;  // CUPTI_ERROR_OUT_OF_MEMORY: buffer full
  Write(scenario);
  ASSERT_EQ(Start().contexts, 1);
  PcProfile profile;
  profile.SetState(PcSamplingState::kSampled);
  sampler_->Drain(profile);
  EXPECT_EQ(profile.ToJson().at("hardware_buffer_full"), 1u);
  sampler_->Stop(profile);  // Disable hands over what GetData could not (as far as it fits)
  EXPECT_FALSE(sampler_->active());
  sampler_->Stop(profile);  // nothing left: no second release
  const std::string trace = Trace();
  size_t releases = 0;
  for (size_t at = trace.find("cuDevicePrimaryCtxRelease_v2"); at != std::string::npos;
       at = trace.find("cuDevicePrimaryCtxRelease_v2", at + 1))
    ++releases;
  EXPECT_EQ(releases, 1u) << trace;
  EXPECT_NE(trace.find("retained=0"), std::string::npos) << trace;
}

TEST_F(PcSamplerTest, NoActiveContextMeansNothingToSampleYet) {
  nlohmann::json scenario = Scenario();
  scenario["devices"][0]["primary_context_active"] = false;
  Write(scenario);
  const PcSampler::StartResult started = Start();
  EXPECT_EQ(started.contexts, 0);
  EXPECT_EQ(started.error, "");
  EXPECT_EQ(Trace().find("cuptiPCSamplingEnable"), std::string::npos);
}

}  // namespace
}  // namespace pc_sampling_test
}  // namespace expanse::capture
