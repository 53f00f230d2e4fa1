#include "telemetry/gpu_series_sink.h"

#include <mutex>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::telemetry {
namespace gpu_series_sink_test {
namespace {

gpu::GpuReading Reading(double sm_util) {
  gpu::GpuReading r;
  r.uuid = "GPU-a";
  r.sm_util = sm_util;
  return r;
}

// The processes the attribution reads are the latest listing's, and "unknown" when it failed or
// when a later tick read nothing: an old list (or an empty one) would say a job that started
// since has no process.
TEST(GpuSeriesSinkTest, ProcessesAreUnknownAfterAFailedListingOrTick) {
  SeriesBuffer buffer;
  std::mutex mu;
  GpuSeriesSink sink("n1", buffer, mu);
  EXPECT_FALSE(sink.processes().has_value());

  gpu::GpuProcess p;
  p.pid = 42;
  p.gpu_uuid = "GPU-a";
  sink.OnFast(1000, {Reading(50)}, std::vector<gpu::GpuProcess>{p});
  ASSERT_TRUE(sink.processes().has_value());
  ASSERT_EQ(sink.processes()->size(), 1u);
  EXPECT_EQ(sink.processes()->at(0).pid, 42u);

  sink.OnFast(2000, {Reading(60)}, UnavailableError("nvmlDeviceGetComputeRunningProcesses failed"));
  EXPECT_FALSE(sink.processes().has_value());
  EXPECT_EQ(sink.latest_sm_util().at("GPU-a"), 60);  // the readings still count

  sink.OnFast(3000, {Reading(70)}, std::vector<gpu::GpuProcess>{});
  ASSERT_TRUE(sink.processes().has_value());
  EXPECT_TRUE(sink.processes()->empty());  // listed: none
  sink.OnFastFailed(4000);
  EXPECT_FALSE(sink.processes().has_value());
}

}  // namespace
}  // namespace gpu_series_sink_test
}  // namespace expanse::telemetry
