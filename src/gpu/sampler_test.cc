#include "gpu/sampler.h"

#include <chrono>
#include <memory>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/fake_nvml_test_util.h"
#include "gpu/held_backend_test_util.h"
#include "gpu/nvml_backend.h"

namespace expanse::gpu {
namespace sampler_test {
namespace {

using testing::CallHold;
using testing::FakeNvmlCallCount;
using testing::FakeNvmlPath;
using testing::FakeNvmlScenario;
using ::testing::HasSubstr;
using testing::HeldBackend;
using testing::kHangBound;
using testing::TwoGpuScenario;
using testing::WaitUntil;
using namespace std::chrono_literals;

class RecordingSink : public SampleSink {
 public:
  void OnInventory(int64_t at_ms, const Inventory& inventory) override {
    inventories.push_back({at_ms, inventory});
  }
  void OnFast(int64_t at_ms, const std::vector<GpuReading>& readings,
              const Result<std::vector<GpuProcess>>& processes) override {
    fast.push_back(
        {at_ms, readings, processes.ok() ? *processes : std::vector<GpuProcess>{}, processes.ok()});
  }
  void OnFastFailed(int64_t at_ms) override { fast_failed.push_back(at_ms); }
  void OnEnergy(int64_t at_ms, const std::vector<SlowReading>& readings) override {
    energy.push_back({at_ms, readings});
  }
  void OnProcessUtilization(int64_t at_ms,
                            const std::vector<ProcessUtilization>& samples) override {
    utilization.push_back({at_ms, samples});
  }

