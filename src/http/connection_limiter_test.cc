#include "http/connection_limiter.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::http_internal {
namespace {

TEST(AddressKeyTest, CountsIpv4ByAddressAndIpv6ByPrefix) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"192.0.2.7", "192.0.2.7"},
      {"127.0.0.1", "127.0.0.1"},
      {"::ffff:192.0.2.7", "192.0.2.7"},  // v4-mapped: the IPv4 address
      {"::FFFF:192.0.2.7", "192.0.2.7"},
      {"::ffff:c000:207", "192.0.2.7"},
      {"2001:db8::1", "2001:db8::/64"},
      {"2001:db8::2", "2001:db8::/64"},
      {"2001:db8:0:0:ffff:ffff:ffff:ffff", "2001:db8::/64"},
      {"2001:db8:0:1::1", "2001:db8:0:1::/64"},
      {"2001:DB8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
      {"::1", "::/64"},
      {"fe80::1", "fe80::/64"},
      // Not an address: counted under the text itself.
      {"", ""},
      {"localhost", "localhost"},
      {"192.0.2.256", "192.0.2.256"},
      {"fe80::1%eth0", "fe80::1%eth0"},
      {std::string("192.0.2.7\0x", 11), std::string("192.0.2.7\0x", 11)},
  };
  for (const auto& [ip, key] : cases) {
    SCOPED_TRACE(ip);
    EXPECT_EQ(AddressKey(ip), key);
  }
}

TEST(UnmapV4Test, UnmapsOnlyV4MappedAddresses) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"::ffff:192.0.2.7", "192.0.2.7"},
      {"::ffff:127.0.0.1", "127.0.0.1"},
      {"192.0.2.7", "192.0.2.7"},
      {"2001:db8::1", "2001:db8::1"},  // unchanged text, not canonicalised
      {"::1", "::1"},
      {"::192.0.2.7", "::192.0.2.7"},  // v4-compatible is not v4-mapped
      {"not an address", "not an address"},
      {"", ""},
  };
  for (const auto& [ip, unmapped] : cases) {
    SCOPED_TRACE(ip);
    EXPECT_EQ(UnmapV4(ip), unmapped);
  }
}

TEST(ConnectionLimiterTest, CapsEachAddress) {
  ConnectionLimiter limiter(/*max_total=*/100, /*max_per_address=*/2);
  std::optional<ConnectionLimiter::Slot> a1 = limiter.TryAcquire("192.0.2.1");
  std::optional<ConnectionLimiter::Slot> a2 = limiter.TryAcquire("192.0.2.1");
  ASSERT_TRUE(a1 && a2);
  EXPECT_FALSE(limiter.TryAcquire("192.0.2.1"));
  EXPECT_FALSE(limiter.TryAcquire("192.0.2.1"));
  std::optional<ConnectionLimiter::Slot> b1 = limiter.TryAcquire("192.0.2.2");
  EXPECT_TRUE(b1);  // another address has its own count
  EXPECT_EQ(limiter.open(), 3u);
  EXPECT_EQ(limiter.open_for("192.0.2.1"), 2u);
  EXPECT_EQ(limiter.open_for("192.0.2.2"), 1u);
  EXPECT_EQ(limiter.open_for("192.0.2.3"), 0u);
  EXPECT_EQ(limiter.refused(), 2u);
}

TEST(ConnectionLimiterTest, CapsTheTotal) {
  ConnectionLimiter limiter(/*max_total=*/3, /*max_per_address=*/2);
  std::vector<ConnectionLimiter::Slot> slots;
  for (const char* ip : {"192.0.2.1", "192.0.2.2", "192.0.2.3"}) {
    std::optional<ConnectionLimiter::Slot> slot = limiter.TryAcquire(ip);
    ASSERT_TRUE(slot) << ip;
    slots.push_back(*std::move(slot));
  }
  EXPECT_FALSE(limiter.TryAcquire("192.0.2.4"));
  EXPECT_FALSE(limiter.TryAcquire("192.0.2.1"));
  EXPECT_EQ(limiter.open(), 3u);
  EXPECT_EQ(limiter.refused(), 2u);
  EXPECT_EQ(limiter.open_for("192.0.2.4"), 0u);  // a refused key is not counted
}

