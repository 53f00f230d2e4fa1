#include "tsdb/downsample.h"

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace downsample_test {
namespace {

std::vector<Bucket> Downsample(int64_t from, int64_t to, int points,
                               const std::vector<Sample>& samples) {
  auto d = Downsampler::Create(from, to, points);
  EXPECT_TRUE(d.ok()) << d.status();
  for (const Sample& s : samples)
    d->Add(s);
  return std::move(*d).Finish();
}

TEST(DownsampleTest, BucketsEndOneWidthLaterAndTheLastAtTheQueryEnd) {
  // [0, 10) in 3 points: width 4, so buckets [0,4) [4,8) [8,10).
  auto b = Downsample(0, 10, 3, {{1, 1.0}, {5, 2.0}, {9, 3.0}});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].start_ms, 0);
  EXPECT_EQ(b[0].end_ms, 4);
  EXPECT_EQ(b[1].end_ms, 8);
  EXPECT_EQ(b[2].start_ms, 8);
  EXPECT_EQ(b[2].end_ms, 10);
}

TEST(DownsampleTest, EndIsRightAtTheExtremesOfTheTimeRange) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto b = Downsample(kMin, kMax, 2, {{kMin, 1.0}, {kMax - 1, 2.0}});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].start_ms, kMin);
  EXPECT_EQ(b[0].end_ms, b[1].start_ms);
  EXPECT_EQ(b[1].end_ms, kMax);
}

TEST(DownsampleTest, SamplesOutsideTheRangeMakeNoBucket) {
  auto b = Downsample(100, 200, 10, {{99, 1.0}, {200, 2.0}});
  EXPECT_TRUE(b.empty());
}

}  // namespace
}  // namespace downsample_test
}  // namespace expanse::tsdb
