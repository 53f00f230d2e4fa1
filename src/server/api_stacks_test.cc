// The stacks of a job end to end: ingested in a batch from the compute's daemon, read back
// through the console API.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"

namespace expanse::server {
namespace api_stacks_test {
namespace {

using nlohmann::json;

constexpr int64_t kMinute = 60'000;

json Stack(const std::string& host, int minute, const std::string& folded, int count,
           bool gpu_idle = false) {
  return {{"job_id", "77"},
          {"host", host},
          {"window_start_ms", api_testing::kStart + minute * kMinute},
          {"window_end_ms", api_testing::kStart + (minute + 1) * kMinute},
          {"folded", folded},
          {"thread_state", "gil"},
          {"count", count},
          {"gpu_idle", gpu_idle}};
}

std::string StacksBatch(int sequence, const json& stacks) {
  return json{{"version", 1}, {"stream", "stacks"}, {"sequence", sequence}, {"stacks", stacks}}
      .dump();
}

class ApiStacksTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
  }

  Reply Ingest(int sequence, const json& stacks) {
    return Call("POST", "/dp/v1/ingest", StacksBatch(sequence, stacks), Bearer(credential_));
  }

  Reply Stacks(const std::string& query = "", const std::string& token = "") {
    return Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/stacks" + query, "",
                Bearer(token.empty() ? token_ : token));
  }

  std::string compute_;
  std::string credential_;
};

const json kWindows = json::array({
    Stack("worker1", 0, "train.py:main:10;train.py:step:20;torch.py:matmul:5", 40),
    Stack("worker2", 0, "train.py:main:10;train.py:step:20;torch.py:matmul:5", 30),
    Stack("worker1", 1, "train.py:main:10;data.py:load:7", 20, /*gpu_idle=*/true),
    Stack("worker1", 2, "train.py:main:10;train.py:step:20", 5),
});

TEST_F(ApiStacksTest, IngestedStacksAreSummedPerJob) {
  Reply ingested = Ingest(1, kWindows);
  ASSERT_EQ(ingested.status, 200) << ingested.body;

  Reply r = Stacks();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["total_count"], 95);
  EXPECT_EQ(r.body["distinct_stacks"], 3);
  ASSERT_EQ(r.body["stacks"].size(), 3u) << r.body;
  EXPECT_EQ(r.body["stacks"][0],
            (json{{"folded", "train.py:main:10;train.py:step:20;torch.py:matmul:5"},
                  {"thread_state", "gil"},
                  {"count", 70},
                  {"gpu_idle_count", 0}}));
  EXPECT_EQ(r.body["stacks"][1]["count"], 20);
  EXPECT_EQ(r.body["stacks"][1]["gpu_idle_count"], 20);
  EXPECT_EQ(r.body["top_frames"][0],
            (json{{"frame", "torch.py:matmul:5"}, {"self_count", 70}, {"total_count", 70}}));
  EXPECT_EQ(r.body["top_frames"].back(),
            (json{{"frame", "train.py:main:10"}, {"self_count", 0}, {"total_count", 95}}));

  // The list is cut to limit; the totals are still over the whole window.
  Reply top = Stacks("?limit=1");
  ASSERT_EQ(top.body["stacks"].size(), 1u);
  EXPECT_EQ(top.body["total_count"], 95);

  Reply window = Stacks("?from=" + std::to_string(api_testing::kStart + kMinute) +
                        "&to=" + std::to_string(api_testing::kStart + 2 * kMinute));
  ASSERT_EQ(window.status, 200) << window.body;
  ASSERT_EQ(window.body["stacks"].size(), 1u);
  EXPECT_EQ(window.body["stacks"][0]["folded"], "train.py:main:10;data.py:load:7");
  EXPECT_EQ(window.body["total_count"], 20);
}

// --stack-retention (30 days by default): the windows that ended longer ago than that are
// deleted, a batch at a time; the rest of the job's stacks are served as before.
TEST_F(ApiStacksTest, RetentionDeletesWindowsThatEndedLongerAgo) {
  ASSERT_EQ(Ingest(1, kWindows).status, 200);
  const int64_t thirty_days = int64_t{30} * 24 * 3600 * 1000;
  // The cut falls just after the end of minute 1's window: three windows expire.
  const int64_t now_ms = api_testing::kStart + 2 * kMinute + 1 + thirty_days;
  std::vector<int64_t> batches;
  for (int i = 0; i < 3; ++i) {
    Result<int64_t> deleted = app_->ExpireStacksOnce(now_ms, /*limit=*/2);
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    batches.push_back(*deleted);
  }
  EXPECT_EQ(batches, (std::vector<int64_t>{2, 1, 0}));
  Reply r = Stacks();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["total_count"], 5);
  ASSERT_EQ(r.body["stacks"].size(), 1u) << r.body;
  EXPECT_EQ(r.body["stacks"][0]["folded"], "train.py:main:10;train.py:step:20");
  // Where the retention cuts now, for the console to tell a deleted job's stacks from none.
  EXPECT_EQ(r.body["retained_from_ms"], clock_.NowMs() - thirty_days);
  EXPECT_EQ(r.body["stack_retention_ms"], thirty_days);
}

TEST_F(ApiStacksTest, RedeliveredBatchesDoNotDoubleCounts) {
  ASSERT_EQ(Ingest(1, kWindows).status, 200);
  Reply again = Ingest(1, kWindows);
  ASSERT_EQ(again.status, 200) << again.body;
  // A later batch re-reporting a window replaces its count as well.
  ASSERT_EQ(Ingest(2, json::array({kWindows[0]})).status, 200);
  EXPECT_EQ(Stacks().body["total_count"], 95);
}

TEST_F(ApiStacksTest, OtherOrganisationsGetNotFound) {
  ASSERT_EQ(Ingest(1, kWindows).status, 200);
  auto other = app_->control().Bootstrap("other", "Other", "o@other.example", "pw-o", "t");
  ASSERT_TRUE(other.ok()) << other.status();
  Reply r = Stacks("", other->api_token);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Code(r), "not_found");
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/stacks").status, 401);
}

TEST_F(ApiStacksTest, UnknownJobHasNoStacks) {
  Reply r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/999/stacks", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["stacks"], json::array());
  EXPECT_EQ(r.body["top_frames"], json::array());
  EXPECT_EQ(r.body["total_count"], 0);
}

TEST_F(ApiStacksTest, BadParametersAndBatchesAreRefused) {
  for (const char* query : {"?limit=0", "?limit=10001", "?from=x", "?from=5&to=5", "?to=-1"}) {
    Reply r = Stacks(query);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_EQ(Code(r), "invalid_argument") << query;
  }
  json bad = kWindows;
  bad[3]["count"] = 0;
  Reply refused = Ingest(1, bad);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(Code(refused), "invalid_batch");
  EXPECT_EQ(refused.body["error"]["message"],
            "batch.stacks[3].count must be an integer from 1 to 1000000000");
  EXPECT_EQ(Stacks().body["stacks"], json::array());
}

}  // namespace
}  // namespace api_stacks_test
}  // namespace expanse::server
