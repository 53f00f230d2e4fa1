#include "server/ingest_stacks.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/ingest_batch.h"

namespace expanse::server {
namespace ingest_stacks_test {
namespace {

using nlohmann::json;

json Entry() {
  return {{"job_id", "123_4"},
          {"host", "worker2"},
          {"window_start_ms", 1'800'000'000'000},
          {"window_end_ms", 1'800'000'060'000},
          {"folded", "train.py:<module>:1;train.py:main:40;torch/nn/module.py:_call_impl:1501"},
          {"thread_state", "gil"},
          {"count", 57},
          {"gpu_idle", true}};
}

TEST(IngestStacksTest, ParsesEveryField) {
  json minimal = Entry();
  minimal.erase("thread_state");
  minimal.erase("gpu_idle");
  std::vector<store::StackSample> out;
  ASSERT_TRUE(ParseStacks(json::array({Entry(), minimal}), "cmp_1", &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].compute_id, "cmp_1");
  EXPECT_EQ(out[0].job_id, "123_4");
  EXPECT_EQ(out[0].host, "worker2");
  EXPECT_EQ(out[0].window_start_ms, 1'800'000'000'000);
  EXPECT_EQ(out[0].window_end_ms, 1'800'000'060'000);
  EXPECT_EQ(out[0].folded, Entry()["folded"].get<std::string>());
  EXPECT_EQ(out[0].thread_state, "gil");
  EXPECT_EQ(out[0].count, 57);
  EXPECT_TRUE(out[0].gpu_idle);
  EXPECT_EQ(out[1].thread_state, "");
  EXPECT_FALSE(out[1].gpu_idle);
}

TEST(IngestStacksTest, IsASectionOfTheBatch) {
  json batch = {
      {"version", 1}, {"stream", "stacks"}, {"sequence", 3}, {"stacks", json::array({Entry()})}};
  auto parsed = ParseIngestBatch(batch.dump(), "cmp_1");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->stacks.size(), 1u);
  EXPECT_EQ(parsed->stacks[0].compute_id, "cmp_1");

  batch["stacks"] = json::object();
  EXPECT_EQ(ParseIngestBatch(batch.dump(), "cmp_1").status(),
            InvalidArgumentError("batch.stacks must be an array").WithReason("invalid_batch"));
}

TEST(IngestStacksTest, KeepsFramesVerbatim) {
  json entry = Entry();
  entry["folded"] = "x'); DROP TABLE job_stacks;--:f:1;ünïcødé.py:<lambda>:2;😀.py:%_*:3";
  std::vector<store::StackSample> out;
  ASSERT_TRUE(ParseStacks(json::array({entry}), "cmp_1", &out).ok());
  EXPECT_EQ(out[0].folded, entry["folded"].get<std::string>());
}

struct BadStack {
  std::string field;
  json value;  // null: remove the field
  std::string message;
};

class IngestStacksRejectsTest : public ::testing::TestWithParam<BadStack> {};

TEST_P(IngestStacksRejectsTest, NamesTheField) {
  json entry = Entry();
  if (GetParam().value.is_null()) {
    entry.erase(GetParam().field);
  } else {
    entry[GetParam().field] = GetParam().value;
  }
  std::vector<store::StackSample> out;
  const Status status = ParseStacks(json::array({Entry(), entry}), "cmp_1", &out);
  EXPECT_EQ(status, InvalidArgumentError(GetParam().message).WithReason("invalid_batch"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, IngestStacksRejectsTest,
    ::testing::Values(
        BadStack{"job_id", nullptr, "batch.stacks[1].job_id is required"},
        BadStack{"job_id", 7, "batch.stacks[1].job_id must be a string"},
        BadStack{"job_id", std::string(65, '1'), "batch.stacks[1].job_id is longer than 64 bytes"},
        BadStack{"host", "a b", "batch.stacks[1].host may contain only [A-Za-z0-9._-]"},
        BadStack{"window_start_ms", 0,
                 "batch.stacks[1].window_start_ms must be an integer from 1 to "
                 "253402300799998"},
        BadStack{"window_end_ms", 1'800'000'000'000,
                 "batch.stacks[1].window_end_ms must be an integer from 1800000000001 to "
                 "253402300799999"},
        BadStack{"window_end_ms", 18446744073709551615u,
                 "batch.stacks[1].window_end_ms must be an integer from 1800000000001 to "
                 "253402300799999"},
        BadStack{"folded", "", "batch.stacks[1].folded is empty"},
        BadStack{"folded", std::string(16385, 'x'),
                 "batch.stacks[1].folded is longer than 16384 bytes"},
        BadStack{"folded", "a.py:f:1\tb.py:g:2",
                 "batch.stacks[1].folded contains a control character"},
        BadStack{"folded", "a.py:f:1;",
                 "batch.stacks[1].folded has an empty frame (frames are separated by one ';')"},
        BadStack{"folded", "a.py:f:1;;b.py:g:2",
                 "batch.stacks[1].folded has an empty frame (frames are separated by one ';')"},
        BadStack{"thread_state", "sleeping",
                 "batch.stacks[1].thread_state must be gil, running, idle or empty (unknown)"},
        BadStack{"count", 0, "batch.stacks[1].count must be an integer from 1 to 1000000000"},
        BadStack{"count", 2.5, "batch.stacks[1].count must be an integer from 1 to 1000000000"},
        BadStack{"count", nullptr, "batch.stacks[1].count must be an integer from 1 to 1000000000"},
        BadStack{"gpu_idle", 1, "batch.stacks[1].gpu_idle must be true or false"}));

TEST(IngestStacksTest, RefusesNonObjectsAndInvalidUtf8) {
  std::vector<store::StackSample> out;
  EXPECT_EQ(ParseStacks(json::array({Entry(), "x"}), "cmp_1", &out),
            InvalidArgumentError("batch.stacks[1] must be an object").WithReason("invalid_batch"));
  // The JSON parser refuses invalid UTF-8 in a document; a json value built in code can hold it.
  json entry = Entry();
  entry["folded"] = std::string("a.py:\xff:1");
  EXPECT_EQ(ParseStacks(json::array({entry}), "cmp_1", &out),
            InvalidArgumentError("batch.stacks[0].folded is not valid UTF-8")
                .WithReason("invalid_batch"));
}

}  // namespace
}  // namespace ingest_stacks_test
}  // namespace expanse::server
