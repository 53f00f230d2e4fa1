#include "cupti/metric_sets.h"

#include <set>

#include <gtest/gtest.h>

#include "cupti/helper_records.h"

namespace expanse::cupti {
namespace {

TEST(MetricSetsTest, LightSetLeadsWithTheSeriesTheConsoleDraws) {
  const auto& light = LightSet();
  ASSERT_GE(light.size(), 3u);
  EXPECT_EQ(light[0].series, "gpu.sm_active");
  EXPECT_EQ(light[1].series, "gpu.tensor_active");
  EXPECT_EQ(light[2].series, "gpu.dram_active");
}

TEST(MetricSetsTest, RichSetKeepsEveryLightSeriesAndPutsItsOwnBeforeTheOptionalOnes) {
  const auto& light = LightSet();
  const auto& rich = RichSet();
  ASSERT_GT(rich.size(), light.size());
  std::set<std::string> rich_names;
  for (const auto& series : rich)
    rich_names.insert(series.series);
  for (const auto& series : light)
    EXPECT_EQ(rich_names.count(series.series), 1u) << series.series;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(rich[i].series, light[i].series);
  // Placed right after them, before the Light set's optional ones.
  EXPECT_EQ(rich[3].series, "gpu.fma_pipe_utilization");
  EXPECT_EQ(rich.back().series, light.back().series);
}

TEST(MetricSetsTest, EverySeriesIsUniqueAndAcceptedByTheRecordFormat) {
  std::set<std::string> seen;
  for (const auto& series : RichSet()) {
    EXPECT_TRUE(seen.insert(series.series).second) << series.series;
    EXPECT_FALSE(series.candidates.empty()) << series.series;
    EXPECT_GT(series.scale, 0.0);
    CounterRecord record{1, 0, "GPU-0123", CounterSet::kRich, {{series.series, 0.5}}, 1};
    EXPECT_TRUE(ParseRecord(RenderRecord(record)).ok()) << series.series;
  }
}

TEST(MetricSetsTest, PercentMetricsBecomeRatiosAndEveryCandidateOfASeriesSharesItsUnit) {
  for (const auto& series : RichSet()) {
    for (const auto& candidate : series.candidates) {
      const bool percent =
          candidate.find("pct_of_peak") != std::string::npos || candidate.ends_with(".pct");
      EXPECT_DOUBLE_EQ(series.scale, percent ? 0.01 : 1.0) << candidate;
    }
  }
  EXPECT_EQ(CounterSetName(CounterSet::kLight), "light");
  EXPECT_EQ(&SeriesOf(CounterSet::kRich), &RichSet());
}

}  // namespace
}  // namespace expanse::cupti
