#include "http/body_decoder.h"

#include <zlib.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace expanse::http_internal {
namespace {

// zlib's windowBits for deflateInit2: the three formats a client may send.
constexpr int kGzip = 15 + 16;
constexpr int kZlib = 15;
constexpr int kRawDeflate = -15;

std::string Compress(const std::string& plain, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    unsigned char buffer[16384];
    z.next_out = buffer;
    z.avail_out = sizeof(buffer);
    rc = deflate(&z, Z_FINISH);
    out.append(reinterpret_cast<const char*>(buffer), sizeof(buffer) - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  deflateEnd(&z);
  return out;
}

// Text that compresses, but not to nothing: several inflate steps' worth of output.
std::string SampleText(size_t bytes) {
  std::string text;
  for (size_t i = 0; text.size() < bytes; ++i) {
    text += "line " + std::to_string(i * 7919 % 10007) + " of the sample body\n";
  }
  text.resize(bytes);
  return text;
}

// Feeds `body` in pieces of `piece` bytes, then finishes; the decoded body, or "" on error.
std::string Decode(BodyDecoder& decoder, const std::string& body, size_t piece) {
  for (size_t i = 0; i < body.size(); i += piece) {
    if (!decoder.Append(std::string_view(body).substr(i, piece))) {
      return "";
    }
  }
  return decoder.Finish() ? decoder.Take() : "";
}

void ExpectError(const BodyDecoder& decoder, int status, const std::string& code,
                 const std::string& message) {
  ASSERT_TRUE(decoder.error().has_value());
  EXPECT_EQ(decoder.error()->status, status);
  const nlohmann::json body = nlohmann::json::parse(decoder.error()->body);
  EXPECT_EQ(body["error"]["code"], code);
  EXPECT_EQ(body["error"]["message"], message);
}

TEST(BodyDecoderTest, IdentityWithinTheLimit) {
  for (const char* encoding : {"", "identity", " Identity\t"}) {
    SCOPED_TRACE(encoding);
    BodyDecoder decoder = BodyDecoder::For(encoding, 10);
    EXPECT_TRUE(decoder.Append("hello"));
    EXPECT_TRUE(decoder.Append(""));
    EXPECT_TRUE(decoder.Append("world"));  // exactly the limit
    EXPECT_TRUE(decoder.Finish());
    EXPECT_FALSE(decoder.error().has_value());
    EXPECT_EQ(decoder.decoded_bytes(), 10u);
    EXPECT_EQ(decoder.Take(), "helloworld");
  }
}

TEST(BodyDecoderTest, IdentityOverTheLimit) {
  BodyDecoder decoder = BodyDecoder::For("", 10);
  EXPECT_TRUE(decoder.Append("hello"));
  EXPECT_FALSE(decoder.Append("world!"));
  ExpectError(decoder, 413, "body_too_large", "the request body is larger than 10 bytes");
  EXPECT_LE(decoder.decoded_bytes(), 10u);
  EXPECT_FALSE(decoder.Append("x"));  // the error sticks
  EXPECT_FALSE(decoder.Finish());
}

TEST(BodyDecoderTest, GzipRoundTrip) {
  const std::string plain = SampleText(200'000);
  const std::string gzip = Compress(plain, kGzip);
  ASSERT_LT(gzip.size(), plain.size());
  for (const char* encoding : {"gzip", "x-gzip", "GZIP", " gzip "}) {
    SCOPED_TRACE(encoding);
    BodyDecoder decoder = BodyDecoder::For(encoding, plain.size());  // exactly fits
    EXPECT_EQ(Decode(decoder, gzip, gzip.size()), plain);
    EXPECT_FALSE(decoder.error().has_value());
  }
}

TEST(BodyDecoderTest, GzipOneByteAtATime) {
  const std::string plain = SampleText(50'000);
  BodyDecoder decoder = BodyDecoder::For("gzip", 1 << 20);
  EXPECT_EQ(Decode(decoder, Compress(plain, kGzip), 1), plain);
  EXPECT_FALSE(decoder.error().has_value());
}

TEST(BodyDecoderTest, GzipOverTheLimit) {
  const std::string plain = SampleText(10'000);
  BodyDecoder decoder = BodyDecoder::For("gzip", plain.size() - 1);
  EXPECT_EQ(Decode(decoder, Compress(plain, kGzip), 1000), "");
  ExpectError(decoder, 413, "body_too_large", "the request body is larger than 9999 bytes");
  EXPECT_LE(decoder.decoded_bytes(), plain.size() - 1);
}

TEST(BodyDecoderTest, GzipBombStopsAtTheLimit) {
  constexpr size_t kLimit = 1 << 20;
  const std::string bomb = Compress(std::string(10'000'000, '\0'), kGzip);
  ASSERT_LT(bomb.size(), 20'000u);
  for (const size_t piece : {bomb.size(), size_t{1}}) {
    SCOPED_TRACE(piece);
    BodyDecoder decoder = BodyDecoder::For("gzip", kLimit);
    EXPECT_EQ(Decode(decoder, bomb, piece), "");
    ExpectError(decoder, 413, "body_too_large", "the request body is larger than 1048576 bytes");
    EXPECT_LE(decoder.decoded_bytes(), kLimit);
  }
}

TEST(BodyDecoderTest, TruncatedGzipFailsOnFinish) {
  const std::string gzip = Compress(SampleText(10'000), kGzip);
  for (const size_t cut : {size_t{1}, size_t{5}, gzip.size() / 2, gzip.size() - 1}) {
    SCOPED_TRACE(cut);
    BodyDecoder decoder = BodyDecoder::For("gzip", 1 << 20);
    EXPECT_TRUE(decoder.Append(gzip.substr(0, cut)));
    EXPECT_FALSE(decoder.Finish());
    ExpectError(decoder, 400, "bad_request",
                "the gzip request body is truncated: it ends before its compressed data does");
  }
}

TEST(BodyDecoderTest, CorruptGzip) {
  struct Case {
    std::string name;
    std::string body;
    std::string message;
  };
  std::string bad_checksum = Compress(SampleText(1000), kGzip);
  bad_checksum[bad_checksum.size() - 6] ^= 0x01;  // the CRC-32 in the trailer
  std::string bad_block = Compress(SampleText(1000), kGzip);
  bad_block[10] = '\xff';  // the first deflate block header: block type 3 is reserved
  const std::vector<Case> cases = {
      {"not gzip", "hello, world",
       "the request body is not valid gzip data: incorrect header check"},
      {"bad checksum", bad_checksum,
       "the request body is not valid gzip data: incorrect data check"},
      {"bad block", bad_block, "the request body is not valid gzip data: invalid block type"},
      {"garbage after the member", Compress("abc", kGzip) + "garbage",
       "the request body is not valid gzip data: incorrect header check"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BodyDecoder decoder = BodyDecoder::For("gzip", 1 << 20);
    EXPECT_EQ(Decode(decoder, c.body, c.body.size()), "");
    ExpectError(decoder, 400, "bad_request", c.message);
  }
}

TEST(BodyDecoderTest, ConcatenatedGzipMembersDecodeInTurn) {
  const std::string body = Compress("first ", kGzip) + Compress("second", kGzip);
  for (const size_t piece : {body.size(), size_t{1}}) {
    SCOPED_TRACE(piece);
    BodyDecoder decoder = BodyDecoder::For("gzip", 100);
    EXPECT_EQ(Decode(decoder, body, piece), "first second");
  }
}

TEST(BodyDecoderTest, DeflateZlibWrappedAndRaw) {
  const std::string plain = SampleText(100'000);
  struct Case {
    std::string name;
    int window_bits;
    size_t piece;
  };
  const std::vector<Case> cases = {
      {"zlib", kZlib, 100'000},
      {"zlib, byte by byte", kZlib, 1},
      {"raw", kRawDeflate, 100'000},
      {"raw, byte by byte", kRawDeflate, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BodyDecoder decoder = BodyDecoder::For("Deflate", plain.size());
    EXPECT_EQ(Decode(decoder, Compress(plain, c.window_bits), c.piece), plain);
    EXPECT_FALSE(decoder.error().has_value());
  }
}

TEST(BodyDecoderTest, DeflateErrors) {
  {
    BodyDecoder decoder = BodyDecoder::For("deflate", 1 << 20);
    EXPECT_FALSE(decoder.Append(Compress("abc", kZlib) + "x"));
    ExpectError(decoder, 400, "bad_request",
                "the request body is not valid deflate data: data follows the end of the "
                "compressed stream");
  }
  {
    BodyDecoder decoder = BodyDecoder::For("deflate", 1 << 20);
    const std::string zlib = Compress(SampleText(1000), kZlib);
    EXPECT_TRUE(decoder.Append(zlib.substr(0, 1)));  // held: one byte cannot tell the format
    EXPECT_FALSE(decoder.Finish());
    ExpectError(decoder, 400, "bad_request",
                "the deflate request body is truncated: it ends before its compressed data does");
  }
  {
    const std::string bomb = Compress(std::string(5'000'000, 'a'), kRawDeflate);
    BodyDecoder decoder = BodyDecoder::For("deflate", 1000);
    EXPECT_FALSE(decoder.Append(bomb));
    ExpectError(decoder, 413, "body_too_large", "the request body is larger than 1000 bytes");
    EXPECT_LE(decoder.decoded_bytes(), 1000u);
  }
}

TEST(BodyDecoderTest, EmptyCompressedBodyIsEmpty) {
  for (const char* encoding : {"gzip", "deflate"}) {
    SCOPED_TRACE(encoding);
    BodyDecoder decoder = BodyDecoder::For(encoding, 10);
    EXPECT_TRUE(decoder.Append(""));
    EXPECT_TRUE(decoder.Finish());
    EXPECT_EQ(decoder.Take(), "");
  }
}

TEST(BodyDecoderTest, RefusesOtherEncodings) {
  struct Case {
    std::string encoding;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"br", R"(Content-Encoding "br" is not supported; send gzip, deflate or no encoding)"},
      {"compress",
       R"(Content-Encoding "compress" is not supported; send gzip, deflate or no encoding)"},
      {"gzip, gzip",
       R"(Content-Encoding "gzip, gzip" is not supported; send gzip, deflate or no encoding)"},
      {" zstd ", R"(Content-Encoding "zstd" is not supported; send gzip, deflate or no encoding)"},
      {"gzip\r\n",
       R"(Content-Encoding "gzip\x0d\x0a" is not supported; send gzip, deflate or no encoding)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.encoding);
    BodyDecoder decoder = BodyDecoder::For(c.encoding, 1 << 20);
    ExpectError(decoder, 415, "unsupported_media_type", c.message);
    EXPECT_FALSE(decoder.Append("data"));
    EXPECT_FALSE(decoder.Finish());
    EXPECT_EQ(decoder.decoded_bytes(), 0u);
  }
}

TEST(BodyDecoderTest, MovesKeepTheStream) {
  const std::string gzip = Compress(SampleText(5000), kGzip);
  BodyDecoder first = BodyDecoder::For("gzip", 1 << 20);
  EXPECT_TRUE(first.Append(gzip.substr(0, 100)));
  BodyDecoder second = std::move(first);
  EXPECT_TRUE(second.Append(gzip.substr(100)));
  EXPECT_TRUE(second.Finish());
  EXPECT_EQ(second.Take(), SampleText(5000));
}

}  // namespace
}  // namespace expanse::http_internal
