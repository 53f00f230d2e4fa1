#include "core/duration.h"

#include <gtest/gtest.h>

namespace expanse {
namespace {

using std::chrono::milliseconds;

TEST(DurationTest, ParsesUnitsAndCombinations) {
  EXPECT_EQ(*ParseDuration("0"), milliseconds(0));
  EXPECT_EQ(*ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("90s"), milliseconds(90'000));
  EXPECT_EQ(*ParseDuration("1m"), milliseconds(60'000));
  EXPECT_EQ(*ParseDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(*ParseDuration("2d"), milliseconds(172'800'000));
}

TEST(DurationTest, RefusesWhatIsNotADuration) {
  for (const char* bad :
       {"", "1", "m", "1x", "-1s", "1.5h", "1h ", " 1h", "400d", "99999999999999999999s"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("use e.g. 90s"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace expanse
