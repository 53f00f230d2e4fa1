#include "telemetry/series_buffer.h"

#include <limits>

#include <gtest/gtest.h>

namespace expanse::telemetry {
namespace {

TEST(SeriesBufferTest, GroupsSamplesWithOffsets) {
  SeriesBuffer buffer;
  const SeriesKey util{"gpu07", "GPU-a", "gpu.sm_util"};
  const SeriesKey node{"gpu07", "", "node.cpu_util"};
  buffer.Add(util, 1000, 0);
  buffer.Add(util, 2000, 87.5);
  buffer.Add(util, 3500, 91);
  buffer.Add(node, 1000, 12);
  EXPECT_EQ(buffer.samples(), 4u);
  const std::vector<wire::SeriesRecord> series = buffer.Take();
  ASSERT_EQ(series.size(), 2u);
  // Series come out in key order: the host-level one (no device) first.
  EXPECT_EQ(series[0].device, "");
  EXPECT_EQ(series[0].metric, "node.cpu_util");
  EXPECT_EQ(series[1].device, "GPU-a");
  EXPECT_EQ(series[1].host, "gpu07");
  EXPECT_EQ(series[1].t0, 1000);
  EXPECT_EQ(series[1].dt, (std::vector<int64_t>{0, 1000, 1500}));
  EXPECT_EQ(series[1].v, (std::vector<double>{0, 87.5, 91}));
  EXPECT_TRUE(buffer.empty());
  EXPECT_TRUE(buffer.Take().empty());
}

TEST(SeriesBufferTest, DropsOutOfOrderNonFiniteAndOverCap) {
  SeriesBuffer buffer(/*max_samples=*/3);
  const SeriesKey key{"h", "GPU-a", "gpu.sm_util"};
  buffer.Add(key, 2000, 1);
  buffer.Add(key, 2000, 2);  // same time
  buffer.Add(key, 1000, 3);  // older
  buffer.Add(key, 3000, std::numeric_limits<double>::quiet_NaN());
  buffer.Add(key, 3000, 4);
  buffer.Add(key, 4000, 5);
  buffer.Add(key, 5000, 6);  // over the cap
  EXPECT_EQ(buffer.samples(), 3u);
  EXPECT_EQ(buffer.dropped(), 4u);
  const std::vector<wire::SeriesRecord> series = buffer.Take();
  EXPECT_EQ(series[0].v, (std::vector<double>{1, 4, 5}));
  // After a flush the series starts again from its own t0.
  buffer.Add(key, 6000, 7);
  EXPECT_EQ(buffer.Take()[0].t0, 6000);
}

}  // namespace
}  // namespace expanse::telemetry
