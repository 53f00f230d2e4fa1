#include "http/request_body_budget.h"

#include <limits>
#include <optional>
#include <utility>

#include <gtest/gtest.h>

namespace expanse::http_internal {
namespace {

constexpr size_t kMiB = 1 << 20;

TEST(RequestBodyBudgetTest, SmallBodiesAreNotCounted) {
  RequestBodyBudget budget(2 * kMiB, kMiB);
  std::optional<RequestBodyBudget::Hold> big = budget.TryHold("a", 2 * kMiB);
  ASSERT_TRUE(big);
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(budget.TryHold("a", RequestBodyBudget::kUncountedBytes));
  EXPECT_EQ(budget.held(), 2 * kMiB);
  EXPECT_EQ(budget.refused(), 0u);
}

TEST(RequestBodyBudgetTest, BoundsEachAddressAndTheTotal) {
  RequestBodyBudget budget(5 * kMiB, 2 * kMiB);
  std::optional<RequestBodyBudget::Hold> a1 = budget.TryHold("a", 2 * kMiB);
  ASSERT_TRUE(a1);
  EXPECT_FALSE(budget.TryHold("a", kMiB));  // a's share is used up
  std::optional<RequestBodyBudget::Hold> b1 = budget.TryHold("b", 2 * kMiB);
  ASSERT_TRUE(b1);
  EXPECT_FALSE(budget.TryHold("c", 2 * kMiB));  // 6 MiB in all
  std::optional<RequestBodyBudget::Hold> c1 = budget.TryHold("c", kMiB);
  ASSERT_TRUE(c1);
  EXPECT_EQ(budget.held(), 5 * kMiB);
  EXPECT_EQ(budget.held_for("a"), 2 * kMiB);
  EXPECT_EQ(budget.refused(), 2u);

  a1.reset();  // given back: a may send again, and c may take a's place in the total
  EXPECT_EQ(budget.held_for("a"), 0u);
  EXPECT_TRUE(budget.TryHold("a", 2 * kMiB));
  b1->Release();
  b1->Release();  // once only
  EXPECT_EQ(budget.held(), kMiB);
}

TEST(RequestBodyBudgetTest, OneBodyAloneAlwaysGoesThrough) {
  RequestBodyBudget budget(kMiB, kMiB);
  std::optional<RequestBodyBudget::Hold> alone = budget.TryHold("a", 64 * kMiB);
  ASSERT_TRUE(alone);
  EXPECT_FALSE(budget.TryHold("b", 2 * kMiB));
  alone.reset();
  EXPECT_TRUE(budget.TryHold("b", 2 * kMiB));
}

TEST(RequestBodyBudgetTest, HugeBodiesDoNotWrapTheSumsAround) {
  RequestBodyBudget budget(4 * kMiB, 4 * kMiB);
  std::optional<RequestBodyBudget::Hold> first = budget.TryHold("a", kMiB);
  ASSERT_TRUE(first);
  EXPECT_FALSE(budget.TryHold("a", std::numeric_limits<size_t>::max()));
  EXPECT_FALSE(budget.TryHold("b", std::numeric_limits<size_t>::max() - kMiB + 1));
  EXPECT_EQ(budget.held(), kMiB);
}

TEST(RequestBodyBudgetTest, MovedHoldsGiveBackOnce) {
  RequestBodyBudget budget(4 * kMiB, 4 * kMiB);
  std::optional<RequestBodyBudget::Hold> first = budget.TryHold("a", 2 * kMiB);
  ASSERT_TRUE(first);
  RequestBodyBudget::Hold moved = std::move(*first);
  first.reset();
  EXPECT_EQ(budget.held(), 2 * kMiB);
  RequestBodyBudget::Hold other = *budget.TryHold("a", kMiB);
  other = std::move(moved);  // other's 1 MiB given back, moved's 2 MiB now other's
  EXPECT_EQ(budget.held(), 2 * kMiB);
  other.Release();
  EXPECT_EQ(budget.held(), 0u);
}

}  // namespace
}  // namespace expanse::http_internal
