#include "wire/ingest_envelope.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

TEST(IngestEnvelopeTest, FramesRoundTripWhateverBytesTheyHold) {
  const std::string binary("\0\n\xff zstd\n7 x", 12);
  std::string envelope;
  AppendEnvelopeFrame(envelope, "application/zstd", binary);
  AppendEnvelopeFrame(envelope, "application/json", R"({"version":1})");
  Result<std::vector<EnvelopeFrame>> frames = ParseIngestEnvelope(envelope);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 2u);
  EXPECT_EQ((*frames)[0].content_type, "application/zstd");
  EXPECT_EQ((*frames)[0].body, binary);
  EXPECT_EQ((*frames)[1].content_type, "application/json");
  EXPECT_EQ((*frames)[1].body, R"({"version":1})");
}

TEST(IngestEnvelopeTest, RefusesEachMalformedShapeNamingTheFrame) {
  struct Case {
    std::string body;
    std::string says;
  };
  std::string full;
  for (size_t i = 0; i <= kMaxEnvelopeBatches; ++i)
    AppendEnvelopeFrame(full, "application/json", "{}");
  const std::vector<Case> cases = {
      {"", "frame 0: the envelope holds no batch"},
      {"application/json 2", "frame 0: no header line"},
      {"application/json2\n{}", "no space before the length"},
      {" 2\n{}", "content type must be 1 to 64 bytes"},
      {"Application/JSON 2\n{}", "may hold only"},
      {"application/json 02\n{}", "decimal number"},
      {"application/json -2\n{}", "decimal number"},
      {"application/json 2x\n{}", "decimal number"},
      {"application/json 99999999999\n{}", "decimal number"},
      {"application/json 0\n", "its length is 0"},
      {"application/json 3\n{}", "past the end (2 bytes left)"},
      {"application/json 2\n{}garbage", "frame 1: no header line"},
      {full, "frame 64: an envelope holds at most 64 batches"},
  };
  for (const Case& c : cases) {
    Result<std::vector<EnvelopeFrame>> frames = ParseIngestEnvelope(c.body);
    ASSERT_FALSE(frames.ok()) << c.body.substr(0, 60);
    EXPECT_EQ(frames.status().reason(), "invalid_envelope");
    EXPECT_NE(frames.status().message().find(c.says), std::string::npos)
        << frames.status().message();
  }
}

TEST(IngestEnvelopeTest, AnswersRoundTripWithTheirStatusAndRetryAfter) {
  const std::vector<EnvelopeAnswer> answers = {
      {.status = 200, .body = R"({"batch_id":"c/s/1","durable":true})"},
      {.status = 503,
       .retry_after = "5",
       .body = R"({"error":{"code":"store_busy","message":"later"}})"},
  };
  Result<std::vector<EnvelopeAnswer>> decoded =
      DecodeEnvelopeAnswers(EncodeEnvelopeAnswers(answers), 2);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)[0].status, 200);
  EXPECT_FALSE((*decoded)[0].retry_after.has_value());
  EXPECT_EQ((*decoded)[0].body, R"({"batch_id":"c/s/1","durable":true})");
  EXPECT_EQ((*decoded)[1].status, 503);
  EXPECT_EQ((*decoded)[1].retry_after, "5");
  EXPECT_EQ((*decoded)[1].body, R"({"error":{"code":"store_busy","message":"later"}})");
}

TEST(IngestEnvelopeTest, AnAnswerOfAnotherShapeIsRefusedNotGuessed) {
  for (const std::string& body : std::vector<std::string>{
           "", "<html>502</html>", "[]", R"({"answers":{}})", R"({"answers":[{"status":200}]})",
           R"({"answers":[{"status":200},{"status":99}]})",
           R"({"answers":[{"status":200},{"status":"200"}]})",
           R"({"answers":[{"status":200},{"status":200,"retry_after":5}]})",
           R"({"answers":[1,2]})"}) {
    Result<std::vector<EnvelopeAnswer>> decoded = DecodeEnvelopeAnswers(body, 2);
    ASSERT_FALSE(decoded.ok()) << body;
    EXPECT_EQ(decoded.status().reason(), "invalid_answer") << body;
  }
  // A missing body reads as an empty object: a success without an answer's figures.
  Result<std::vector<EnvelopeAnswer>> bare =
      DecodeEnvelopeAnswers(R"({"answers":[{"status":204}]})", 1);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)[0].body, "{}");
}

}  // namespace
}  // namespace expanse::wire
