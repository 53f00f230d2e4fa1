#include "tsdb/chunk_codec.h"

#include <zlib.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace chunk_codec_test {
namespace {

using ::testing::HasSubstr;

void ExpectRoundTrip(const std::vector<Sample>& samples, int zstd_level = 3) {
  Result<std::string> encoded = EncodeChunk(samples, {.zstd_level = zstd_level});
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  Result<std::vector<Sample>> decoded = DecodeChunk(*encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ((*decoded)[i].t_ms, samples[i].t_ms) << i;
    EXPECT_EQ(std::bit_cast<uint64_t>((*decoded)[i].v), std::bit_cast<uint64_t>(samples[i].v))
        << i << ": " << samples[i].v;
  }
}

std::vector<Sample> Series(std::vector<double> values, int64_t start = 1'700'000'000'000) {
  std::vector<Sample> out;
  for (size_t i = 0; i < values.size(); ++i) {
    out.push_back({start + static_cast<int64_t>(i) * 1000, values[i]});
  }
  return out;
}

TEST(ChunkCodecTest, RoundTripsDecimalTelemetry) {
  ExpectRoundTrip(Series({694.77, 81.72, 81.68, 700.0, 0.1, 0.2, 0.3}));
  ExpectRoundTrip(Series({0, 0, 0, 100, 100, 31859, 143771}), 0);
}

TEST(ChunkCodecTest, RoundTripsSpecialValuesBitExact) {
  const double inf = std::numeric_limits<double>::infinity();
  ExpectRoundTrip(Series({0.0, -0.0, inf, -inf, 1e308, 5e-324, -2.2250738585072014e-308}));
  ExpectRoundTrip(Series({-0.0}));
  ExpectRoundTrip(Series({1e300, 1.0, 1e-300}), 0);
  ExpectRoundTrip(Series({9007199254740993.0, 0.1234567890123456789}));
}

TEST(ChunkCodecTest, RoundTripsIrregularAndExtremeTimestamps) {
  ExpectRoundTrip({{std::numeric_limits<int64_t>::min(), 1},
                   {0, 2},
                   {0, 3},
                   {std::numeric_limits<int64_t>::max(), 4}});
  ExpectRoundTrip({{-5, 1}, {7, 2}, {1000, 3}, {1001, 4}, {99999, 5}});
}

TEST(ChunkCodecTest, RoundTripsRandomDoubles) {
  std::mt19937_64 rng(42);
  std::vector<Sample> samples;
  int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += static_cast<int64_t>(rng() % 3000);
    samples.push_back({t, std::bit_cast<double>(rng() & ~(uint64_t{0x7ff} << 52))});
  }
  ExpectRoundTrip(samples);
}

TEST(ChunkCodecTest, PicksDecimalEncodingAndCompressesConstantRuns) {
  std::vector<Sample> samples = Series(std::vector<double>(7200, 1980.0));
  Result<std::string> encoded = EncodeChunk(samples);
  ASSERT_TRUE(encoded.ok());
  Result<ChunkHeader> header = ReadChunkHeader(*encoded);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->value_encoding, ValueEncoding::kDecimalDelta);
  EXPECT_EQ(header->compression, Compression::kZstd);
  EXPECT_LT(encoded->size(), 100u);
}

TEST(ChunkCodecTest, CountersUseDeltaOfDelta) {
  // Energy in mJ growing by a power that wanders by single milliwatts: no common step.
  std::vector<double> energy = {1.0e9};
  for (int i = 1; i < 1000; ++i)
    energy.push_back(energy.back() + 694771.0 + i % 7);
  Result<std::string> encoded = EncodeChunk(Series(energy), {.zstd_level = 0});
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ(ReadChunkHeader(*encoded)->value_encoding, ValueEncoding::kDecimalDeltaOfDelta);
  ExpectRoundTrip(Series(energy));
}

