#include "core/bytes.h"

#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/crc32.h"

namespace expanse::bytes {
namespace {

TEST(BytesTest, FixedWidthIntegersAreLittleEndianAndRoundTrip) {
  std::string out;
  PutU8(out, 0xab);
  PutU16(out, 0x1234);
  PutU32(out, 0xdeadbeef);
  PutU64(out, 0x0102030405060708);
  EXPECT_EQ(out, std::string("\xab\x34\x12\xef\xbe\xad\xde\x08\x07\x06\x05\x04\x03\x02\x01", 15));
  ByteReader r(out);
  EXPECT_EQ(r.U8(), 0xab);
  EXPECT_EQ(r.U16(), 0x1234);
  EXPECT_EQ(r.U32(), 0xdeadbeefu);
  EXPECT_EQ(r.U64(), 0x0102030405060708u);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(LoadU32(out.data() + 3), 0xdeadbeefu);
}

TEST(BytesTest, VarintsAndZigZagCoverTheWholeRange) {
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{300},
                     std::numeric_limits<uint64_t>::max()}) {
    std::string out;
    PutVarint(out, v);
    ByteReader r(out);
    EXPECT_EQ(r.Varint(), v);
    EXPECT_TRUE(r.ok() && r.empty());
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(static_cast<int64_t>(UnZigZag(ZigZag(static_cast<uint64_t>(v)))), v);
  }
  EXPECT_EQ(ZigZag(static_cast<uint64_t>(int64_t{-1})), 1u);
}

TEST(BytesTest, AShortOrOverlongReadFailsForGood) {
  const std::string two_bytes("\x01\x02", 2);  // the reader holds a view: keep it alive
  ByteReader short_read(two_bytes);
  EXPECT_EQ(short_read.U32(), 0u);
  EXPECT_FALSE(short_read.ok());
  EXPECT_EQ(short_read.U8(), 0u) << "nothing more is read after a failure";
  // Eleven continuation bytes: no 64-bit value is that long.
  const std::string eleven = std::string(10, '\xff') + '\x01';
  ByteReader overlong(eleven);
  EXPECT_EQ(overlong.Varint(), 0u);
  EXPECT_FALSE(overlong.ok());
  ByteReader bytes("abc");
  EXPECT_EQ(bytes.Bytes(2), "ab");
  EXPECT_EQ(bytes.Bytes(2), "");
  EXPECT_FALSE(bytes.ok());
}

TEST(Crc32Test, MatchesTheIeeeCheckValueAndChains) {
  EXPECT_EQ(Crc32("123456789"), 0xcbf43926u);  // the standard check value
  EXPECT_EQ(Crc32("6789", Crc32("12345")), Crc32("123456789"));
  EXPECT_EQ(Crc32(""), 0u);
}

}  // namespace
}  // namespace expanse::bytes
