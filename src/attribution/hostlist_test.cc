#include "attribution/hostlist.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::attribution {
namespace {

using ::testing::ElementsAre;

TEST(HostlistTest, ExpandsRangesWithPadding) {
  EXPECT_THAT(ExpandHostlist("gpu[01-04,07]").value(),
              ElementsAre("gpu01", "gpu02", "gpu03", "gpu04", "gpu07"));
  EXPECT_THAT(ExpandHostlist("n[8-10]").value(), ElementsAre("n8", "n9", "n10"));
  EXPECT_THAT(ExpandHostlist("n[098-100]").value(), ElementsAre("n098", "n099", "n100"));
  EXPECT_THAT(ExpandHostlist("/dev/nvidia[2-3]").value(),
              ElementsAre("/dev/nvidia2", "/dev/nvidia3"));
}

TEST(HostlistTest, ExpandsListsAndSeveralGroups) {
  EXPECT_THAT(ExpandHostlist("/dev/nvidia2,/dev/nvidia3").value(),
              ElementsAre("/dev/nvidia2", "/dev/nvidia3"));
  EXPECT_THAT(ExpandHostlist("rack[1-2]-n[1-2],login").value(),
              ElementsAre("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2", "login"));
  EXPECT_THAT(ExpandHostlist("worker1").value(), ElementsAre("worker1"));
}

TEST(HostlistTest, RejectsBadSyntax) {
  EXPECT_EQ(ExpandHostlist("gpu[01-04").status().message(),
            "hostlist \"gpu[01-04\": '[' without ']'");
  EXPECT_EQ(ExpandHostlist("gpu01-04]").status().message(),
            "hostlist \"gpu01-04]\": ']' without '['");
  EXPECT_EQ(ExpandHostlist("gpu[4-1]").status().message(),
            "hostlist \"gpu[4-1]\": range \"4-1\" runs backwards");
  EXPECT_EQ(ExpandHostlist("gpu[a-b]").status().message(),
            "hostlist \"gpu[a-b]\": range \"a-b\" is not N or N-M");
  EXPECT_EQ(ExpandHostlist("a,,b").status().message(), "hostlist \"a,,b\": empty name");
  EXPECT_EQ(ExpandHostlist("a[[1]]").status().message(), "hostlist \"a[[1]]\": nested '['");
  EXPECT_EQ(ExpandHostlist("a b").status().reason(), "hostlist_malformed");
}

TEST(HostlistTest, CapsExpansion) {
  const Result<std::vector<std::string>> huge = ExpandHostlist("n[0-999999999]");
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().reason(), "hostlist_too_large");
  EXPECT_EQ(ExpandHostlist("n[1-3]", 2).status().message(),
            "hostlist \"n[1-3]\" expands to more than 2 names");
  EXPECT_TRUE(ExpandHostlist("n[1-3]", 3).ok());
}

TEST(HostlistTest, ContainsMatchesWithoutExpanding) {
  EXPECT_TRUE(HostlistContains("gpu[01-04]", "gpu03").value());
  EXPECT_FALSE(HostlistContains("gpu[01-04]", "gpu3").value());  // padding is part of the name
  EXPECT_FALSE(HostlistContains("gpu[01-04]", "gpu05").value());
  EXPECT_TRUE(HostlistContains("n[8-10]", "n10").value());
  EXPECT_FALSE(HostlistContains("n[8-10]", "n010").value());
  EXPECT_TRUE(HostlistContains("n[0-999999999]", "n123456789").value());
  EXPECT_TRUE(HostlistContains("rack[1-2]-n[1-4],login", "rack2-n4").value());
  EXPECT_TRUE(HostlistContains("rack[1-2]-n[1-4],login", "login").value());
  EXPECT_FALSE(HostlistContains("rack[1-2]-n[1-4],login", "rack3-n1").value());
  EXPECT_TRUE(HostlistContains("n[1-2][0-9]", "n19").value());
  EXPECT_FALSE(HostlistContains("worker1", "worker10").value());
  EXPECT_EQ(HostlistContains("gpu[", "gpu1").status().reason(), "hostlist_malformed");
}

TEST(HostlistTest, ContainsAgreesWithExpand) {
  for (const char* expression : {"gpu[01-04,07]", "n[8-10]", "a[1-3]b[09-11]", "x,y[1-2]"}) {
    const std::vector<std::string> names = ExpandHostlist(expression).value();
    for (const std::string& name : names) {
      EXPECT_TRUE(HostlistContains(expression, name).value()) << expression << " " << name;
    }
  }
}

}  // namespace
}  // namespace expanse::attribution
