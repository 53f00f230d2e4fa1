// SqliteStore as a JobStore: the list of trace segments, on SQLite and PostgreSQL.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_segments_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kNow;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kWindow = 10'000;

std::string Sha(char c) { return std::string(64, c); }

TraceSegmentRecord Segment(char sha, int64_t pid, int64_t index,
                           const std::string& host = "gpu01") {
  return TraceSegmentRecord{.compute_id = "cmp_a",
                            .sha256 = Sha(sha),
                            .job_id = "7",
                            .host = host,
                            .pid = pid,
                            .window_start_ms = kNow + index * kWindow,
                            .window_end_ms = kNow + (index + 1) * kWindow,
                            .trigger_id = "7-1-GPU-a",
                            .trigger_reason = "gpu_idle",
                            .bytes = 1000 + pid,
                            .events = 12,
                            .received_ms = kNow + 100 * kWindow + index,
                            .pc_sampling = ""};
}

class TraceSegmentsTest : public store_testing::SqliteStoreTest {
 protected:
  void SetUp() override {
    SqliteStoreTest::SetUp();
    MakeCompute("cmp_a");
    MakeCompute("cmp_b");
  }
  JobStore& jobs() { return store().Jobs(); }
  std::vector<std::string> removed_;
  Status Removed(const TraceSegmentRecord& s) {
    removed_.push_back(s.sha256);
    return OkStatus();
  }
  // "true" (new), "false" (there already) or the error.
  std::string Put(const TraceSegmentRecord& s) {
    const Result<bool> put = jobs().PutTraceSegment(s);
    return put.ok() ? (*put ? "true" : "false") : put.status().ToString();
  }
  // "host/pid@index:sha's first digit" of each segment listed, in order.
  std::vector<std::string> Listed(int64_t from_ms = 0, int64_t to_ms = 0, int limit = 100) {
    const auto segments = jobs().JobTraceSegments("cmp_a", "7", from_ms, to_ms, limit);
    EXPECT_TRUE(segments.ok()) << segments.status();
    std::vector<std::string> out;
    for (const TraceSegmentRecord& s :
         segments.ok() ? *segments : std::vector<TraceSegmentRecord>{})
      out.push_back(s.host + "/" + std::to_string(s.pid) + "@" +
                    std::to_string((s.window_start_ms - kNow) / kWindow) + ":" + s.sha256[0]);
    return out;
  }
};

INSTANTIATE_TEST_SUITE_P(Backings, TraceSegmentsTest, kBackings, BackingName);

TEST_P(TraceSegmentsTest, KeepsTheWindowsPcSamplingSummary) {
  TraceSegmentRecord sampled = Segment('a', 10, 1);
  sampled.pc_sampling = R"({"state":"sampled","total_samples":860})";
  EXPECT_EQ(Put(sampled), "true");
  EXPECT_EQ(Put(Segment('b', 10, 0)), "true");
  EXPECT_EQ(jobs().GetTraceSegment("cmp_a", Sha('a'))->pc_sampling, sampled.pc_sampling);
  EXPECT_EQ(jobs().GetTraceSegment("cmp_a", Sha('b'))->pc_sampling, "");
  const auto listed = jobs().JobTraceSegments("cmp_a", "7", 0, 0, 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].pc_sampling, sampled.pc_sampling);
  TraceSegmentRecord oversized = Segment('c', 10, 2);
  oversized.pc_sampling = std::string(kMaxSegmentPcSamplingBytes + 1, 'x');
  EXPECT_EQ(Put(oversized),
            "INVALID_ARGUMENT: trace segment: pc_sampling is longer than 4096 bytes");
}

TEST_P(TraceSegmentsTest, TheSameBytesTwiceAreOneSegmentAndTheFirstRecordStays) {
  EXPECT_EQ(Put(Segment('a', 10, 1)), "true");
  EXPECT_EQ(Put(Segment('b', 10, 0)), "true");
  TraceSegmentRecord again = Segment('a', 10, 1);
  again.received_ms += 5;
  EXPECT_EQ(Put(again), "false");
  // Another compute's segment with the same bytes is its own.
  TraceSegmentRecord other = Segment('a', 10, 1);
  other.compute_id = "cmp_b";
  EXPECT_EQ(Put(other), "true");
  EXPECT_THAT(Listed(), ElementsAre("gpu01/10@0:b", "gpu01/10@1:a"));
  const auto got = jobs().GetTraceSegment("cmp_a", Sha('a'));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->received_ms, Segment('a', 10, 1).received_ms);
  EXPECT_EQ(got->trigger_reason, "gpu_idle");
  EXPECT_EQ(got->bytes, 1010);
  EXPECT_EQ(jobs().GetTraceSegment("cmp_a", Sha('c')).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(jobs().GetTraceSegment("cmp_a", "../etc").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_P(TraceSegmentsTest, AJobsSegmentsOverlappingARangeOldestFirst) {
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('c', 20, 2, "gpu02")).ok());
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('d', 20, 2, "gpu01")).ok());
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('e', 30, 0)).ok());
  TraceSegmentRecord other_job = Segment('f', 30, 0);
  other_job.job_id = "8";
  ASSERT_TRUE(jobs().PutTraceSegment(other_job).ok());
  EXPECT_THAT(Listed(), ElementsAre("gpu01/30@0:e", "gpu01/20@2:d", "gpu02/20@2:c"));
  EXPECT_THAT(Listed(kNow + kWindow, 0), ElementsAre("gpu01/20@2:d", "gpu02/20@2:c"));
  EXPECT_THAT(Listed(0, kNow + kWindow), ElementsAre("gpu01/30@0:e"));
  EXPECT_THAT(Listed(0, 0, 1), ElementsAre("gpu01/30@0:e"));
  EXPECT_EQ(jobs().JobTraceSegments("cmp_a", "7", 0, 0, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().JobTraceSegments("cmp_zz", "7", 0, 0, 10).status(),
            NotFoundError("compute cmp_zz not found"));
}

