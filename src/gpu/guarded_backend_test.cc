#include "gpu/guarded_backend.h"

#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/fake_nvml_test_util.h"
#include "gpu/nvml_backend.h"

namespace expanse::gpu {
namespace {

using testing::FakeNvmlPath;
using testing::FakeNvmlScenario;
using ::testing::HasSubstr;
using testing::TwoGpuScenario;
using namespace std::chrono_literals;

std::unique_ptr<GuardedBackend> Guarded(std::chrono::milliseconds timeout) {
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok())
    return nullptr;
  return std::make_unique<GuardedBackend>(std::move(*backend), timeout);
}

TEST(GuardedBackendTest, PassesResultsThrough) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto guarded = Guarded(2s);
  ASSERT_NE(guarded, nullptr);
  EXPECT_EQ(guarded->name(), "nvml");
  auto readings = guarded->ReadFast();
  ASSERT_TRUE(readings.ok()) << readings.status();
  EXPECT_EQ(readings->size(), 2u);
  EXPECT_FALSE(guarded->StuckCall().has_value());
}

TEST(GuardedBackendTest, HungCallTimesOutAndBlocksOnlyItsLane) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto guarded = Guarded(200ms);
  ASSERT_NE(guarded, nullptr);
  auto hung = TwoGpuScenario();
  hung["hang_ms"] = {{"nvmlDeviceGetUtilizationRates", 1500}};
  scenario.Write(hung);

  const auto start = std::chrono::steady_clock::now();
  auto readings = guarded->ReadFast();
  ASSERT_FALSE(readings.ok());
  EXPECT_EQ(readings.status().reason(), "gpu_call_hung");
  EXPECT_THAT(readings.status().message(), HasSubstr("ReadFast"));
  // The caller got control back long before the driver call returned.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1400ms);

  // While it is stuck, the fast lane refuses at once and says why; the slow lane still works.
  auto again = guarded->ReadProcesses();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().reason(), "gpu_call_blocked");
  EXPECT_THAT(again.status().message(), HasSubstr("ReadFast"));
  ASSERT_TRUE(guarded->StuckCall().has_value());
  EXPECT_THAT(*guarded->StuckCall(), HasSubstr("ReadFast blocked"));
  auto energy = guarded->ReadEnergy();
  EXPECT_TRUE(energy.ok()) << energy.status();

  // Once the call returns, the lane serves again.
  scenario.Write(TwoGpuScenario());
  std::this_thread::sleep_for(1600ms);
  EXPECT_FALSE(guarded->StuckCall().has_value());
  auto later = guarded->ReadFast();
  EXPECT_TRUE(later.ok()) << later.status();
}

TEST(GuardedBackendTest, DestroyingWhileStuckDoesNotWait) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto guarded = Guarded(100ms);
  ASSERT_NE(guarded, nullptr);
  auto hung = TwoGpuScenario();
  hung["hang_ms"] = {{"nvmlDeviceGetUtilizationRates", 800}};
  scenario.Write(hung);
  EXPECT_FALSE(guarded->ReadFast().ok());
  const auto start = std::chrono::steady_clock::now();
  guarded.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 700ms);
  scenario.Write(TwoGpuScenario());
  std::this_thread::sleep_for(900ms);  // let the detached call finish before the test ends
}

}  // namespace
}  // namespace expanse::gpu
