#include "tsdb/wal_record.h"

#include <zstd.h>

#include <bit>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace wal_record_test {
namespace {

using ::testing::HasSubstr;

// One node's 10 s of telemetry: 8 GPUs x 20 metrics, one sample a second.
Batch TelemetryBatch() {
  Batch batch;
  for (int gpu = 0; gpu < 8; ++gpu) {
    for (int metric = 0; metric < 20; ++metric) {
      std::vector<Sample> samples;
      for (int i = 0; i < 10; ++i)
        samples.push_back({1'700'000'000'000 + i * 1000, 600.0 + (i * 37 + metric) % 11 / 4.0});
      batch.Add(SeriesKey{"cmp_0fodNRgJwGRl", "node01",
                          "GPU-aaaaaaaa-0000-0000-0000-00000000000" + std::to_string(gpu),
                          "gpu.metric_" + std::to_string(metric)},
                samples);
    }
  }
  return batch;
}

void ExpectSame(const WalBatch& got, std::string_view id, int64_t received_ms, const Batch& want) {
  EXPECT_EQ(got.batch_id, id);
  EXPECT_EQ(got.received_ms, received_ms);
  ASSERT_EQ(got.series.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.series[i].key, want[i].key);
    ASSERT_EQ(got.series[i].samples.size(), want[i].samples.size());
    for (size_t j = 0; j < want[i].samples.size(); ++j) {
      EXPECT_EQ(got.series[i].samples[j].t_ms, want[i].samples[j].t_ms);
      EXPECT_EQ(std::bit_cast<uint64_t>(got.series[i].samples[j].v),
                std::bit_cast<uint64_t>(want[i].samples[j].v));
    }
  }
}

// A compressed record around `plain`, made with zstd directly rather than EncodeWalBatch.
std::string Compressed(std::string_view plain) {
  std::string frame(ZSTD_compressBound(plain.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), plain.data(), plain.size(), 1));
  return std::string(1, static_cast<char>(kWalRecordBatchZstd)) + frame;
}

TEST(WalRecordTest, TelemetryIsCompressedAndRoundTrips) {
  const Batch batch = TelemetryBatch();
  const std::string record = EncodeWalBatch("cmp_x/telemetry/42", 1234, batch);
  const std::string plain = EncodeWalBatchUncompressed("cmp_x/telemetry/42", 1234, batch);
  EXPECT_EQ(static_cast<uint8_t>(record[0]), kWalRecordBatchZstd);
  EXPECT_EQ(static_cast<uint8_t>(plain[0]), kWalRecordBatch);
  EXPECT_LT(record.size() * 4, plain.size()) << record.size() << " vs " << plain.size();
  Result<WalBatch> decoded = DecodeWalBatch(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(*decoded, "cmp_x/telemetry/42", 1234, batch);
  // Records written by earlier builds (plain) still replay.
  decoded = DecodeWalBatch(plain);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(*decoded, "cmp_x/telemetry/42", 1234, batch);
}

TEST(WalRecordTest, AnEmptyBatchStaysPlainWhenCompressingDoesNotHelp) {
  const std::string record = EncodeWalBatch("b", 1, {});
  EXPECT_EQ(static_cast<uint8_t>(record[0]), kWalRecordBatch);
  Result<WalBatch> decoded = DecodeWalBatch(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->batch_id, "b");
}

TEST(WalRecordTest, MalformedCompressedRecordsAreWalCorrupt) {
  const std::string plain = EncodeWalBatchUncompressed("id", 7, TelemetryBatch());
  const std::string good = Compressed(plain);
  ASSERT_TRUE(DecodeWalBatch(good).ok());
  const auto expect_corrupt = [](const std::string& record, const std::string& what) {
    Result<WalBatch> decoded = DecodeWalBatch(record);
    EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss) << what;
    EXPECT_EQ(decoded.status().reason(), "wal_corrupt") << what;
    return decoded.status().message();
  };
  for (size_t cut = 1; cut < good.size(); cut += 97)
    expect_corrupt(good.substr(0, cut), "cut at " + std::to_string(cut));
  EXPECT_THAT(expect_corrupt(std::string(1, '\x02') + "not zstd", "garbage"),
              HasSubstr("bad zstd frame size"));
  // A frame that holds another compressed record: records do not nest.
  EXPECT_THAT(expect_corrupt(Compressed(good), "nested"), HasSubstr("unknown record type"));
  // A frame holding a plain record with trailing junk.
  EXPECT_THAT(expect_corrupt(Compressed(plain + "x"), "trailing"), HasSubstr("trailing bytes"));
  // A frame that does not record its size (streaming) is refused before allocating.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  std::string unsized(ZSTD_compressBound(plain.size()), '\0');
  unsized.resize(ZSTD_compress2(cctx, unsized.data(), unsized.size(), plain.data(), plain.size()));
  ZSTD_freeCCtx(cctx);
  EXPECT_THAT(expect_corrupt(std::string(1, '\x02') + unsized, "unsized"),
              HasSubstr("bad zstd frame size"));
}

}  // namespace
}  // namespace wal_record_test
}  // namespace expanse::tsdb
