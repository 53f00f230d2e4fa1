#include "core/loopback.h"

#include <gtest/gtest.h>

namespace expanse {
namespace {

TEST(IsLoopbackHostTest, AcceptsLoopback) {
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "127.255.255.255", "::1",
                           "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
}

TEST(IsLoopbackHostTest, RejectsEverythingElse) {
  for (const char* host :
       {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "126.255.255.255", "::ffff:10.0.0.1",
        "localhost.example.org", "LOCALHOST.", "example.org", "127.1", "", " 127.0.0.1",
        "[127.0.0.1]", "[::1", "::1]", "[]", "[::2]"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace expanse
