#include "slurm/hostlist.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::slurm {
namespace {

using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view text) {
  Result<Hosts> hosts = ExpandHostList(text);
  EXPECT_TRUE(hosts.ok()) << hosts.status();
  return hosts.ok() ? *hosts : Hosts{};
}

TEST(HostListTest, ExpandsRangesListsAndProducts) {
  EXPECT_EQ(Expand(""), Hosts{});
  EXPECT_EQ(Expand("vm"), Hosts{"vm"});
  EXPECT_EQ(Expand("worker[1-2]"), (Hosts{"worker1", "worker2"}));
  EXPECT_EQ(Expand("vm,worker[1-2]"), (Hosts{"vm", "worker1", "worker2"}));
  EXPECT_EQ(Expand("gpu[07-08,10]"), (Hosts{"gpu07", "gpu08", "gpu10"}));
  EXPECT_EQ(Expand("n[8-10]"), (Hosts{"n8", "n9", "n10"}));
  EXPECT_EQ(Expand("r[1-2]-n[1-2].x"), (Hosts{"r1-n1.x", "r1-n2.x", "r2-n1.x", "r2-n2.x"}));
}

TEST(HostListTest, RejectsMalformedLists) {
  EXPECT_EQ(ExpandHostList("n[1-2").status().message(), "host list \"n[1-2\": '[' without ']'");
  EXPECT_EQ(ExpandHostList("n1-2]").status().message(), "host list \"n1-2]\": unbalanced brackets");
  EXPECT_EQ(ExpandHostList("n[[1]]").status().message(),
            "host list \"n[[1]]\": unbalanced brackets");
  EXPECT_EQ(ExpandHostList("n[2-1]").status().message(),
            "host list \"n[2-1]\": range \"2-1\" runs backwards");
  EXPECT_EQ(ExpandHostList("n[a]").status().message(), "host list \"n[a]\": bad range \"a\"");
  EXPECT_EQ(ExpandHostList("a,,b").status().message(), "host list \"a,,b\": empty host name");
  EXPECT_EQ(ExpandHostList("a,,b").status().code(), StatusCode::kInvalidArgument);
}

TEST(HostListTest, BoundsTheNumberOfHosts) {
  EXPECT_EQ(ExpandHostList("n[0-999999999]").status().message(),
            "host list \"n[0-999999999]\": more than 65536 hosts");
  EXPECT_EQ(ExpandHostList("a[1-3]", 2).status().message(),
            "host list \"a[1-3]\": more than 2 hosts");
  EXPECT_EQ(ExpandHostList("a[1-2]b[1-2]", 3).status().message(),
            "host list \"a[1-2]b[1-2]\": more than 3 hosts");
  EXPECT_TRUE(ExpandHostList("a[1-2]b[1-2]", 4).ok());
}

}  // namespace
}  // namespace expanse::slurm
