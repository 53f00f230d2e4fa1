#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "spool/aggregator.h"
#include "spool/reasons.h"
#include "spool/spool_format.h"
#include "spool/spool_test_util.h"

namespace expanse::spool {
namespace {

using ::expanse::spool::testing::EncodeOrDie;
using ::expanse::spool::testing::ListNames;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kTwoMinutesMs = 2 * 60 * 1000;

class WorkerHealthTest : public testing::SpoolTest {};

TEST_F(WorkerHealthTest, AReportExpiresAfterTwoMinutes) {
  auto writer = OpenWriter("node01");
  const int64_t written = clock_.NowMs();
  ASSERT_TRUE(writer->WriteHealth(R"({"gpus":8,"nvml":"ok"})").ok());
  auto aggregator = OpenAggregator();

  clock_.Advance(kTwoMinutesMs);
  Result<WorkerHealthSnapshot> snapshot = aggregator->ReadWorkerHealth(clock_.NowMs());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->fresh, 1u);
  EXPECT_EQ(snapshot->Summary(), "worker health: 1 of 1 sampled worker nodes reporting");
  ASSERT_EQ(snapshot->reports.size(), 1u);
  EXPECT_EQ(snapshot->reports[0].host, "node01");
  EXPECT_EQ(snapshot->reports[0].boot_id, "boot-a");
  EXPECT_EQ(snapshot->reports[0].written_ms, written);
  EXPECT_EQ(snapshot->reports[0].payload, R"({"gpus":8,"nvml":"ok"})");
  EXPECT_TRUE(snapshot->reports[0].fresh);

  clock_.Advance(1);
  snapshot = aggregator->ReadWorkerHealth(clock_.NowMs());
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->fresh, 0u);
  EXPECT_EQ(snapshot->Summary(), "worker health: 0 of 1 sampled worker nodes reporting");
  ASSERT_EQ(snapshot->reports.size(), 1u);
  EXPECT_FALSE(snapshot->reports[0].fresh);

  ASSERT_TRUE(writer->WriteHealth("{}").ok());  // a new report replaces the old one
  snapshot = aggregator->ReadWorkerHealth(clock_.NowMs());
  EXPECT_EQ(snapshot->fresh, 1u);
  EXPECT_THAT(ListNames(HostDir("node01")), ElementsAre("health.rec"));
}

TEST_F(WorkerHealthTest, CountsHostsWithoutAReportAsNotFresh) {
  ASSERT_TRUE(OpenWriter("node01")->WriteHealth("{}").ok());
  ASSERT_NE(OpenWriter("node02"), nullptr);  // sampled before, no report now
  Result<WorkerHealthSnapshot> snapshot = OpenAggregator()->ReadWorkerHealth(clock_.NowMs());
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->Summary(), "worker health: 1 of 2 sampled worker nodes reporting");
}

TEST_F(WorkerHealthTest, AReportFromTheFarFutureIsNotFresh) {
  ASSERT_TRUE(OpenWriter("node01")->WriteHealth("{}").ok());
  Result<WorkerHealthSnapshot> snapshot =
      OpenAggregator()->ReadWorkerHealth(clock_.NowMs() - kTwoMinutesMs - 1);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->fresh, 0u);
}

TEST_F(WorkerHealthTest, BadReportsAreQuarantinedAndCounted) {
  Place("node01", kHealthFileName, "{\"json\": \"but not our format\"}");
  Place("node02", kHealthFileName,
        EncodeOrDie({"node01", "boot-a", 0, clock_.NowMs(), {{"worker_health", "{}"}}}));
  Place("node03", kHealthFileName,
        EncodeOrDie({"node03", "boot-a", 0, clock_.NowMs(), {{"gpu_series", "{}"}}}));
  Result<WorkerHealthSnapshot> snapshot = OpenAggregator()->ReadWorkerHealth(clock_.NowMs());
  ASSERT_TRUE(snapshot.ok());
  EXPECT_THAT(snapshot->reports, IsEmpty());
  EXPECT_EQ(snapshot->Summary(), "worker health: 0 of 3 sampled worker nodes reporting");
  EXPECT_EQ(snapshot->bad_by_reason[reason::kBadMagic], 1u);
  EXPECT_EQ(snapshot->bad_by_reason[reason::kHostMismatch], 1u);
  EXPECT_EQ(snapshot->bad_by_reason[reason::kMalformed], 1u);
  EXPECT_THAT(Quarantined(),
              ElementsAre("node01-health.rec-bad_magic", "node02-health.rec-host_mismatch",
                          "node03-health.rec-malformed"));
}

TEST_F(WorkerHealthTest, AnOversizedReportIsRefusedByTheWriter) {
  auto writer = OpenWriter("node01");
  EXPECT_EQ(writer->WriteHealth(std::string(65 << 10, 'x')).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace expanse::spool
