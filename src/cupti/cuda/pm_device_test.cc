// PmDevice in this process against the fake libcupti (tests/fakes/cupti): what the sampler keeps
// between attempts at a GPU whose counters are refused.
#include "cupti/cuda/pm_device.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/test_temp_dir.h"
#include "cupti/metric_sets.h"

namespace expanse::cupti {
namespace {

class PmDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The fake reads its scenario from this variable; written before its first call, since it
    // looks for a change at most every 20 ms.
    ::setenv("EXPANSE_FAKE_CUPTI_SCENARIO", scenario_path_.c_str(), 1);
    RefuseEveryLightMetric(refuse_anyway_);
    auto opened = CuptiLibrary::Open(std::string(EXPANSE_FAKES_DIR) + "/cupti/libcupti.so.13");
    ASSERT_TRUE(opened.ok()) << opened.status();
    cupti_ = std::move(*opened);
    CUpti_Profiler_Initialize_Params init{};
    init.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    ASSERT_EQ(cupti_->fn().ProfilerInitialize(&init), CUPTI_SUCCESS);
  }

  void TearDown() override {
    if (cupti_) {
      CUpti_Profiler_DeInitialize_Params deinit{};
      deinit.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
      (void)cupti_->fn().ProfilerDeInitialize(&deinit);
    }
    ::unsetenv("EXPANSE_FAKE_CUPTI_SCENARIO");
  }

  // One GH100 that knows every Light candidate and refuses each with CUPTI_ERROR_UNKNOWN, with
  // its availability image (as the H200s did) and, when `anyway`, without it too.
  void RefuseEveryLightMetric(bool anyway) {
    nlohmann::json metrics = nlohmann::json::object(), refused = nlohmann::json::object();
    for (const CounterSeries& series : LightSet()) {
      for (const std::string& candidate : series.candidates) {
        metrics[candidate] = 1.0;
        refused[candidate] = 999;  // CUPTI_ERROR_UNKNOWN
      }
    }
    const nlohmann::json scenario = {{"devices",
                                      {{{"uuid", "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10"},
                                        {"chip", "GH100"},
                                        {"metrics", metrics},
                                        {"refused_metrics", refused},
                                        {"refused_without_image", anyway}}}}};
    std::ofstream(scenario_path_) << scenario.dump();
  }

  bool refuse_anyway_ = true;
  testing::TempDir dir_{"pm_device_test"};
  std::string scenario_path_ = dir_ / "scenario.json";
  std::unique_ptr<CuptiLibrary> cupti_;
  MonotonicClock clock_;
  CallWatchdog watchdog_{clock_, std::chrono::seconds(60), [](const char*) {}};
};

TEST_F(PmDeviceTest, ASetRefusedOnEveryRetryKeepsOnlyTheLastAttemptsChecks) {
  PmDevice pm(*cupti_, watchdog_, 0, PmOptions{});
  const ResolvedSet* resolved = nullptr;
  const CuptiStatus first = pm.Resolve(CounterSet::kLight, &resolved);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->code, CUPTI_ERROR_UNKNOWN);
  const std::vector<PmDevice::MetricCheck> checks = pm.metric_checks();
  ASSERT_FALSE(checks.empty());
  for (const auto& check : checks) {
    EXPECT_EQ(check.result, "CUPTI_ERROR_UNKNOWN") << check.metric;
    EXPECT_EQ(check.without_image, "CUPTI_ERROR_UNKNOWN") << check.metric;
  }
  // The sampler's retries after each backoff.
  for (int retry = 0; retry < 3; ++retry) {
    ASSERT_TRUE(pm.Resolve(CounterSet::kLight, &resolved).has_value());
    ASSERT_EQ(pm.metric_checks().size(), checks.size()) << "retry " << retry;
  }
  for (size_t i = 0; i < checks.size(); ++i)
    EXPECT_EQ(pm.metric_checks()[i].metric, checks[i].metric);
}

// The same GPU, but CUPTI takes the metrics on host objects made without the image.
class PmDeviceImageOnlyTest : public PmDeviceTest {
 protected:
  PmDeviceImageOnlyTest() { refuse_anyway_ = false; }
};

TEST_F(PmDeviceImageOnlyTest, EverySetIsConfiguredWithoutTheImage) {
  PmDevice pm(*cupti_, watchdog_, 0, PmOptions{});
  const ResolvedSet* light = nullptr;
  ASSERT_FALSE(pm.Resolve(CounterSet::kLight, &light).has_value());
  ASSERT_NE(light, nullptr);
  EXPECT_FALSE(light->metrics.empty());
  ASSERT_TRUE(pm.availability_refusal().has_value());
  EXPECT_EQ(pm.availability_refusal()->code, CUPTI_ERROR_UNKNOWN);
  EXPECT_EQ(pm.availability_refusal()->call, "cuptiProfilerHostConfigAddMetrics");
  // The Rich set shares the Light set's candidates: resolved without the image at once.
  const ResolvedSet* rich = nullptr;
  ASSERT_FALSE(pm.Resolve(CounterSet::kRich, &rich).has_value());
  EXPECT_TRUE(pm.metric_checks().empty());
}

}  // namespace
}  // namespace expanse::cupti