TEST(ChunkCodecTest, DividesOutACommonStep) {
  // A counter in steps of 10 mJ (power read in centiwatts), clocks in 15 MHz steps.
  std::mt19937 rng(7);
  std::vector<double> energy = {4.2e9};
  for (int i = 1; i < 1000; ++i)
    energy.push_back(energy.back() + 10.0 * (69477 + static_cast<int>(rng() % 800)));
  std::vector<double> clocks;
  for (int i = 0; i < 1000; ++i)
    clocks.push_back(i % 97 < 60 ? 1980.0 : 1455.0 + 15 * (i % 5));
  Result<std::string> counter = EncodeChunk(Series(energy), {.zstd_level = 0});
  Result<std::string> clock = EncodeChunk(Series(clocks), {.zstd_level = 0});
  ASSERT_TRUE(counter.ok() && clock.ok());
  EXPECT_EQ(ReadChunkHeader(*counter)->value_encoding, ValueEncoding::kDecimalDeltaOfDeltaScaled);
  EXPECT_EQ(ReadChunkHeader(*clock)->value_encoding, ValueEncoding::kDecimalDeltaScaled);
  ExpectRoundTrip(Series(energy));
  ExpectRoundTrip(Series(energy), 0);
  ExpectRoundTrip(Series(clocks), 0);
  // Negative steps and mantissas with a decimal scale.
  ExpectRoundTrip(Series({0.5, -1.0, 2.0, -3.5, 9.007199254740992e15 / 4}), 0);
  ExpectRoundTrip(Series({-9007199254740992.0, 9007199254740992.0, -9007199254740992.0}), 0);
  // Dividing the step out is what makes the counter smaller than plain delta-of-delta once
  // compressed (zstd sees ~3.3 fewer bits of entropy per sample).
  std::vector<double> unscaled = energy;
  unscaled.back() += 1;  // breaks the common step of the last delta only
  Result<std::string> plain = EncodeChunk(Series(unscaled));
  Result<std::string> scaled = EncodeChunk(Series(energy));
  ASSERT_TRUE(plain.ok() && scaled.ok());
  EXPECT_EQ(ReadChunkHeader(*plain)->value_encoding, ValueEncoding::kDecimalDeltaOfDelta);
  EXPECT_LT(scaled->size() * 10, plain->size() * 9);
}

// Rewrites byte `at` and fixes the checksum, so only the meaning of the byte is tested.
std::string Patched(std::string chunk, size_t at, char value) {
  chunk[at] = value;
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()), kChunkCrcOffset);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()) + kChunkHeaderSize,
              static_cast<uInt>(chunk.size() - kChunkHeaderSize));
  for (int i = 0; i < 4; ++i)
    chunk[kChunkCrcOffset + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  return chunk;
}

TEST(ChunkCodecTest, RefusesABadDivisor) {
  // Steps of 3 (divisor 3), no zstd: the divisor varint follows the timestamps and the first
  // mantissa. Rewrite it to 0 and to 1 and fix the checksum: refused as corrupt, not decoded.
  Result<std::string> encoded = EncodeChunk(Series({3, 6, 0, 9}), {.zstd_level = 0});
  ASSERT_TRUE(encoded.ok());
  ASSERT_EQ(ReadChunkHeader(*encoded)->value_encoding, ValueEncoding::kDecimalDeltaScaled);
  // The body ends with the divisor and the three divided deltas, one byte each.
  const size_t divisor_at = encoded->size() - 3 - 1;
  ASSERT_EQ((*encoded)[divisor_at], 3);
  for (char bad : {0, 1}) {
    Result<std::vector<Sample>> decoded = DecodeChunk(Patched(*encoded, divisor_at, bad));
    EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss) << int(bad);
    EXPECT_THAT(decoded.status().message(), HasSubstr("bad delta divisor")) << int(bad);
  }
}

// A power reading: a level that changes between phases, a few watts of noise in hundredths.
std::vector<Sample> NoisyPower() {
  std::mt19937_64 rng(5);
  std::vector<double> values;
  for (int phase = 0; phase < 4; ++phase) {
    const double level = phase % 2 ? 650.0 : 81.72;
    const double noise = phase % 2 ? 4.0 : 0.3;
    for (int i = 0; i < 1800; ++i) {
      const double v = level + std::uniform_real_distribution<>(-noise, noise)(rng);
      values.push_back(std::round(v * 100) / 100);
    }
  }
  return Series(values);
}

TEST(ChunkCodecTest, NoisyReadingsGoInBytePlanesWhenThatIsSmaller) {
  const std::vector<Sample> power = NoisyPower();
  Result<std::string> planes = EncodeChunk(power);
  Result<std::string> varints = EncodeChunk(power, {.byte_planes = false});
  ASSERT_TRUE(planes.ok() && varints.ok());
  // Three planes: the jumps between phases (568.28 W) need a third byte; the noise, two.
  EXPECT_EQ(ReadChunkHeader(*planes)->value_width, 3);
  EXPECT_EQ(ReadChunkHeader(*varints)->value_width, 0);
  EXPECT_LT(planes->size() * 100, varints->size() * 97)
      << planes->size() << " vs " << varints->size();
  ExpectRoundTrip(power);
  // Uncompressed, fixed-width planes are larger than varints of these deltas: not chosen.
  Result<std::string> raw = EncodeChunk(power, {.zstd_level = 0});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(ReadChunkHeader(*raw)->value_width, 0);
}

// Deltas of mantissas near +-2^53 need 7 bytes as planes and 8 as varints: planes win even
// uncompressed, and every width's bytes come back exactly.
std::vector<Sample> WideDeltas() {
  std::mt19937_64 rng(9);
  std::vector<double> values;
  for (int i = 0; i < 40; ++i) {
    const auto m = static_cast<int64_t>(rng() % (uint64_t{1} << 53));
    values.push_back(static_cast<double>(i % 2 ? m : -m));
  }
  return Series(values);
}

