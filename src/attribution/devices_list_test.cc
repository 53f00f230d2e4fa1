#include "attribution/devices_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::attribution {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(DevicesListTest, JobWhitelist) {
  // What task/cgroup writes for a job holding /dev/nvidia2 and /dev/nvidia0, plus the usual
  // devices every job gets.
  const DeviceWhitelist whitelist = ParseDevicesList(
                                        "c 1:3 rwm\n"
                                        "c 136:* rwm\n"
                                        "c 195:2 rwm\n"
                                        "c 195:0 rw\n"
                                        "c 195:255 rwm\n"
                                        "c 195:254 rwm\n"
                                        "c 195:1 m\n"
                                        "b 195:3 rwm\n"
                                        "c 195:2 rwm\n")
                                        .value();
  EXPECT_FALSE(whitelist.all_gpus);
  EXPECT_THAT(whitelist.gpu_minors, ElementsAre(0u, 2u));
}

TEST(DevicesListTest, Unconstrained) {
  EXPECT_TRUE(ParseDevicesList("a *:* rwm\n").value().all_gpus);
  // Only the kernel's listing of a default-allow cgroup is that; other "a" entries are grants.
  EXPECT_TRUE(ParseDevicesList("a *:* rwm\n").value().default_allow);
  EXPECT_FALSE(ParseDevicesList("a *:* rw\n").value().default_allow);
  EXPECT_FALSE(ParseDevicesList("c *:* rwm\n").value().default_allow);
  EXPECT_FALSE(ParseDevicesList("c 195:0 rwm\n").value().default_allow);
  EXPECT_TRUE(ParseDevicesList("c 195:* rw\n").value().all_gpus);
  EXPECT_TRUE(ParseDevicesList("c *:* rw\n").value().all_gpus);
  EXPECT_FALSE(ParseDevicesList("c *:* m\n").value().all_gpus);
  EXPECT_THAT(ParseDevicesList("").value().gpu_minors, IsEmpty());
}

TEST(DevicesListTest, Malformed) {
  const Status status = ParseDevicesList("c 195:0 rwm\nc 195 rwm\n").status();
  EXPECT_EQ(status.message(),
            "devices.list line 2: expected \"<a|b|c> <major>:<minor> <rwm>\", got \"c 195 rwm\"");
  EXPECT_EQ(status.reason(), "devices_list_malformed");
  EXPECT_FALSE(ParseDevicesList("x 195:0 rwm\n").ok());
  EXPECT_FALSE(ParseDevicesList("c 195:0 rwx\n").ok());
  EXPECT_FALSE(ParseDevicesList("c 195:-1 rw\n").ok());
  EXPECT_FALSE(ParseDevicesList("c 195:0\n").ok());
}

}  // namespace
}  // namespace expanse::attribution
