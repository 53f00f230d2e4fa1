#include "capture/record_budget.h"

#include <gtest/gtest.h>

namespace expanse::capture {
namespace {

BudgetOptions Budgets() {
  BudgetOptions options;
  options.always_on_fraction = 0.01;
  options.trace_fraction = 0.04;
  return options;
}

TEST(RecordBudget, WithoutABudgetEverythingIsRecorded) {
  RecordBudget budget;
  EXPECT_DOUBLE_EQ(budget.Duty(false), 1.0);
  budget.Observe(100'000'000, 1000);
  EXPECT_DOUBLE_EQ(budget.Duty(false), 1.0);
  EXPECT_EQ(budget.OnMs(1000, true), 1000u);
}

TEST(RecordBudget, LooksBrieflyBeforeItKnowsTheRate) {
  RecordBudget budget(Budgets());
  EXPECT_DOUBLE_EQ(budget.Duty(false), 0.1);
  EXPECT_EQ(budget.OnMs(1000, false), 100u);
}

TEST(RecordBudget, AKernelHeavyJobIsRecordedAllTheTime) {
  RecordBudget budget(Budgets());
  budget.Observe(600, 1000);  // 600 records/s x 2.3 us = 0.14 % of the time
  EXPECT_DOUBLE_EQ(budget.Duty(false), 1.0);
  EXPECT_EQ(budget.OnMs(1000, false), 1000u);
}

TEST(RecordBudget, ALaunchBoundJobIsRecordedInShortBurstsWithinTheBudget) {
  RecordBudget budget(Budgets());
  budget.Observe(11700, 100);  // 117,000 records/s: 27 % of the time if all recorded
  const double always_on = budget.Duty(false);
  EXPECT_NEAR(always_on * 117000 * 2.3e-6, 0.01, 1e-9);
  EXPECT_EQ(budget.OnMs(1000, false), 37u);
  // A Phase B trace may spend four times as much.
  EXPECT_NEAR(budget.Duty(true) * 117000 * 2.3e-6, 0.04, 1e-9);
  EXPECT_EQ(budget.OnMs(1000, true), 149u);
}

TEST(RecordBudget, NeverRecordsLessThanTheFloor) {
  RecordBudget budget(Budgets());
  budget.Observe(100'000'000, 1000);
  EXPECT_DOUBLE_EQ(budget.Duty(false), 0.01);
  EXPECT_EQ(budget.OnMs(1000, false), 10u);
  EXPECT_EQ(budget.OnMs(10, false), 1u);  // at least a millisecond
}

TEST(RecordBudget, ARisingRateCountsAtOnceAFallingOneGradually) {
  RecordBudget budget;
  budget.Observe(1000, 1000);
  budget.Observe(200000, 1000);
  EXPECT_DOUBLE_EQ(budget.records_per_second(), 200000);
  budget.Observe(0, 1000);
  EXPECT_DOUBLE_EQ(budget.records_per_second(), 100000);
  budget.Observe(0, 1000);
  EXPECT_DOUBLE_EQ(budget.records_per_second(), 50000);
  budget.Observe(5, 0);  // no recording time: no news
  EXPECT_DOUBLE_EQ(budget.records_per_second(), 50000);
}

TEST(RecordBudget, OptionsSetTheBudgetAndTheCost) {
  BudgetOptions options;
  options.always_on_fraction = 0.02;
  options.record_cost_ns = 1000;
  RecordBudget budget(options);
  budget.Observe(100000, 1000);  // 10 % of the time at 1 us a record
  EXPECT_NEAR(budget.Duty(false), 0.2, 1e-12);
}

}  // namespace
}  // namespace expanse::capture
