#include "slurm/hostlist.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::slurm {
namespace hostlist_test {
namespace {

using ::testing::ElementsAre;
using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view text) {
  Result<Hosts> hosts = ExpandHostList(text);
  EXPECT_TRUE(hosts.ok()) << hosts.status();
  return hosts.ok() ? *hosts : Hosts{};
}

TEST(HostListTest, ExpandsRangesWithPadding) {
  EXPECT_THAT(Expand("gpu[01-04,07]"), ElementsAre("gpu01", "gpu02", "gpu03", "gpu04", "gpu07"));
  EXPECT_EQ(Expand("gpu[07-08,10]"), (Hosts{"gpu07", "gpu08", "gpu10"}));
  EXPECT_THAT(Expand("n[8-10]"), ElementsAre("n8", "n9", "n10"));
  EXPECT_THAT(Expand("n[098-100]"), ElementsAre("n098", "n099", "n100"));
  EXPECT_THAT(Expand("/dev/nvidia[2-3]"), ElementsAre("/dev/nvidia2", "/dev/nvidia3"));
}

TEST(HostListTest, ExpandsListsAndProducts) {
  EXPECT_EQ(Expand("vm"), Hosts{"vm"});
  EXPECT_THAT(Expand("worker1"), ElementsAre("worker1"));
  EXPECT_EQ(Expand("worker[1-2]"), (Hosts{"worker1", "worker2"}));
  EXPECT_EQ(Expand("vm,worker[1-2]"), (Hosts{"vm", "worker1", "worker2"}));
  EXPECT_THAT(Expand("/dev/nvidia2,/dev/nvidia3"), ElementsAre("/dev/nvidia2", "/dev/nvidia3"));
  EXPECT_EQ(Expand("r[1-2]-n[1-2].x"), (Hosts{"r1-n1.x", "r1-n2.x", "r2-n1.x", "r2-n2.x"}));
  EXPECT_THAT(Expand("rack[1-2]-n[1-2],login"),
              ElementsAre("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2", "login"));
}

TEST(HostListTest, RejectsBadSyntax) {
  EXPECT_EQ(ExpandHostList("gpu[01-04").status().message(),
            "hostlist \"gpu[01-04\": '[' without ']'");
  EXPECT_EQ(ExpandHostList("n[1-2").status().message(), "hostlist \"n[1-2\": '[' without ']'");
  EXPECT_EQ(ExpandHostList("gpu01-04]").status().message(),
            "hostlist \"gpu01-04]\": ']' without '['");
  EXPECT_EQ(ExpandHostList("n1-2]").status().message(), "hostlist \"n1-2]\": ']' without '['");
  EXPECT_EQ(ExpandHostList("gpu[4-1]").status().message(),
            "hostlist \"gpu[4-1]\": range \"4-1\" runs backwards");
  EXPECT_EQ(ExpandHostList("n[2-1]").status().message(),
            "hostlist \"n[2-1]\": range \"2-1\" runs backwards");
  EXPECT_EQ(ExpandHostList("gpu[a-b]").status().message(),
            "hostlist \"gpu[a-b]\": range \"a-b\" is not N or N-M");
  EXPECT_EQ(ExpandHostList("n[a]").status().message(),
            "hostlist \"n[a]\": range \"a\" is not N or N-M");
  EXPECT_EQ(ExpandHostList("n[1-9999999999]").status().message(),
            "hostlist \"n[1-9999999999]\": range \"1-9999999999\" is not N or N-M");
  EXPECT_EQ(ExpandHostList("a,,b").status().message(), "hostlist \"a,,b\": empty name");
  EXPECT_EQ(ExpandHostList("a,,b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpandHostList("").status().message(), "hostlist \"\": empty name");
  EXPECT_EQ(ExpandHostList("a[[1]]").status().message(), "hostlist \"a[[1]]\": nested '['");
  EXPECT_EQ(ExpandHostList("n[[1]]").status().message(), "hostlist \"n[[1]]\": nested '['");
  EXPECT_EQ(ExpandHostList("a b").status().reason(), "hostlist_malformed");
}

TEST(HostListTest, CapsExpansion) {
  const Result<Hosts> huge = ExpandHostList("n[0-999999999]");
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().reason(), "hostlist_too_large");
  EXPECT_EQ(huge.status().message(),
            "hostlist \"n[0-999999999]\" expands to more than 65536 names");
  EXPECT_EQ(ExpandHostList("n[1-3]", 2).status().message(),
            "hostlist \"n[1-3]\" expands to more than 2 names");
  EXPECT_TRUE(ExpandHostList("n[1-3]", 3).ok());
  EXPECT_EQ(ExpandHostList("a[1-2]b[1-2]", 3).status().message(),
            "hostlist \"a[1-2]b[1-2]\" expands to more than 3 names");
  EXPECT_TRUE(ExpandHostList("a[1-2]b[1-2]", 4).ok());
}

TEST(HostListTest, ContainsMatchesWithoutExpanding) {
  EXPECT_TRUE(HostListContains("gpu[01-04]", "gpu03").value());
  EXPECT_FALSE(HostListContains("gpu[01-04]", "gpu3").value());  // padding is part of the name
  EXPECT_FALSE(HostListContains("gpu[01-04]", "gpu05").value());
  EXPECT_TRUE(HostListContains("n[8-10]", "n10").value());
  EXPECT_FALSE(HostListContains("n[8-10]", "n010").value());
  EXPECT_TRUE(HostListContains("n[0-999999999]", "n123456789").value());
  EXPECT_TRUE(HostListContains("rack[1-2]-n[1-4],login", "rack2-n4").value());
  EXPECT_TRUE(HostListContains("rack[1-2]-n[1-4],login", "login").value());
  EXPECT_FALSE(HostListContains("rack[1-2]-n[1-4],login", "rack3-n1").value());
  EXPECT_TRUE(HostListContains("n[1-2][0-9]", "n19").value());
  EXPECT_FALSE(HostListContains("worker1", "worker10").value());
  EXPECT_EQ(HostListContains("gpu[", "gpu1").status().reason(), "hostlist_malformed");
}

TEST(HostListTest, ContainsAgreesWithExpand) {
  for (const char* expression :
       {"gpu[01-04,07]", "n[8-10]", "a[1-3]b[09-11]", "x,y[1-2]", "r[1-2]-n[1-2].x"}) {
    const Hosts names = ExpandHostList(expression).value();
    for (const std::string& name : names) {
      EXPECT_TRUE(HostListContains(expression, name).value()) << expression << " " << name;
    }
  }
}

}  // namespace
}  // namespace hostlist_test
}  // namespace expanse::slurm
