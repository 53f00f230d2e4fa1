#include "server/concurrency_slots.h"

#include <optional>
#include <utility>

#include <gtest/gtest.h>

namespace expanse::server {
namespace {

TEST(ConcurrencySlotsTest, AtMostSoManyAtOnceAndEachGivenBackOnce) {
  ConcurrencySlots slots(2);
  std::optional<ConcurrencySlots::Slot> a = slots.TryTake();
  std::optional<ConcurrencySlots::Slot> b = slots.TryTake();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(slots.TryTake());
  EXPECT_EQ(slots.in_use(), 2);  // the refused try left no count behind
  ConcurrencySlots::Slot moved = std::move(*a);
  a.reset();  // the moved-from slot gives nothing back
  EXPECT_EQ(slots.in_use(), 2);
  b.reset();
  EXPECT_EQ(slots.in_use(), 1);
  EXPECT_TRUE(slots.TryTake());  // taken and given back at once
  EXPECT_EQ(slots.in_use(), 1);
}

}  // namespace
}  // namespace expanse::server