TEST(ChunkCodecTest, BytePlanesOfEveryWidthRoundTrip) {
  Result<std::string> wide = EncodeChunk(WideDeltas(), {.zstd_level = 0});
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(ReadChunkHeader(*wide)->value_width, 7);
  ExpectRoundTrip(WideDeltas(), 0);
  ExpectRoundTrip(WideDeltas(), 3);
  // Noise of growing amplitude: deltas of 2 to 6 bytes, each of which zstd cannot shrink
  // much, so the planes are kept; the width is the one the deltas need.
  int width = 2;
  for (const double amplitude : {300.0, 70000.0, 2e7, 5e9, 1e12}) {
    std::mt19937_64 rng(static_cast<uint64_t>(amplitude));
    std::vector<double> values;
    for (int i = 0; i < 3000; ++i)
      values.push_back(std::round(std::uniform_real_distribution<>(0, amplitude)(rng)));
    Result<std::string> encoded = EncodeChunk(Series(values));
    ASSERT_TRUE(encoded.ok());
    EXPECT_EQ(ReadChunkHeader(*encoded)->value_width, width++) << amplitude;
    ExpectRoundTrip(Series(values));
  }
  // Width 8 needs a delta-of-delta of 2^55 in a chunk where delta-of-delta is the smaller
  // encoding, i.e. one of mostly tiny values, which varints always store smaller: the
  // encoder never picks it, the decoder's loop is the same for every width.
}

TEST(ChunkCodecTest, RefusesBadOrTruncatedBytePlanes) {
  Result<std::string> wide = EncodeChunk(WideDeltas(), {.zstd_level = 0});
  ASSERT_TRUE(wide.ok());
  constexpr size_t kWidthByte = 9;
  ASSERT_EQ((*wide)[kWidthByte], 7);
  EXPECT_THAT(DecodeChunk(Patched(*wide, kWidthByte, 9)).status().message(),
              HasSubstr("bad value width 9"));
  // Wider planes than stored: the body runs out.
  EXPECT_EQ(DecodeChunk(Patched(*wide, kWidthByte, 8)).status().code(), StatusCode::kDataLoss);
  // Narrower: bytes are left over.
  EXPECT_EQ(DecodeChunk(Patched(*wide, kWidthByte, 6)).status().code(), StatusCode::kDataLoss);
  // Planes read as varints: they do not parse as the same number of values.
  EXPECT_EQ(DecodeChunk(Patched(*wide, kWidthByte, 0)).status().code(), StatusCode::kDataLoss);
  Result<std::string> doubles = EncodeChunk(Series({0.1 + 0.2, -0.0}), {.zstd_level = 0});
  ASSERT_TRUE(doubles.ok());
  ASSERT_EQ(ReadChunkHeader(*doubles)->value_encoding, ValueEncoding::kXorVarint);
  EXPECT_THAT(DecodeChunk(Patched(*doubles, kWidthByte, 2)).status().message(),
              HasSubstr("bad value width 2"));
  for (size_t cut = 0; cut < wide->size(); ++cut)
    EXPECT_EQ(DecodeChunk(wide->substr(0, cut)).status().code(), StatusCode::kDataLoss) << cut;
}

TEST(ChunkCodecTest, RejectsBadInputToEncode) {
  EXPECT_EQ(EncodeChunk({}).status().code(), StatusCode::kInvalidArgument);
  const std::vector<Sample> backwards = {{2, 1}, {1, 1}};
  EXPECT_THAT(EncodeChunk(backwards).status().message(), HasSubstr("backwards at sample 1"));
}

TEST(ChunkCodecTest, RefusesCorruptionWithDataLoss) {
  Result<std::string> encoded = EncodeChunk(Series({1, 2, 3, 4.5, 6}));
  ASSERT_TRUE(encoded.ok());
  for (size_t cut = 0; cut < encoded->size(); ++cut) {
    Result<std::vector<Sample>> decoded = DecodeChunk(encoded->substr(0, cut));
    EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss) << cut;
    EXPECT_EQ(decoded.status().reason(), "chunk_corrupt");
  }
  for (size_t i = 0; i < encoded->size(); ++i) {
    std::string flipped = *encoded;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x10);
    EXPECT_EQ(DecodeChunk(flipped).status().code(), StatusCode::kDataLoss) << i;
  }
  EXPECT_THAT(DecodeChunk("EXTX" + encoded->substr(4)).status().message(), HasSubstr("bad magic"));
  std::string bad_crc = *encoded;
  bad_crc[kChunkCrcOffset] = static_cast<char>(bad_crc[kChunkCrcOffset] ^ 1);
  EXPECT_EQ(DecodeChunk(bad_crc).status().message(), "tsdb chunk: checksum mismatch");
}

}  // namespace
}  // namespace chunk_codec_test
}  // namespace expanse::tsdb
