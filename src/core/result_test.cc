#include "core/result.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace expanse {
namespace {

Result<int> ParsePositive(int n) {
  if (n <= 0) {
    return InvalidArgumentError("not positive: " + std::to_string(n));
  }
  return n;
}

Result<int> DoubledPositive(int n) {
  EXPANSE_ASSIGN_OR_RETURN(const int value, ParsePositive(n));
  return value * 2;
}

Status CheckAtMost100(int n) { return n > 100 ? ResourceExhaustedError("over 100") : OkStatus(); }

Status CheckBoth(int a, int b) {
  EXPANSE_RETURN_IF_ERROR(ParsePositive(a));  // a Result works
  EXPANSE_RETURN_IF_ERROR(CheckAtMost100(b));
  return OkStatus();
}

template <typename A, typename B>
Result<std::pair<A, B>> MakePair(A a, B b) {
  return std::pair<A, B>(a, b);
}

// The expression holds a comma outside parentheses; lhs is an existing variable.
Result<int> SumOfPair() {
  std::pair<int, int> pair;
  EXPANSE_ASSIGN_OR_RETURN(pair, MakePair<int, int>(1, 2));
  return pair.first + pair.second;
}

TEST(ResultTest, HoldsValue) {
  Result<std::string> result = std::string("gpu0");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.status().ok());
  EXPECT_EQ(result.value(), "gpu0");
  EXPECT_EQ(*result, "gpu0");
  EXPECT_EQ(result->size(), 4u);
}

TEST(ResultTest, ConvertsFromAnythingTheValueTypeAccepts) {
  const Result<std::string> result = "literal";
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, "literal");
}

TEST(ResultTest, HoldsError) {
  const Result<int> result = NotFoundError("no gpu");
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status(), NotFoundError("no gpu"));
}

TEST(ResultTest, ValueOrTakesTheFallbackOnlyForAnError) {
  EXPECT_EQ(Result<std::string>("held").value_or("fallback"), "held");
  EXPECT_EQ(Result<std::string>(NotFoundError("x")).value_or("fallback"), "fallback");
  EXPECT_EQ(Result<int>(InvalidArgumentError("x")).value_or(7), 7);
}

TEST(ResultTest, OkStatusWithoutValueBecomesInternalError) {
  const Result<int> result = OkStatus();
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> result = std::make_unique<int>(7);
  ASSERT_TRUE(result.ok());
  std::unique_ptr<int> taken = std::move(result).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 7);
}

TEST(ResultTest, ValueIsMutableInPlace) {
  Result<std::vector<int>> result = std::vector<int>{1};
  result->push_back(2);
  (*result).push_back(3);
  EXPECT_EQ(result.value(), (std::vector<int>{1, 2, 3}));
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  const Result<int> result = DataLossError("torn record");
  EXPECT_DEATH((void)result.value(), "Result::value\\(\\) called on an error: DATA_LOSS: torn");
}

TEST(ResultMacrosTest, AssignOrReturnPassesValueThrough) {
  const Result<int> result = DoubledPositive(21);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 42);
}

TEST(ResultMacrosTest, AssignOrReturnPropagatesError) {
  const Result<int> result = DoubledPositive(-1);
  EXPECT_EQ(result.status(), InvalidArgumentError("not positive: -1"));
}

TEST(ResultMacrosTest, AssignOrReturnAcceptsCommasInExpression) {
  const Result<int> result = SumOfPair();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 3);
}

TEST(ResultMacrosTest, ReturnIfErrorAcceptsStatusAndResult) {
  EXPECT_TRUE(CheckBoth(1, 2).ok());
  EXPECT_EQ(CheckBoth(0, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckBoth(1, 200).code(), StatusCode::kResourceExhausted);
}

TEST(ResultMacrosTest, ReturnIfErrorEvaluatesExpressionOnce) {
  int calls = 0;
  auto counted = [&calls]() {
    ++calls;
    return OkStatus();
  };
  auto run = [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(counted());
    return OkStatus();
  };
  EXPECT_TRUE(run().ok());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace expanse