TEST(ConnectionLimiterTest, ReleasesOnDestruction) {
  ConnectionLimiter limiter(/*max_total=*/1, /*max_per_address=*/1);
  {
    std::optional<ConnectionLimiter::Slot> slot = limiter.TryAcquire("192.0.2.1");
    ASSERT_TRUE(slot);
    EXPECT_FALSE(limiter.TryAcquire("192.0.2.1"));
  }
  EXPECT_EQ(limiter.open(), 0u);
  EXPECT_EQ(limiter.open_for("192.0.2.1"), 0u);
  EXPECT_TRUE(limiter.TryAcquire("192.0.2.1"));  // released again at the end of the statement
  EXPECT_TRUE(limiter.TryAcquire("192.0.2.2"));
  EXPECT_EQ(limiter.open(), 0u);
  EXPECT_EQ(limiter.refused(), 1u);
}

TEST(ConnectionLimiterTest, MovedSlotReleasesOnce) {
  ConnectionLimiter limiter(/*max_total=*/10, /*max_per_address=*/1);
  std::optional<ConnectionLimiter::Slot> first = limiter.TryAcquire("192.0.2.1");
  ASSERT_TRUE(first);
  {
    ConnectionLimiter::Slot moved(*std::move(first));
    first.reset();  // the moved-from slot gives nothing back
    EXPECT_EQ(limiter.open(), 1u);
    EXPECT_EQ(limiter.open_for("192.0.2.1"), 1u);
    EXPECT_FALSE(limiter.TryAcquire("192.0.2.1"));
  }
  EXPECT_EQ(limiter.open(), 0u);
  EXPECT_EQ(limiter.open_for("192.0.2.1"), 0u);
  EXPECT_TRUE(limiter.TryAcquire("192.0.2.1"));
}

TEST(ConnectionLimiterTest, Ipv6HostsShareTheirSlash64) {
  ConnectionLimiter limiter(/*max_total=*/100, /*max_per_address=*/1);
  std::optional<ConnectionLimiter::Slot> one = limiter.TryAcquire(AddressKey("2001:db8::1"));
  ASSERT_TRUE(one);
  EXPECT_FALSE(limiter.TryAcquire(AddressKey("2001:db8::2")));  // the same /64
  std::optional<ConnectionLimiter::Slot> other =
      limiter.TryAcquire(AddressKey("2001:db8:0:1::1"));  // the next /64
  EXPECT_TRUE(other);
  EXPECT_EQ(limiter.open_for("2001:db8::/64"), 1u);
  EXPECT_EQ(limiter.open_for("2001:db8:0:1::/64"), 1u);
  EXPECT_EQ(limiter.refused(), 1u);
}

TEST(ConnectionLimiterTest, V4MappedCountsAsIpv4) {
  ConnectionLimiter limiter(/*max_total=*/100, /*max_per_address=*/1);
  std::optional<ConnectionLimiter::Slot> v4 = limiter.TryAcquire(AddressKey("192.0.2.7"));
  ASSERT_TRUE(v4);
  EXPECT_FALSE(limiter.TryAcquire(AddressKey("::ffff:192.0.2.7")));
  EXPECT_EQ(limiter.open_for("192.0.2.7"), 1u);
  EXPECT_EQ(limiter.refused(), 1u);
}

TEST(ConnectionLimiterTest, ZeroPerAddressRefusesEverything) {
  ConnectionLimiter limiter(/*max_total=*/10, /*max_per_address=*/0);
  EXPECT_FALSE(limiter.TryAcquire("192.0.2.1"));
  EXPECT_EQ(limiter.open(), 0u);
  EXPECT_EQ(limiter.refused(), 1u);
}

}  // namespace
}  // namespace expanse::http_internal
