#include "outbox/outbox_format.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::outbox {
namespace outbox_format_test {
namespace {

Record Sample() {
  return {.sequence = 1'800'000'000'000'042,
          .enqueued_ms = 1'800'000'000'000,
          .stream = "telemetry",
          .content_type = "application/zstd",
          .note = "",
          .payload = std::string("\0\x28\xb5\x2f payload", 12)};
}

TEST(OutboxFormatTest, FrameRoundTrip) {
  const std::string frame = EncodeFrame(Sample());
  size_t size = 0;
  ASSERT_EQ(CheckFrame(frame, &size), FrameCheck::kOk);
  EXPECT_EQ(size, frame.size());
  Result<Record> record = DecodeFrame(frame);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->sequence, Sample().sequence);
  EXPECT_EQ(record->enqueued_ms, Sample().enqueued_ms);
  EXPECT_EQ(record->stream, "telemetry");
  EXPECT_EQ(record->content_type, "application/zstd");
  EXPECT_EQ(record->note, "");
  EXPECT_EQ(record->payload, Sample().payload);

  Record noted = Sample();
  noted.note = "HTTP 400 invalid_batch: batch.series[0].v[0] must be a finite number";
  noted.payload.clear();
  Result<Record> decoded = DecodeFrame(EncodeFrame(noted));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->note, noted.note);
  EXPECT_EQ(decoded->payload, "");
}

TEST(OutboxFormatTest, EveryTruncationIsTornAndEveryFlipIsCaught) {
  const std::string frame = EncodeFrame(Sample());
  size_t size = 0;
  for (size_t cut = 0; cut < frame.size(); ++cut)
    EXPECT_EQ(CheckFrame(std::string_view(frame).substr(0, cut), &size), FrameCheck::kTruncated)
        << cut;
  for (size_t i = 4; i < frame.size(); ++i) {
    std::string damaged = frame;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    EXPECT_EQ(CheckFrame(damaged, &size), FrameCheck::kCorrupt) << i;
  }
}

TEST(OutboxFormatTest, ImpossibleLengthsAreCorrupt) {
  size_t size = 0;
  std::string tiny(kFrameHeaderSize + 64, '\0');  // body length 0
  EXPECT_EQ(CheckFrame(tiny, &size), FrameCheck::kCorrupt);
  std::string huge(kFrameHeaderSize, '\xff');  // body length 4 GiB - 1
  EXPECT_EQ(CheckFrame(huge, &size), FrameCheck::kCorrupt);
}

TEST(OutboxFormatTest, ChecksumValidButMalformedBodyIsDataLoss) {
  Record record = Sample();
  record.stream = std::string(200, 's');
  std::string frame = EncodeFrame(record);
  // Claim a longer stream than the body holds; CheckFrame would fail on the CRC, so this
  // goes straight to the decoder, as a buggy writer's valid-CRC record would.
  frame[kFrameHeaderSize + 17] = static_cast<char>(255);
  frame.resize(kFrameHeaderSize + 17 + 1 + 100);
  Result<Record> decoded = DecodeFrame(frame);
  EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(decoded.status().reason(), "outbox_corrupt");
}

TEST(OutboxFormatTest, CursorRoundTripAndDamage) {
  const std::string bytes = EncodeCursor({.acked_through = 7, .next_sequence = 99});
  ASSERT_EQ(bytes.size(), kCursorSize);
  std::optional<Cursor> cursor = DecodeCursor(bytes);
  ASSERT_TRUE(cursor.has_value());
  EXPECT_EQ(cursor->acked_through, 7u);
  EXPECT_EQ(cursor->next_sequence, 99u);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
    EXPECT_FALSE(DecodeCursor(damaged).has_value()) << i;
  }
  EXPECT_FALSE(DecodeCursor(bytes.substr(0, 20)).has_value());
}

TEST(OutboxFormatTest, SegmentNamesSortLikeSequences) {
  EXPECT_EQ(SegmentFileName(42), "seg-00000000000000000042.log");
  EXPECT_EQ(ParseSegmentFileName("seg-00000000000000000042.log"), 42u);
  EXPECT_EQ(ParseSegmentFileName(SegmentFileName(UINT64_MAX)), UINT64_MAX);
  EXPECT_LT(SegmentFileName(9), SegmentFileName(10));
  for (const char* bad : {"seg-42.log", "seg-0000000000000000004x.log", "ack", "lock",
                          "seg-00000000000000000042.log.tmp", "seg-99999999999999999999.log"})
    EXPECT_FALSE(ParseSegmentFileName(bad).has_value()) << bad;
}

}  // namespace
}  // namespace outbox_format_test
}  // namespace expanse::outbox
