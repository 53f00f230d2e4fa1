#include "gpu/guarded_backend.h"

#include <chrono>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/fake_nvml_test_util.h"
#include "gpu/held_backend_test_util.h"
#include "gpu/nvml_backend.h"

namespace expanse::gpu {
namespace guarded_backend_test {
namespace {

using testing::CallHold;
using testing::FakeNvmlPath;
using testing::FakeNvmlScenario;
using ::testing::HasSubstr;
using testing::HeldBackend;
using testing::kHangBound;
using testing::TwoGpuScenario;
using testing::WaitUntil;
using namespace std::chrono_literals;

// The deadline for a call the test holds blocked: it cannot return in time, so it times out at
// once.
constexpr std::chrono::milliseconds kAtOnce{1};

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

// A call the test holds blocked stands in for a hung driver call. The guard's deadline is cut to
// nothing for that one call only (it cannot return before the hold is released, so it times out
// whatever the machine's load); every other call keeps a deadline that only bounds a hang.
TEST(GuardedBackendTest, HungCallTimesOutAndBlocksOnlyItsLane) {
  auto hold = std::make_shared<CallHold>();
  GuardedBackend guarded(std::make_unique<HeldBackend>(hold), kHangBound);
  EXPECT_FALSE(guarded.StuckCall().has_value());

  hold->Hold();
  guarded.set_timeout(kAtOnce);
  auto readings = guarded.ReadFast();
  guarded.set_timeout(kHangBound);
  ASSERT_FALSE(readings.ok());
  EXPECT_EQ(readings.status().reason(), "gpu_call_hung");
  EXPECT_THAT(readings.status().message(), HasSubstr("ReadFast"));
  // The caller got control back while the driver call was still blocked.
  EXPECT_EQ(hold->returned(), 0);

  // While it is stuck, the fast lane refuses at once and says why; the slow lane still works.
  auto again = guarded.ReadProcesses();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().reason(), "gpu_call_blocked");
  EXPECT_THAT(again.status().message(), HasSubstr("ReadFast"));
  ASSERT_TRUE(guarded.StuckCall().has_value());
  EXPECT_THAT(*guarded.StuckCall(), HasSubstr("ReadFast blocked"));
  auto energy = guarded.ReadEnergy();
  EXPECT_TRUE(energy.ok()) << energy.status();
  EXPECT_EQ(hold->returned(), 0);

  // Once the call returns, the lane serves again.
  hold->Release();
  ASSERT_TRUE(WaitUntil([&] { return !guarded.StuckCall().has_value(); }));
  EXPECT_EQ(hold->returned(), 1);
  auto later = guarded.ReadFast();
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->size(), 2u);
}

TEST(GuardedBackendTest, DestroyingWhileStuckDoesNotWait) {
  auto hold = std::make_shared<CallHold>();
  auto guarded = std::make_unique<GuardedBackend>(std::make_unique<HeldBackend>(hold), kAtOnce);
  hold->Hold();
  EXPECT_FALSE(guarded->ReadFast().ok());
  guarded.reset();
  // The destructor returned while the call was still blocked, and left the backend to it.
  EXPECT_EQ(hold->returned(), 0);
  EXPECT_FALSE(hold->backend_destroyed());
  // When the call returns at last, its thread frees the backend.
  hold->Release();
  EXPECT_TRUE(WaitUntil([&] { return hold->backend_destroyed(); }));
  EXPECT_EQ(hold->returned(), 1);
}

}  // namespace
}  // namespace guarded_backend_test
}  // namespace expanse::gpu