  struct Fast {
    int64_t at_ms;
    std::vector<GpuReading> readings;
    std::vector<GpuProcess> processes;
    bool processes_known = false;
  };
  std::vector<std::pair<int64_t, Inventory>> inventories;
  std::vector<Fast> fast;
  std::vector<int64_t> fast_failed;
  std::vector<std::pair<int64_t, std::vector<SlowReading>>> energy;
  std::vector<std::pair<int64_t, std::vector<ProcessUtilization>>> utilization;
};

std::unique_ptr<GuardedBackend> FakeBackend(std::chrono::milliseconds timeout = 2s) {
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok())
    return nullptr;
  return std::make_unique<GuardedBackend>(std::move(*backend), timeout);
}

TEST(SamplerTest, FastTicksCarryReadingsAndProcesses) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  Sampler sampler(FakeBackend(), "", clock, sink);
  sampler.TickFast();
  clock.Advance(1000);
  sampler.TickFast();
  ASSERT_EQ(sink.inventories.size(), 1u);
  EXPECT_EQ(sink.inventories[0].second.gpus.size(), 2u);
  ASSERT_EQ(sink.fast.size(), 2u);
  EXPECT_EQ(sink.fast[1].at_ms, 1'800'000'001'000);
  EXPECT_EQ(sink.fast[1].readings[0].sm_util, 100);
  ASSERT_EQ(sink.fast[1].processes.size(), 1u);
  EXPECT_EQ(sink.fast[1].processes[0].pid, 521u);
  EXPECT_TRUE(sink.fast[1].processes_known);
  const SamplerHealth health = sampler.Health();
  EXPECT_EQ(health.state, "ok");
  EXPECT_EQ(health.backend, "nvml");
  EXPECT_EQ(health.gpus, 2u);
  EXPECT_EQ(health.last_ok_ms, 1'800'000'001'000);
}

// A driver that cannot list processes: the readings go on, the processes are unknown (not an
// empty list, which would say no job ran anything).
TEST(SamplerTest, ProcessesThatCannotBeListedAreUnknownNotNone) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  auto backend = NvmlBackend::Create(FakeNvmlPath("nvml-minimal"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  Sampler sampler(std::make_unique<GuardedBackend>(std::move(*backend), 2s), "", clock, sink);
  sampler.TickFast();
  ASSERT_EQ(sink.fast.size(), 1u);
  EXPECT_EQ(sink.fast[0].readings.size(), 2u);
  EXPECT_FALSE(sink.fast[0].processes_known);
  EXPECT_EQ(sampler.Health().state, "degraded");
  EXPECT_THAT(sampler.Health().detail, HasSubstr("GPU processes unknown"));
}

TEST(SamplerTest, SlowCallsStayOffTheFastPath) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  Sampler sampler(FakeBackend(), "", clock, sink);
  const int64_t energy_before = FakeNvmlCallCount("nvml", "nvmlDeviceGetTotalEnergyConsumption");
  const int64_t util_before = FakeNvmlCallCount("nvml", "nvmlDeviceGetProcessUtilization");
  for (int i = 0; i < 10; ++i)
    sampler.TickFast();
  EXPECT_EQ(FakeNvmlCallCount("nvml", "nvmlDeviceGetTotalEnergyConsumption"), energy_before);
  EXPECT_EQ(FakeNvmlCallCount("nvml", "nvmlDeviceGetProcessUtilization"), util_before);
  sampler.TickSlow();
  ASSERT_EQ(sink.energy.size(), 1u);
  EXPECT_EQ(sink.energy[0].second[0].energy_mj, 123456789u);
  ASSERT_EQ(sink.utilization.size(), 1u);
  EXPECT_EQ(sink.utilization[0].second[0].pid, 521u);
}

TEST(SamplerTest, NoBackendSaysNoGpusAndWhy) {
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  Sampler sampler(nullptr, "libnvidia-ml.so.1 not found and nvidia-smi not on PATH", clock, sink);
  sampler.TickFast();
  sampler.TickSlow();
  EXPECT_TRUE(sink.fast.empty());
  const SamplerHealth health = sampler.Health();
  EXPECT_EQ(health.state, "no_gpus");
  EXPECT_THAT(health.detail, HasSubstr("no GPUs"));
  EXPECT_THAT(health.detail, HasSubstr("nvidia-smi not on PATH"));
}

TEST(SamplerTest, BackendWithoutGpusSaysSo) {
  FakeNvmlScenario scenario(nlohmann::json{{"gpus", nlohmann::json::array()}});
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  Sampler sampler(FakeBackend(), "", clock, sink);
  sampler.TickFast();
  EXPECT_TRUE(sink.fast.empty());
  EXPECT_EQ(sampler.Health().state, "no_gpus");
  EXPECT_THAT(sampler.Health().detail, HasSubstr("nvml reports none"));
}

// The test holds ReadFast blocked as a hung driver would; the guard's deadline is cut to nothing
// for that one call (see guarded_backend_test.cc), so nothing here waits on a timer.
TEST(SamplerTest, HungDriverDegradesHealthAndRecovers) {
  auto hold = std::make_shared<CallHold>();
  auto owned = std::make_unique<GuardedBackend>(std::make_unique<HeldBackend>(hold), kHangBound);
  GuardedBackend& guarded = *owned;
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  Sampler sampler(std::move(owned), "", clock, sink);
  sampler.TickFast();
  ASSERT_EQ(sink.fast.size(), 1u);
  EXPECT_EQ(sampler.Health().state, "ok");

  hold->Hold();
  guarded.set_timeout(std::chrono::milliseconds(1));
  sampler.TickFast();  // times out
  guarded.set_timeout(kHangBound);
  sampler.TickFast();  // refused at once: the call is still stuck
  EXPECT_EQ(sink.fast.size(), 1u);
  EXPECT_EQ(sink.fast_failed.size(), 2u);  // the processes known before are not current
  EXPECT_EQ(sampler.Health().state, "degraded");
  EXPECT_THAT(sampler.Health().detail, HasSubstr("ReadFast blocked"));
  // The loop goes on: the slow readings do not wait for the stuck fast lane.
  sampler.TickSlow();
  EXPECT_EQ(sink.energy.size(), 1u);
  // All of the above while the held call was still blocked: only the first tick's returned.
  EXPECT_EQ(hold->returned(), 1);

  hold->Release();
  ASSERT_TRUE(WaitUntil([&] { return !guarded.StuckCall().has_value(); }));
  sampler.TickFast();
  EXPECT_EQ(sink.fast.size(), 2u);
  EXPECT_EQ(sampler.Health().state, "ok");
}

TEST(SamplerTest, NewGpuIsPickedUp) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  ManualClock clock(1'800'000'000'000);
  RecordingSink sink;
  Sampler sampler(FakeBackend(), "", clock, sink);
  sampler.TickFast();
  auto three = TwoGpuScenario();
  three["gpus"].push_back({{"uuid", "GPU-33333333-3333-3333-3333-333333333333"}});
  scenario.Write(three);
  sampler.TickFast();  // NVML still has the old device list: two readings, inventory marked stale
  sampler.TickFast();
  ASSERT_EQ(sink.inventories.size(), 1u);
  // The backend enumerates only on ReadInventory; the sampler re-reads it when counts differ,
  // which the next test of ReadInventory shows directly.
  EXPECT_EQ(sink.fast.back().readings.size(), 2u);
}

}  // namespace
}  // namespace sampler_test
}  // namespace expanse::gpu
