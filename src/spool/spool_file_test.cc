#include "spool/spool_file.h"

#include <zlib.h>

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/bytes.h"
#include "core/crc32.h"
#include "spool/reasons.h"
#include "spool/spool_format.h"
#include "spool/spool_test_util.h"

namespace expanse::spool {

using bytes::LoadLe;
using bytes::PutU32;
namespace {

using ::expanse::spool::testing::EncodeOrDie;
using ::expanse::spool::testing::MakeSpoolFile;
using ::testing::HasSubstr;

constexpr size_t kCountOffset = 24;
constexpr size_t kRawSizeOffset = 32;

// Rewrites the trailer so a deliberately altered file passes the whole-file checksum and
// reaches the checks behind it.
void FixChecksum(std::string& bytes) {
  bytes.resize(bytes.size() - kTrailerSize);
  const uint32_t crc =
      static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
  PutU32(bytes, crc);
}

void SetU32(std::string& bytes, size_t offset, uint32_t value) {
  std::string le;
  PutU32(le, value);
  bytes.replace(offset, 4, le);
}

std::string ReasonOfDecoding(std::string_view bytes) {
  Result<SpoolFile> file = DecodeSpoolFile(bytes);
  if (file.ok())
    return "ok";
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << file.status();
  return file.status().reason();
}

TEST(SpoolFileTest, RoundTripsWithAndWithoutZstd) {
  const SpoolFile file = MakeSpoolFile("node01", "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab", 7, 60);
  for (int level : {0, 1, 3}) {
    Result<SpoolFile> back = DecodeSpoolFile(EncodeOrDie(file, level));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, file);
  }
  EXPECT_LT(EncodeOrDie(file, 3).size(), EncodeOrDie(file, 0).size());
}

TEST(SpoolFileTest, RoundTripsEmptyPayloadsAndNoRecords) {
  SpoolFile file = MakeSpoolFile("n", "b", 1, 0);
  EXPECT_EQ(*DecodeSpoolFile(EncodeOrDie(file)), file);
  file.records.push_back({"worker_health", ""});
  file.records.push_back({"process_map", std::string("\0\xff\n", 3)});
  EXPECT_EQ(*DecodeSpoolFile(EncodeOrDie(file)), file);
}

TEST(SpoolFileTest, EncodeRefusesInvalidNamesAndOversizedRecords) {
  SpoolFile file = MakeSpoolFile("node01", "boot", 1);
  file.records[0].kind = "GPU series";
  Result<std::string> bytes = EncodeSpoolFile(file);
  EXPECT_EQ(bytes.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.status().reason(), "spool_invalid_file");

  file = MakeSpoolFile("../etc", "boot", 1);
  EXPECT_THAT(EncodeSpoolFile(file).status().message(), HasSubstr("host name"));
  file = MakeSpoolFile("node01", "boot/1", 1);
  EXPECT_THAT(EncodeSpoolFile(file).status().message(), HasSubstr("boot id"));
  file = MakeSpoolFile("node01", "boot", 1);
  file.records[0].payload.assign(kMaxRecordPayloadBytes + 1, 'x');
  EXPECT_THAT(EncodeSpoolFile(file).status().message(), HasSubstr("record limit"));
}

TEST(SpoolFileTest, RefusesGarbageAndEmptyInput) {
  EXPECT_EQ(ReasonOfDecoding("{\"not\": \"a spool file\"}"), reason::kBadMagic);
  EXPECT_EQ(ReasonOfDecoding(""), reason::kTruncated);
  EXPECT_EQ(ReasonOfDecoding("EX"), reason::kTruncated);
  EXPECT_EQ(ReasonOfDecoding("EXSQ"), reason::kBadMagic);
}

TEST(SpoolFileTest, EveryTruncationIsDetected) {
  const std::string bytes = EncodeOrDie(MakeSpoolFile("node01", "boot", 3, 5));
  for (size_t size = 0; size < bytes.size(); ++size)
    EXPECT_EQ(ReasonOfDecoding(bytes.substr(0, size)), reason::kTruncated) << size;
  EXPECT_EQ(ReasonOfDecoding(bytes + "x"), reason::kTrailingBytes);
}

TEST(SpoolFileTest, EveryBitFlipIsDetected) {
  for (int level : {0, 3}) {
    const std::string bytes = EncodeOrDie(MakeSpoolFile("node01", "boot", 3, 4), level);
    std::set<std::string> reasons;
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string flipped = bytes;
        flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
        const std::string why = ReasonOfDecoding(flipped);
        EXPECT_NE(why, "ok") << "byte " << i << " bit " << bit;
        reasons.insert(why);
      }
    }
    EXPECT_TRUE(reasons.contains(reason::kBadChecksum));
  }
}

TEST(SpoolFileTest, RefusesUnknownVersionAndFlags) {
  std::string bytes = EncodeOrDie(MakeSpoolFile("node01", "boot", 1));
  bytes[4] = 2;
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kBadVersion);
  bytes[4] = 1;
  bytes[5] = static_cast<char>(bytes[5] | 0x80);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kBadVersion);
}

TEST(SpoolFileTest, BoundsHostileLengthsEvenWithAValidChecksum) {
  const std::string good = EncodeOrDie(MakeSpoolFile("node01", "boot", 1, 2), 0);

  std::string bytes = good;
  SetU32(bytes, kRawSizeOffset, kMaxRawBodyBytes + 1);
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kTooLarge);

  bytes = good;
  SetU32(bytes, kCountOffset, 0xffffffff);
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kTooLarge);

  bytes = good;
  SetU32(bytes, kCountOffset, 100'000);  // more than the body can hold
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kMalformed);

  bytes = good;
  SetU32(bytes, kCountOffset, 1);  // one record fewer than the body holds
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kMalformed);

  // A payload length pointing past the body.
  bytes = good;
  const size_t first_record = kFixedHeaderSize + 6 + 4;  // "node01", "boot"
  const size_t kind_size = static_cast<uint8_t>(bytes[first_record]);
  SetU32(bytes, first_record + 1 + kind_size, 0x7fffffff);
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kMalformed);

  // A record whose own crc32 is wrong although the file's is right.
  bytes = good;
  bytes[first_record + 1 + kind_size + 4] ^= 1;  // first payload byte
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kBadChecksum);
}

TEST(SpoolFileTest, RefusesAZstdBodyThatLiesAboutItsSize) {
  std::string bytes = EncodeOrDie(MakeSpoolFile("node01", "boot", 1, 40), 3);
  ASSERT_NE(bytes[5] & kFlagZstdBody, 0);
  SetU32(bytes, kRawSizeOffset,
         static_cast<uint32_t>(LoadLe(bytes.data() + kRawSizeOffset, 4) - 1));
  FixChecksum(bytes);
  EXPECT_EQ(ReasonOfDecoding(bytes), reason::kMalformed);
}

}  // namespace
}  // namespace expanse::spool
