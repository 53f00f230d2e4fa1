#include "cupti/node_facts.h"

#include <gtest/gtest.h>

namespace expanse::cupti {
namespace {

TEST(NodeFactsTest, EffectiveCapabilities) {
  const auto mask = ParseEffectiveCapabilities(
      "Name:\texpanse-cupti-h\nCapInh:\t0000000000000000\nCapPrm:\t0000004000000000\n"
      "CapEff:\t0000004000000000\nCapBnd:\t000001ffffffffff\n");
  ASSERT_TRUE(mask);
  EXPECT_TRUE(HasCapability(*mask, kCapPerfmon));
  EXPECT_FALSE(HasCapability(*mask, kCapSysAdmin));
  const auto root = ParseEffectiveCapabilities("CapEff:\t000001ffffffffff\n");
  ASSERT_TRUE(root);
  EXPECT_TRUE(HasCapability(*root, kCapSysAdmin));
  EXPECT_FALSE(ParseEffectiveCapabilities("CapPrm:\t0\n"));
  EXPECT_FALSE(ParseEffectiveCapabilities("CapEff:\tzz\n"));
  EXPECT_FALSE(ParseEffectiveCapabilities("CapEff:\t00000000000000000000\n"));
}

TEST(NodeFactsTest, RmProfilingAdminOnlyAsTheH200MachineShowsIt) {
  // ../shared/fixtures/gpu/h200/facts.txt
  EXPECT_EQ(ParseRmProfilingAdminOnly("RmLogonRC: 1\nRmProfilingAdminOnly: 0\n"
                                      "EnableS0ixPowerManagement: 0\n"),
            0);
  EXPECT_EQ(ParseRmProfilingAdminOnly("RmProfilingAdminOnly: 1"), 1);
  EXPECT_FALSE(ParseRmProfilingAdminOnly("RmProfilingAdminOnlyX: 1\n"));
  EXPECT_FALSE(ParseRmProfilingAdminOnly("RmProfilingAdminOnly: yes\n"));
  EXPECT_FALSE(ParseRmProfilingAdminOnly(""));
}

TEST(NodeFactsTest, DriverVersionFromEitherKernelModule) {
  EXPECT_EQ(ParseNvidiaDriverVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
                                     "580.95.05  Tue Sep 23 09:23:24 UTC 2025\nGCC version: x\n"),
            "580.95.05");
  EXPECT_EQ(ParseNvidiaDriverVersion("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                     "580.159.04  Release Build\n"),
            "580.159.04");
  EXPECT_EQ(ParseNvidiaDriverVersion("GCC version: 12\n"), "");
  EXPECT_EQ(ParseNvidiaDriverVersion("NVRM version: NVIDIA Kernel Module\n"), "");
}

}  // namespace
}  // namespace expanse::cupti
