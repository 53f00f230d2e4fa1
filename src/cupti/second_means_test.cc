#include "cupti/second_means.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace expanse::cupti {
namespace {

TEST(SecondMeansTest, WeighsEachSampleByItsDuration) {
  SecondMeans means(2);
  const double first[] = {1.0, 10.0};
  const double second[] = {0.0, 20.0};
  means.Add(0, 300, first);      // 300 ns at 1.0
  means.Add(300, 1000, second);  // 700 ns at 0.0
  const auto result = means.Take();
  EXPECT_EQ(result.samples, 2u);
  ASSERT_TRUE(result.values[0]);
  EXPECT_DOUBLE_EQ(*result.values[0], 0.3);
  EXPECT_DOUBLE_EQ(*result.values[1], 17.0);
}

TEST(SecondMeansTest, TakeStartsOver) {
  SecondMeans means(1);
  const double value[] = {0.5};
  means.Add(0, 10, value);
  EXPECT_DOUBLE_EQ(*means.Take().values[0], 0.5);
  const auto empty = means.Take();
  EXPECT_EQ(empty.samples, 0u);
  EXPECT_FALSE(empty.values[0]);
}

TEST(SecondMeansTest, LeavesOutValuesCuptiCouldNotEvaluate) {
  SecondMeans means(2);
  const double bad[] = {std::nan(""), std::numeric_limits<double>::infinity()};
  const double good[] = {0.25, 0.0};
  means.Add(0, 100, bad);
  means.Add(100, 200, good);
  const auto result = means.Take();
  EXPECT_DOUBLE_EQ(*result.values[0], 0.25);
  EXPECT_DOUBLE_EQ(*result.values[1], 0.0);
}

TEST(SecondMeansTest, ShortOrReversedSpansStillCountAndShortRowsAreNotEvaluated) {
  SecondMeans means(2);
  const double one[] = {0.8};
  means.Add(50, 50, one);
  means.Add(90, 10, one);
  const auto result = means.Take();
  EXPECT_DOUBLE_EQ(*result.values[0], 0.8);
  EXPECT_FALSE(result.values[1]);
}

}  // namespace
}  // namespace expanse::cupti