TEST_P(TraceSegmentsTest, ExpiryForgetsTheOldestAndSaysWhich) {
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('a', 10, 0)).ok());
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('b', 10, 1)).ok());
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('c', 10, 2)).ok());
  const int64_t before = Segment('c', 10, 2).received_ms;  // 'a' and 'b' are older
  const auto remove = [&](const TraceSegmentRecord& r) { return Removed(r); };
  auto expired = jobs().ExpireTraceSegments(before, 1, remove);
  ASSERT_TRUE(expired.ok()) << expired.status();
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].sha256, Sha('a'));
  expired = jobs().ExpireTraceSegments(before, 10, remove);
  ASSERT_TRUE(expired.ok()) << expired.status();
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].sha256, Sha('b'));
  EXPECT_THAT(*jobs().ExpireTraceSegments(before, 10, remove), IsEmpty());
  EXPECT_THAT(Listed(), ElementsAre("gpu01/10@2:c"));
  EXPECT_EQ(removed_, (std::vector<std::string>{Sha('a'), Sha('b')}));
}

TEST_P(TraceSegmentsTest, ARecordWhoseBytesCannotBeRemovedIsKept) {
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('a', 10, 0)).ok());
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('b', 10, 1)).ok());
  const auto expired =
      jobs().ExpireTraceSegments(kNow + 200 * kWindow, 10, [&](const TraceSegmentRecord& s) {
        return s.sha256 == Sha('b') ? UnavailableError("disk away") : Removed(s);
      });
  EXPECT_EQ(expired.status(), UnavailableError("disk away"));
  EXPECT_THAT(Listed(), ElementsAre("gpu01/10@1:b"));  // 'a', whose bytes went, is forgotten
}

// Removing bytes (a bucket's DELETE, seconds) holds no store lock: another replica's writes
// go on meanwhile. (SQLite in memory has no other replica: a second store is a new database.)
TEST_P(TraceSegmentsTest, BytesAreRemovedWithoutHoldingTheStore) {
  ASSERT_TRUE(jobs().PutTraceSegment(Segment('a', 10, 0)).ok());
  Result<std::unique_ptr<Store>> other = OpenAnother();
  ASSERT_TRUE(other.ok()) << other.status();
  const auto expired =
      jobs().ExpireTraceSegments(kNow + 200 * kWindow, 10, [&](const TraceSegmentRecord& s) {
        const Status wrote = (*other)->CreateOrganization("meanwhile", "M", kNow).status();
        EXPECT_TRUE(wrote.ok()) << wrote;
        return Removed(s);
      });
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->size(), 1u);
  EXPECT_THAT(Listed(), IsEmpty());
}

TEST_P(TraceSegmentsTest, BadRecordsAreRefused) {
  const auto refused = [&](TraceSegmentRecord s) {
    return jobs().PutTraceSegment(s).status().code();
  };
  TraceSegmentRecord s = Segment('a', 10, 0);
  s.sha256 = std::string(64, 'A');
  EXPECT_EQ(refused(s), StatusCode::kInvalidArgument);
  s = Segment('a', 0, 0);
  EXPECT_EQ(refused(s), StatusCode::kInvalidArgument);
  s = Segment('a', 10, 0);
  s.window_end_ms = s.window_start_ms;
  EXPECT_EQ(refused(s), StatusCode::kInvalidArgument);
  s = Segment('a', 10, 0);
  s.trigger_id = std::string(129, 'x');
  EXPECT_EQ(refused(s), StatusCode::kInvalidArgument);
  s = Segment('a', 10, 0);
  s.bytes = 0;
  EXPECT_EQ(refused(s), StatusCode::kInvalidArgument);
  s = Segment('a', 10, 0);
  s.compute_id = "cmp_zz";
  EXPECT_EQ(refused(s), StatusCode::kNotFound);
  EXPECT_THAT(Listed(), IsEmpty());
}

}  // namespace
}  // namespace sqlite_store_segments_test
}  // namespace expanse::store
